#define _GNU_SOURCE
#include "large.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "../include/hakmem.h"
#include "chaos.h"
#include "clock.h"
#include "config.h"
#include "drawdown.h"
#include "exit_key.h"
#include "fill.h"
#include "lock.h"
#include "os.h"
#include "pagemap.h"
#include "policy.h"
#include "report.h"
#include "stats.h"
#include "trace.h"

#define HK_LARGE_MAP_MIN ((size_t)4 << 20) /* smallest mapping asked of the OS */
#define HK_LARGE_GROWTH 8 /* a miss maps at least 1/8 of what the tier has mapped (see below) */
#define HK_LARGE_SHRINK_MIN ((size_t)64 << 10) /* a shrink frees the tail from this much */
#define HK_LARGE_ROOM 2 /* a block moved by a small growth gets 1/2 of its length to grow into */
#define HK_LARGE_ROOM_RESIDENT 8 /* or 1/8, where it is copied into resident free memory */
#define HK_LARGE_CHUNK ((size_t)2 << 20) /* a SuperSlab's length and alignment */

enum { HK_EXT_LIVE = 1, HK_EXT_FREE };
enum { HK_AGE_DIRTY = 0, HK_AGE_CLEAN = 1 }; /* age lists: free extents with / without dirt */

/* An extent: a page-aligned range of mapped memory, live (a block) or free. */
struct hk_ext {
    uintptr_t addr;
    size_t len;
    size_t dirty;                 /* free: bytes that may be resident (an estimate) */
    uintptr_t dlo, dhi;           /* free: every page that may be resident lies in [dlo, dhi)
                                   * (empty when dirty is 0) */
    uint64_t idle_since;          /* free: since when (mapped, freed or released) */
    uint8_t state;                /* HK_EXT_* */
    uint8_t zero;                 /* free: every byte known to be zero */
    uint8_t purged;               /* free: some of it was released by the tier (its pages
                                   * faulted in again soon are refaults, see ACE) */
    uint8_t marks;                /* live or free: may hold free marks (block.h), where small
                                   * or mid blocks lay: a SuperSlab was freed into it since its
                                   * pages were last released (hk_take) */
    uint8_t bin;
    uint8_t inner;                /* live: a SuperSlab (HK_LARGE_INNER), no program block */
    uint8_t probe;                /* live: a probe of whether the program fills its blocks
                                   * (fill.h), looked at when freed, or at its arena's next
                                   * cut of a candidate where written whole by then */
    struct hk_ext *snext, *enext; /* hash chains: by start (all), by end (free ones) */
    struct hk_ext *next, *prev;   /* bin list of a free extent; the spare list */
    struct hk_ext *anext, *aprev; /* age list of a free extent, oldest first */
};

/* Hash table of extents by start or by end address. */
struct hk_htab {
    struct hk_ext **b;
    size_t cap, n; /* cap: a power of two, or 0 */
};

#define HK_NBINS 144  /* free extents' size bins (hk_bin) */
#define HK_RECENT 64  /* blocks freed last, for double frees (hk_recently_freed) */
#define HK_PEND 32    /* frees an arena holds for its lock's next holder (hk_pend_push) */

/* An arena: a page heap of its own, its lock guarding everything in it. A thread takes its
 * blocks from one arena (hk_arena_mine); a block goes back to the arena that made it, found
 * in the page map. */
struct hk_arena {
    struct hk_lock lock;
    struct hk_ext *spare; /* free records */
    size_t nspare;
    struct hk_htab by_start, by_end; /* every extent by start; free ones by end */
    struct hk_ext *bins[HK_NBINS];
    uint64_t binmap[(HK_NBINS + 63) / 64];
    struct hk_ext *age_head[2], *age_tail[2];
    _Atomic size_t free_total; /* written under the lock; other arenas read them (hk_get) */
    _Atomic size_t free_dirty;
    /* Counters (under the lock). */
    size_t live_n;
    _Atomic size_t live_bytes;  /* written under the lock, read by anyone (hk_get) */
    _Atomic size_t mapped_bytes; /* likewise (hk_large_decay sums them) */
    _Atomic size_t live_peak;  /* likewise */
    /* Likewise: the most live and dirty free bytes together as a block was cut, since the
     * last window began (from the live bytes alone). Free memory between live blocks at a
     * peak was part of what the peak needed: the next wave's blocks may fall on it. */
    _Atomic size_t foot_peak;
    uint64_t hits, misses, refault_bytes, purged_bytes;
    uint64_t in_place, copied, mremaps, gathers, gathered_bytes, steals;
    struct hk_drawdown drawn;  /* of the dirty free bytes (drawdown.h) */
    /* Start addresses of the blocks freed last: a freed block merges with free neighbours
     * and its start may no longer begin an extent, yet a second free of it is still a
     * double free. */
    uintptr_t recent[HK_RECENT];
    unsigned recent_next;
    uint64_t queued; /* frees that waited in pend (under the lock) */
    /* The newest probe block of the arena (fill.h), live, that the next candidate's cut has
     * not looked at yet; NULL: none. */
    struct hk_ext *probe;
    /* Frees handed to the lock's holder (hk_pend_push): the starts of blocks freed by a
     * thread of another arena, or while the lock was taken, in slots that any thread fills
     * with one compare-and-swap and whoever next holds the lock empties (hk_arena_drain). On
     * lines of their own: the threads that fill them do not touch the arena's tables. */
    _Alignas(64) _Atomic uintptr_t pend[HK_PEND];
    _Atomic int npend; /* filled slots, about: filled before counted, emptied before uncounted */
} __attribute__((aligned(64)));

static struct hk_arena hk_arenas[HK_LARGE_ARENAS_MAX] = {
    [0 ... HK_LARGE_ARENAS_MAX - 1] = {.lock = HK_LOCK_INIT}};
static _Atomic int hk_pm_failed; /* a page map entry could not be written (no memory) */
/* When a huge block (HK_HUGE) was last cut from resident free memory, or from memory released
 * not long before (hk_take): huge blocks are being reused, and a freed one is kept. */
static _Atomic uint64_t hk_huge_reused;
/* Pieces gathered while the tier has had memory mapped, in all arenas together: a free extent
 * that moves between arenas takes its pieces along, so no arena can count its own. */
static _Atomic size_t hk_moved_pieces;

/* A count written only under its arena's lock and read by anyone (no read-modify-write). */
static inline size_t hk_get(_Atomic size_t *x) {
    return atomic_load_explicit(x, memory_order_relaxed);
}
static inline void hk_set(_Atomic size_t *x, size_t v) {
    atomic_store_explicit(x, v, memory_order_relaxed);
}

/* Records that a block of arena a starts at p: a free finds its arena there. */
static void hk_arena_mark(struct hk_arena *a, uintptr_t p) {
    if (!hk_pagemap_set(p, (unsigned)(a - hk_arenas) + 1))
        atomic_store_explicit(&hk_pm_failed, 1, memory_order_relaxed);
}

/* --- extent records ------------------------------------------------------------------------- */

#define HK_EXT_CHUNK ((size_t)64 << 10)

/* Makes sure n records can be taken without failing. */
static int hk_ext_reserve(struct hk_arena *a, size_t n) {
    while (a->nspare < n) {
        struct hk_ext *chunk = hk_os_map(HK_EXT_CHUNK);
        if (!chunk) return 0;
        for (size_t i = 0; i < HK_EXT_CHUNK / sizeof *chunk; i++) {
            chunk[i].next = a->spare;
            a->spare = &chunk[i];
            a->nspare++;
        }
    }
    return 1;
}

static struct hk_ext *hk_ext_take(struct hk_arena *a) {
    struct hk_ext *e = a->spare;
    HK_ASSERT(e != NULL);
    a->spare = e->next;
    a->nspare--;
    *e = (struct hk_ext){0};
    return e;
}

static void hk_ext_give(struct hk_arena *a, struct hk_ext *e) {
    e->state = 0;
    e->next = a->spare;
    a->spare = e;
    a->nspare++;
}

/* --- hash tables by start and by end address ------------------------------------------------- */


static inline size_t hk_hash(uintptr_t a, size_t cap) {
    return (size_t)(((a >> 12) * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}
static inline struct hk_ext **hk_chain(struct hk_ext *e, int by_end) {
    return by_end ? &e->enext : &e->snext;
}
static inline uintptr_t hk_key(const struct hk_ext *e, int by_end) {
    return by_end ? e->addr + e->len : e->addr;
}

static struct hk_ext *hk_tab_find(struct hk_htab *t, uintptr_t key, int by_end) {
    if (!t->cap) return NULL;
    for (struct hk_ext *e = t->b[hk_hash(key, t->cap)]; e; e = *hk_chain(e, by_end))
        if (hk_key(e, by_end) == key) return e;
    return NULL;
}

/* Keeps at most one extent per bucket on average; 0 when the OS refuses memory. */
static int hk_tab_reserve(struct hk_htab *t, int by_end) {
    if (t->n < t->cap) return 1;
    size_t cap = t->cap ? t->cap * 2 : 1024;
    struct hk_ext **b = hk_os_map(cap * sizeof *b);
    if (!b) return 0;
    for (size_t i = 0; i < t->cap; i++) {
        struct hk_ext *e = t->b[i];
        while (e) {
            struct hk_ext *next = *hk_chain(e, by_end);
            size_t h = hk_hash(hk_key(e, by_end), cap);
            *hk_chain(e, by_end) = b[h];
            b[h] = e;
            e = next;
        }
    }
    if (t->b) hk_os_unmap(t->b, t->cap * sizeof *t->b);
    t->b = b;
    t->cap = cap;
    return 1;
}

/* n spare records, and tables that are not overfull (a few entries more only lengthen the
 * chains until the next reserve grows them). */
static int hk_reserve(struct hk_arena *a, size_t n) {
    return hk_ext_reserve(a, n) && hk_tab_reserve(&a->by_start, 0) && hk_tab_reserve(&a->by_end, 1);
}

static void hk_tab_insert(struct hk_htab *t, struct hk_ext *e, int by_end) {
    size_t h = hk_hash(hk_key(e, by_end), t->cap);
    *hk_chain(e, by_end) = t->b[h];
    t->b[h] = e;
    t->n++;
}

static void hk_tab_remove(struct hk_htab *t, struct hk_ext *e, int by_end) {
    struct hk_ext **pp = &t->b[hk_hash(hk_key(e, by_end), t->cap)];
    while (*pp != e) pp = hk_chain(*pp, by_end);
    *pp = *hk_chain(e, by_end);
    t->n--;
}

/* --- free extents: bins by size, age lists -------------------------------------------------- */

/* Four bins per doubling of the page count: bin(len) grows with len. */
static inline unsigned hk_bin(size_t len) {
    size_t pg = len >> 12;
    if (pg <= 4) return (unsigned)pg - 1;
    unsigned e = 63u - (unsigned)__builtin_clzl(pg - 1);
    return 4u * (e - 1u) + (unsigned)(((pg - 1) >> (e - 2u)) & 3u);
}

static inline void hk_live_grew(struct hk_arena *a, size_t n) {
    size_t live = hk_get(&a->live_bytes) + n;
    hk_set(&a->live_bytes, live);
    if (live > hk_get(&a->live_peak)) hk_set(&a->live_peak, live);
    size_t foot = live + hk_get(&a->free_dirty);
    if (foot > hk_get(&a->foot_peak)) hk_set(&a->foot_peak, foot);
}

static inline int hk_age_of(const struct hk_ext *e) {
    return e->dirty ? HK_AGE_DIRTY : HK_AGE_CLEAN;
}

static void hk_free_insert(struct hk_arena *a, struct hk_ext *e) {
    unsigned b = hk_bin(e->len);
    int age = hk_age_of(e);
    e->state = HK_EXT_FREE;
    e->bin = (uint8_t)b;
    hk_tab_insert(&a->by_start, e, 0);
    hk_tab_insert(&a->by_end, e, 1);
    e->prev = NULL;
    e->next = a->bins[b];
    if (e->next) e->next->prev = e;
    a->bins[b] = e;
    a->binmap[b / 64] |= (uint64_t)1 << (b % 64);
    /* Age list, sorted by idle_since (pieces of a split extent keep their older time). */
    struct hk_ext *after = a->age_tail[age];
    while (after && after->idle_since > e->idle_since) after = after->aprev;
    e->aprev = after;
    e->anext = after ? after->anext : a->age_head[age];
    if (e->anext) e->anext->aprev = e;
    else a->age_tail[age] = e;
    if (after) after->anext = e;
    else a->age_head[age] = e;
    hk_set(&a->free_total, hk_get(&a->free_total) + e->len);
    hk_set(&a->free_dirty, hk_get(&a->free_dirty) + e->dirty);
}

static void hk_free_remove(struct hk_arena *a, struct hk_ext *e) {
    unsigned b = e->bin;
    int age = hk_age_of(e);
    hk_tab_remove(&a->by_start, e, 0);
    hk_tab_remove(&a->by_end, e, 1);
    if (e->prev) e->prev->next = e->next;
    else a->bins[b] = e->next;
    if (e->next) e->next->prev = e->prev;
    if (!a->bins[b]) a->binmap[b / 64] &= ~((uint64_t)1 << (b % 64));
    if (e->aprev) e->aprev->anext = e->anext;
    else a->age_head[age] = e->anext;
    if (e->anext) e->anext->aprev = e->aprev;
    else a->age_tail[age] = e->aprev;
    e->next = e->prev = e->anext = e->aprev = NULL;
    hk_set(&a->free_total, hk_get(&a->free_total) - e->len);
    hk_set(&a->free_dirty, hk_get(&a->free_dirty) - e->dirty);
}

/* Bytes of [a, b) inside [lo, hi). */
static inline size_t hk_overlap(uintptr_t a, uintptr_t b, uintptr_t lo, uintptr_t hi) {
    uintptr_t x = a > lo ? a : lo, y = b < hi ? b : hi;
    return y > x ? y - x : 0;
}

/* Sets e's dirt: dirty bytes within [lo, hi) (clipped to e), none if that is empty. */
static void hk_dirt_set(struct hk_ext *e, size_t dirty, uintptr_t lo, uintptr_t hi) {
    uintptr_t end = e->addr + e->len;
    if (lo < e->addr) lo = e->addr;
    if (hi > end) hi = end;
    if (hi <= lo || dirty == 0) {
        e->dirty = 0;
        e->dlo = e->dhi = 0;
        return;
    }
    e->dirty = dirty < hi - lo ? dirty : hi - lo;
    e->dlo = lo;
    e->dhi = hi;
}

/* Adds free neighbour x's dirt to e's (which now covers both): the span grows to hold both. */
static void hk_dirt_add(struct hk_ext *e, const struct hk_ext *x) {
    if (!x->dirty) return;
    if (!e->dirty) {
        e->dlo = x->dlo;
        e->dhi = x->dhi;
    } else {
        if (x->dlo < e->dlo) e->dlo = x->dlo;
        if (x->dhi > e->dhi) e->dhi = x->dhi;
    }
    e->dirty += x->dirty;
}

/* Makes e (in no table; len, dirt, zero and idle_since set) free, merged with its free
 * neighbours: the dirt adds up, zero holds if it held everywhere, the newest time wins. */
static void hk_free_merge_insert(struct hk_arena *a, struct hk_ext *e) {
    struct hk_ext *l = hk_tab_find(&a->by_end, e->addr, 1);
    if (l && l->state == HK_EXT_FREE) {
        hk_free_remove(a, l);
        e->addr = l->addr;
        e->len += l->len;
        hk_dirt_add(e, l);
        e->zero &= l->zero;
        e->purged |= l->purged;
        e->marks |= l->marks;
        if (l->idle_since > e->idle_since) e->idle_since = l->idle_since;
        hk_ext_give(a, l);
    }
    struct hk_ext *r = hk_tab_find(&a->by_start, e->addr + e->len, 0);
    if (r && r->state == HK_EXT_FREE) {
        hk_free_remove(a, r);
        e->len += r->len;
        hk_dirt_add(e, r);
        e->zero &= r->zero;
        e->purged |= r->purged;
        e->marks |= r->marks;
        if (r->idle_since > e->idle_since) e->idle_since = r->idle_since;
        hk_ext_give(a, r);
    }
    hk_free_insert(a, e);
}

static inline int hk_fits(const struct hk_ext *e, size_t len, size_t align) {
    uintptr_t p = hk_align_up(e->addr, align);
    return p + len <= e->addr + e->len;
}

/* The shortest extent of bin b that can hold len bytes at alignment align (of the first
 * HK_FIT_TRIES; the dirtier of two as long), or NULL; only one of whose pages at least dirt
 * bytes may be resident. */
#define HK_FIT_TRIES 32
static struct hk_ext *hk_best_in(struct hk_arena *a, unsigned b, size_t len, size_t align,
                                 size_t dirt) {
    struct hk_ext *best = NULL;
    int tries = HK_FIT_TRIES;
    for (struct hk_ext *e = a->bins[b]; e && tries--; e = e->next)
        if (hk_fits(e, len, align) && e->dirty >= dirt &&
            (!best || e->len < best->len || (e->len == best->len && e->dirty > best->dirty)))
            best = e;
    return best;
}

/* A free extent that can hold len bytes at alignment align, or NULL. Resident memory first:
 * the shortest extent in the block's size bin or the next (up to about one and a half times
 * its length) that may hold half the block's worth of resident pages, where the block is cut
 * over them (hk_place). Else best fit: the shortest of the lowest bin that has one. Best fit
 * alone cut blocks from untouched memory (the rest of a new mapping) as soon as that was the
 * shorter fit, faulting in fresh pages while freed resident ones sat idle. Reaching further,
 * to four times the length, split long resident extents for short blocks: the long blocks
 * after them found none, faulted in fresh pages, and the pieces left over grew the dirty
 * bytes past the budget, which released them to be faulted in again (large_churn, 512 live
 * blocks of 1..4 MiB: 596,745 page faults and 1,383 MiB peak RSS, against 334,617 and 1,308
 * MiB with this, and the same with best fit alone). Beyond that reach, an extent that may
 * hold the whole block's worth of resident pages is still taken before untouched memory, the
 * shortest of the lowest bin that has one: the block then need fault in nothing, and what is
 * left of the extent is resident memory still (large_churn: 1,404 MiB peak RSS and 359,000 page
 * faults without this pass, 1,318 MiB and 337,000 with it, 1.12 times as fast). */
#define HK_FIT_REACH 2 /* bins looked at for half a block of resident memory: half a doubling */
/* hk_find_fit's first pass (below): an extent with resident memory for the block, or NULL. */
static struct hk_ext *hk_find_resident(struct hk_arena *a, size_t len, size_t align) {
    size_t dirty = hk_get(&a->free_dirty);
    struct hk_ext *e;
    for (unsigned bb = hk_bin(len), reach = bb + HK_FIT_REACH; bb < HK_NBINS; bb++) {
        size_t dirt = bb < reach ? len / 2 : len; /* half the block's worth near, all beyond */
        if (dirty < dirt) return NULL;
        if ((a->binmap[bb / 64] >> (bb % 64) & 1) &&
            (e = hk_best_in(a, bb, len, align, dirt)) != NULL)
            return e;
    }
    return NULL;
}

/* A free extent for a block of len bytes: with resident set, only one holding the block's
 * resident pages (hk_find_resident), else any (resident first). */
static struct hk_ext *hk_find_fit(struct hk_arena *a, size_t len, size_t align, int resident) {
    unsigned b = hk_bin(len);
    struct hk_ext *e = hk_find_resident(a, len, align);
    if (e || resident) return e;
    if ((e = hk_best_in(a, b, len, align, 0)) != NULL) return e;
    for (unsigned w = (b + 1) / 64; w < (HK_NBINS + 63) / 64; w++) {
        uint64_t m = a->binmap[w];
        if (w == (b + 1) / 64) m &= ~(uint64_t)0 << ((b + 1) % 64);
        while (m) {
            unsigned bb = w * 64 + (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            if ((e = hk_best_in(a, bb, len, align, 0)) != NULL) return e;
        }
    }
    return NULL;
}

/* e's dirty bytes that lie in [a, b), supposing them spread evenly over its span. */
static size_t hk_dirt_in(const struct hk_ext *e, uintptr_t a, uintptr_t b) {
    size_t o = hk_overlap(a, b, e->dlo, e->dhi);
    if (!o) return 0;
    return (size_t)((unsigned __int128)e->dirty * o / (e->dhi - e->dlo));
}

/* A free piece [addr, addr+len) of e holding dirty bytes of e's dirt. */
static void hk_piece(struct hk_arena *a, const struct hk_ext *e, uintptr_t addr, size_t len,
                     size_t dirty) {
    struct hk_ext *x = hk_ext_take(a);
    x->addr = addr;
    x->len = len;
    hk_dirt_set(x, dirty, e->dlo, e->dhi);
    x->zero = e->zero;
    x->idle_since = e->idle_since;
    x->purged = e->purged;
    x->marks = e->marks;
    hk_free_insert(a, x);
}

/* Makes e (addr and len set, in no table) a live block; inner: a SuperSlab, which the live
 * counts and peaks (the program's blocks, which ACE sizes the tier by) leave out. */
static void hk_live_insert(struct hk_arena *a, struct hk_ext *e, int inner) {
    e->state = HK_EXT_LIVE;
    e->inner = (uint8_t)inner;
    e->probe = 0;
    hk_tab_insert(&a->by_start, e, 0);
    hk_arena_mark(a, e->addr);
    if (inner) return;
    a->live_n++;
    hk_live_grew(a, e->len);
}

/* Where in free extent e a block of len bytes at alignment align goes: at e's start, or at
 * its end where that covers more of e's dirt (those pages are resident already: a block placed
 * elsewhere would fault in fresh pages while they sit idle). Never in between, which would
 * leave two free pieces where one will do. This matters where a new mapping lands below a
 * dirty extent and merges with it: big_zero (one 5..25 MiB block at a time) peaked at
 * 37.5 MiB, cut from the fresh front, and peaks at 26.7 MiB now. */
static uintptr_t hk_place(const struct hk_ext *e, size_t len, size_t align) {
    /* A block of whole chunks starts on a chunk where the extent has room for that: freed,
     * it then holds whole SuperSlabs (superslab.h), which need their alignment. Placed
     * anywhere, a freed 4 MiB array held one SuperSlab and two unaligned pieces that none
     * could use (bench/phases: 40-48 MiB of free resident memory idle while the pool's
     * SuperSlabs faulted in fresh pages). Blocks of other lengths leave pieces anyway, and
     * aligned they left more (large_many, 1..4 MiB: peak RSS 2,397 MiB against 2,320). */
    if (len >= HK_LARGE_CHUNK && (len & (HK_LARGE_CHUNK - 1)) == 0 && align < HK_LARGE_CHUNK &&
        hk_fits(e, len, HK_LARGE_CHUNK))
        align = HK_LARGE_CHUNK;
    uintptr_t front = hk_align_up(e->addr, align);
    if (!e->dirty) return front;
    uintptr_t back = (e->addr + e->len - len) & ~(align - 1);
    if (back <= front) return front;
    size_t f = hk_overlap(front, front + len, e->dlo, e->dhi);
    size_t b = hk_overlap(back, back + len, e->dlo, e->dhi);
    return b > f ? back : front;
}

/* Cuts a live block of len bytes at alignment align out of free extent e (hk_place); the
 * pieces before and after stay free. Two records must be reserved. Returns the block; *fresh
 * is the bytes of it that were not dirty (pages that may now be faulted in). */
static struct hk_ext *hk_carve(struct hk_arena *a, struct hk_ext *e, size_t len, size_t align,
                               int inner, size_t *fresh) {
    uintptr_t p = hk_place(e, len, align);
    uintptr_t end = e->addr + e->len;
    hk_free_remove(a, e);
    size_t mine = hk_dirt_in(e, p, p + len), before = hk_dirt_in(e, e->addr, p);
    *fresh = len - mine;
    if (p > e->addr) hk_piece(a, e, e->addr, p - e->addr, before);
    if (p + len < end) hk_piece(a, e, p + len, end - (p + len), e->dirty - mine - before);
    e->addr = p;
    e->len = len;
    e->dirty = 0;
    e->dlo = e->dhi = 0;
    hk_live_insert(a, e, inner);
    return e;
}

/* Free extent e (in no table) whose pages all went back to the OS at time now: all zero, idle
 * since then (refault detection, the unmap delay). */
static void hk_ext_released(struct hk_ext *e, uint64_t now) {
    hk_dirt_set(e, 0, 0, 0);
    e->zero = 1;
    e->purged = 1;
    e->marks = 0;
    e->idle_since = now;
}

/* A freed block, of which dirty bytes may be resident (the block's length, but for a
 * SuperSlab whose slots the pool released): any of it may hold data, and a SuperSlab's free
 * marks. */
static void hk_free_block(struct hk_arena *a, struct hk_ext *e, size_t dirty, uint64_t now) {
    hk_dirt_set(e, dirty, e->addr, e->addr + e->len);
    hk_drawdown_give(&a->drawn, dirty);
    e->zero = 0;
    if (e->inner) e->marks = 1;
    e->purged = dirty < e->len;
    e->idle_since = now;
    hk_free_merge_insert(a, e);
}

/* --- gathering: a new block made of free extents' resident pages ---------------------------- */

/* Free memory can be plentiful and resident yet in pieces, none long enough for a request:
 * blocks of varied sizes freed in another order than they were allocated leave live blocks
 * between the free ones. A new mapping would then fault in the whole block while those pages
 * sit idle. Instead, a miss moves the resident pages of free extents into the new mapping
 * (mremap, which moves page tables and copies nothing): the block costs no fresh pages where
 * free ones were resident, and the footprint stays near the live size. The places they leave
 * are unmapped. Only whole 2 MiB stretches move (hk_gather_take), a few pieces a block. Each
 * moved piece is a mapping of its own to the kernel, which does not merge it with its
 * neighbours, and their count only grows while the tier keeps memory mapped (bench/large:
 * 1,183 mappings after 200,000 blocks, against 45 without gathering); gathering stops after
 * HK_GATHER_CAP pieces in all arenas together, far below the kernel's limit of 65,530
 * mappings, until the tier has nothing mapped. */
#define HK_GATHER_MIN ((size_t)256 << 10)
#define HK_GATHER_PIECES 8
#define HK_GATHER_CAP 8192

struct hk_gather {
    struct hk_ext *piece[HK_GATHER_PIECES]; /* taken out of every table while they move */
    size_t dirty[HK_GATHER_PIECES];         /* their dirt, should some have to go back */
    size_t moved[HK_GATHER_PIECES];         /* the bytes that moved, from each one's front */
    unsigned n;
};

/* The whole 2 MiB stretches of free extent e's dirty span: [*lo, *hi), none if *hi <= *lo. */
static inline void hk_stretches(const struct hk_ext *e, uintptr_t *lo, uintptr_t *hi) {
    *lo = hk_align_up(e->dlo, HK_LARGE_CHUNK);
    *hi = e->dhi & ~(HK_LARGE_CHUNK - 1);
}

/* Under the lock: takes out of the free extents, oldest first, the whole 2 MiB stretches of
 * their resident spans, to fill up to len bytes rounded down to whole stretches; what is left
 * of an extent around them stays free. Whole stretches: the kernel moves those a page table
 * at a time, and a page so moved costs 0.2-0.3 us at its next touch on this project's
 * machines; a page moved alone costs 4-11 us there, most of what a fresh page costs (15 us),
 * and the pieces shorter than a stretch are what the next shorter requests take for nothing
 * (moving those too, mixed_churn ran 0.85 times as fast, large 0.68 times, large_4m 0.75;
 * only waves_big, blocks up to 8 MiB in waves, gained: 1.05 times as fast, 2.5 MiB less
 * peak RSS; and large_swap peaked at 130 MiB, not 145; docs/BENCHMARKS.md). So a block
 * shorter than a stretch gathers nothing. Its miss still maps the room a gathered block
 * would need: that address space, untouched, serves later misses (without it, large_4m took
 * 9,700 page faults against 8,600 and large_swap peaked 4 MiB higher). Oldest first: a piece
 * that hits have left alone longest is the one stranded; the newest, just freed, is what the
 * next request of a program in its stride takes without a system call. Moved, it only sent
 * that request to fresh pages, and a moved page costs at its first touch about half what a
 * fault costs where the kernel runs in a virtual machine that shadows page tables (10 us
 * against 20 on this project's machines). Newest first, large 20000 64 4096 4 42 (blocks up
 * to 4 MiB, 4 live) moved 60-80 MiB and ran at 0.71 times the speed, with a peak RSS of 38.6
 * MiB against 31.2 (5 interleaved runs each). */
static void hk_gather_take(struct hk_arena *a, struct hk_gather *g, size_t len) {
    struct hk_ext *cand[HK_GATHER_PIECES];
    unsigned nc = 0;
    size_t want = 0;
    g->n = 0;
    if (len < HK_LARGE_CHUNK) return;
    for (struct hk_ext *e = a->age_head[HK_AGE_DIRTY]; e && nc < HK_GATHER_PIECES && want < len;
         e = e->anext) {
        uintptr_t lo, hi;
        hk_stretches(e, &lo, &hi);
        if (e->dirty < HK_GATHER_MIN || hi <= lo) continue;
        cand[nc++] = e;
        want += hi - lo;
    }
    for (unsigned i = 0; i < nc && len >= HK_LARGE_CHUNK; i++) {
        struct hk_ext *e = cand[i];
        if (!hk_reserve(a, 2)) break;
        uintptr_t lo, hi;
        hk_stretches(e, &lo, &hi);
        size_t t = hi - lo < len ? hi - lo : len & ~(HK_LARGE_CHUNK - 1);
        uintptr_t end = e->addr + e->len;
        size_t mine = hk_dirt_in(e, lo, lo + t), before = hk_dirt_in(e, e->addr, lo);
        hk_free_remove(a, e);
        if (lo > e->addr) hk_piece(a, e, e->addr, lo - e->addr, before);
        if (lo + t < end) hk_piece(a, e, lo + t, end - (lo + t), e->dirty - mine - before);
        e->addr = lo;
        e->len = t;
        e->state = 0;
        g->dirty[g->n] = mine;
        g->piece[g->n++] = e;
        len -= t;
    }
}

/* Under the lock: whether new mapping [m, m + map) lies next to a free extent holding as
 * many resident pages as a block of len bytes would gather: all of the arena's, since an
 * extent with len of them would have been long enough for the block. The kernel puts a new
 * mapping right below the last one where there is room, so after a block is freed the next,
 * longer one often lands beside it; merged with it, the block is placed over its resident
 * pages (hk_place) without a system call. Gathered instead, those very pages moved into the
 * new mapping, and a moved page costs about two thirds of a fault at its first touch on this
 * project's machines: big_zero (one buffer of 5..25 MiB at a time) ran 0.19 s against 0.12
 * with the same faults, having moved 36 MiB on 2 of its 3 misses. */
static int hk_lands_on_dirt(struct hk_arena *a, uintptr_t m, size_t map, size_t len) {
    size_t want = hk_get(&a->free_dirty) < len ? hk_get(&a->free_dirty) : len;
    struct hk_ext *l = hk_tab_find(&a->by_end, m, 1);
    struct hk_ext *r = hk_tab_find(&a->by_start, m + map, 0);
    return (l && l->state == HK_EXT_FREE && l->dirty >= want) ||
           (r && r->state == HK_EXT_FREE && r->dirty >= want);
}

/* Without the lock: moves the pieces into block b of len bytes (in a new mapping), in order,
 * each where it lies in its 2 MiB stretch as at its source, after the one before it (the
 * caller places the block so that the first lands at its start, where the mapping has room
 * for that; pieces of whole stretches then lie side by side): the kernel then moves whole
 * page tables. The pages between pieces, if any, and the block's rest are the mapping's own,
 * untouched. What does not fit, and the rest of a piece from a stretch the kernel would not
 * move (hk_os_move), stays where it is. Returns the bytes moved. */
static size_t hk_gather_move(struct hk_gather *g, uintptr_t b, size_t len) {
    size_t off = 0, total = 0;
    for (unsigned i = 0; i < g->n; i++) {
        struct hk_ext *e = g->piece[i];
        size_t o = off + ((e->addr - (b + off)) & (HK_LARGE_CHUNK - 1));
        g->moved[i] = 0;
        if (o >= len) continue;
        size_t k = e->len < len - o ? e->len : len - o;
        g->moved[i] = hk_os_move((void *)e->addr, k, (void *)(b + o));
        total += g->moved[i];
        off = o + g->moved[i];
    }
    return total;
}

/* Under the lock: moved pieces' records go; what did not move is free again. */
static void hk_gather_done(struct hk_arena *a, struct hk_gather *g, uint64_t now) {
    for (unsigned i = 0; i < g->n; i++) {
        struct hk_ext *e = g->piece[i];
        size_t k = g->moved[i];
        if (k) { /* its place is no longer mapped */
            atomic_fetch_add_explicit(&hk_moved_pieces, 1, memory_order_relaxed);
            hk_set(&a->mapped_bytes, hk_get(&a->mapped_bytes) - k);
        }
        if (k == e->len) {
            hk_ext_give(a, e);
            continue;
        }
        e->addr += k;
        e->len -= k;
        hk_dirt_set(e, g->dirty[i] < e->len ? g->dirty[i] : e->len, e->addr, e->addr + e->len);
        if (!e->idle_since) e->idle_since = now;
        hk_free_merge_insert(a, e);
    }
}

/* --- arenas: which one a thread takes from, which one a block belongs to ------------------- */

static unsigned hk_narenas = 1;        /* set once by hk_large_init */
static HK_TLS uint8_t hk_arena_tls;    /* this thread's arena + 1; 0 before its first block */
/* Threads bound to each arena (hk_arena_mine), until they exit (hk_arena_unbind). */
static _Atomic unsigned hk_arena_threads[HK_LARGE_ARENAS_MAX];
static struct hk_exit_key hk_arena_key; /* unbinds a thread as it exits */

/* Arenas by default: one per CPU the process may run on, where it may run on more than two;
 * else one. The split's price does not depend on the CPUs: each arena keeps free memory of its
 * own for its threads' ups and downs, and cuts untouched pages while another's freed ones wait,
 * so two heaps fault in more and peak higher than one. What it buys does: the waits for one
 * lock, which grow with the threads that run at once. On two CPUs a wait is one short section
 * of the other thread's (the lock spins before it sleeps, lock.h), and one arena was the faster
 * and the leaner on every threaded program with large blocks (2 CPUs, 5-7 interleaved runs:
 * large_swap with 2 threads 3.6e5 steps a second against 3.3e5, peak RSS 209 MiB against 225;
 * with 16 threads 2.2e5 against 1.9e5, 192 MiB against 225; mixed_churn with 2 threads and big
 * blocks alone 1.25e4 against 1.05e4, 2,476 MiB against 2,827). On 16 CPUs large_swap gained
 * nothing from 8 threads to 16 with 8 arenas: there each needs one (docs/BENCHMARKS.md). */
#define HK_ARENA_MIN_CPUS 3

void hk_large_init(unsigned n) {
    if (n == 0) {
        /* (no allocation: the set is on the stack) */
        cpu_set_t set;
        n = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
        if (n < HK_ARENA_MIN_CPUS) n = 1;
    }
    hk_narenas = n < 1 ? 1 : n > HK_LARGE_ARENAS_MAX ? HK_LARGE_ARENAS_MAX : n;
}

/* A thread's key destructor: its arena has one thread fewer. A later destructor's large
 * request binds the thread again, and sets the key again, so glibc runs this once more. */
static void hk_arena_unbind(void *arg) {
    (void)arg;
    unsigned i = hk_arena_tls;
    if (i == 0) return;
    hk_arena_tls = 0;
    atomic_fetch_sub_explicit(&hk_arena_threads[i - 1], 1, memory_order_relaxed);
}

/* The calling thread's arena. A thread starts in the first one, and leaves it only where its
 * requests keep meeting other threads' there (hk_arena_take): threads whose large requests
 * meet get arenas of their own, and the rest keep one page heap, whose free memory any of
 * them reuses.
 * Each thread that ran beside others took the arena with the fewest threads at its first
 * request before: where threads come and go a few at a time, each wave's blocks were cut from
 * two heaps, and a heap cut untouched memory of its own while the other's freed pages waited
 * (`mixed_churn 2 20 20 40 4096 42 0,0,0,1`: 40 live blocks of 1..4 MiB, threads of 20
 * steps; 9 runs: 37,300 page faults and 147 MiB at the peak, against 33,600 and 133 MiB with
 * one arena, and 0.86 times its speed). A thread whose exit cannot be watched (no key to be
 * had) stays counted: threads that move avoid its arena, no more. */
static struct hk_arena *hk_arena_mine(void) {
    unsigned i = hk_arena_tls;
    if (HK_UNLIKELY(i == 0)) {
        i = 1;
        if (hk_narenas > 1) { /* one arena: nothing to count */
            atomic_fetch_add_explicit(&hk_arena_threads[0], 1, memory_order_relaxed);
            hk_exit_key_arm(&hk_arena_key, hk_arena_unbind, &hk_arena_key);
        }
        hk_arena_tls = (uint8_t)i;
    }
    return &hk_arenas[i - 1];
}

void hk_large_arena_move(void) {
    (void)hk_arena_mine();
    unsigned from = (unsigned)hk_arena_tls - 1;
    for (;;) {
        unsigned here = atomic_load_explicit(&hk_arena_threads[from], memory_order_relaxed);
        unsigned least = UINT_MAX, best = from;
        for (unsigned k = 0; k < hk_narenas; k++) {
            unsigned t = atomic_load_explicit(&hk_arena_threads[k], memory_order_relaxed);
            if (k != from && t < least) least = t, best = k;
        }
        /* Only to fewer threads than it leaves behind: a thread alone in its arena, or two
         * arenas of one thread each, gain nothing from a move. */
        if (best == from || least + 1 >= here) return;
        /* The count goes up only if it is still the least seen: threads that move together
         * and read the same counts would otherwise all go to the same arena. */
        if (atomic_compare_exchange_weak_explicit(&hk_arena_threads[best], &least, least + 1,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            atomic_fetch_sub_explicit(&hk_arena_threads[from], 1, memory_order_relaxed);
            hk_arena_tls = (uint8_t)(best + 1);
            return;
        }
    }
}

/* How often the calling thread's large requests met another thread in its arena lately: each
 * that found the lock held adds HK_ARENA_MEET_EVERY, each that found it free takes one off
 * (large.h). */
static HK_TLS uint8_t hk_arena_meets;
_Static_assert(HK_ARENA_MEETS * HK_ARENA_MEET_EVERY + HK_ARENA_MEET_EVERY <= UINT8_MAX,
               "the meeting count fits a byte");

/* The calling thread's arena, locked, for an allocation. A thread moves (hk_large_arena_move)
 * at its HK_ARENA_MEETS-th meeting, less one for each HK_ARENA_MEET_EVERY requests that met
 * nobody: threads whose requests meet others' at one in HK_ARENA_MEET_EVERY or more get
 * arenas of their own (large_swap, 2 threads swapping blocks of 1..4 MiB: with one lock for
 * both, 26% of its acquisitions waited; with an arena each, 6.5%), and threads that meet now
 * and then, as a decay tick, a steal or the pool's new SuperSlab takes the lock, keep one
 * heap. Moved at the first meeting, threads of 2,000 steps with 1% of blocks of 1..4 MiB
 * (`mixed_churn 2 20 2000 1024 4096 42`, 7 runs) split their blocks over two heaps as they did
 * when each took an arena of its own: 28,100 page faults against 28,400; after four, 26,700. */
static struct hk_arena *hk_arena_take(void) {
    struct hk_arena *a = hk_arena_mine();
    if (hk_narenas == 1) { /* nowhere to move: no meetings to count, the lock all the same */
        hk_lock(&a->lock);
        return a;
    }
    if (hk_lock_try(&a->lock)) {
        if (hk_arena_meets) hk_arena_meets--;
        return a;
    }
    hk_arena_meets = (uint8_t)(hk_arena_meets + HK_ARENA_MEET_EVERY);
    if (hk_arena_meets >= HK_ARENA_MEETS * HK_ARENA_MEET_EVERY) {
        hk_arena_meets = 0;
        hk_large_arena_move();
        a = &hk_arenas[hk_arena_tls - 1];
    }
    hk_lock(&a->lock);
    return a;
}

/* Probe block e of arena a (locked) is freed, or leaves its place: what its pages show is
 * learnt. */
static void hk_probe_done(struct hk_arena *a, struct hk_ext *e) {
    if (a->probe == e) a->probe = NULL;
    if (!e->probe) return;
    e->probe = 0;
    hk_fill_learn(hk_fill_written((void *)e->addr, e->len)); /* a few pages' mincore, rare */
}

/* For program block e (below HK_HUGE) just cut in arena a (locked), dirty bytes of it
 * resident already: whether to fill it once the lock is released (fill.h); or it becomes the
 * arena's probe. The arena's last probe, if written whole by now, is counted first. */
static int hk_fill_cut(struct hk_arena *a, struct hk_ext *e, size_t dirty) {
    if (a->probe) {
        if (hk_fill_written((void *)a->probe->addr, a->probe->len)) {
            a->probe->probe = 0;
            hk_fill_learn(1);
        }
        a->probe = NULL;
    }
    int plan = hk_fill_plan(e->len, e->len - dirty);
    if (plan == HK_FILL_PROBE) {
        e->probe = 1;
        a->probe = e;
    }
    return plan == HK_FILL_POPULATE;
}

static int hk_recently_freed(struct hk_arena *a, uintptr_t p) {
    for (unsigned i = 0; i < HK_RECENT; i++)
        if (a->recent[i] == p) return 1;
    return 0;
}

/* Frees block p of arena a (locked), e its record by start (NULL if none): 1; or, with
 * nothing done, -1 for a block freed already and 0 for no block of a's at p. A huge block
 * that is to go back to the OS right away (see hk_large_free) is left out of every table and
 * returned in *huge, where huge is not NULL. */
static int hk_free_locked(struct hk_arena *a, uintptr_t p, struct hk_ext *e, uint64_t now,
                          struct hk_ext **huge) {
    if (!e || e->state != HK_EXT_LIVE || e->inner)
        /* (a SuperSlab's start is the pool's: the program's free never reaches here with it) */
        return (e ? !e->inner : hk_recently_freed(a, p)) ? -1 : 0;
    a->recent[a->recent_next++ % HK_RECENT] = p;
    hk_probe_done(a, e);
    hk_tab_remove(&a->by_start, e, 0);
    a->live_n--;
    hk_set(&a->live_bytes, hk_get(&a->live_bytes) - e->len);
    if (huge && e->len >= HK_HUGE && hk_get(&a->live_bytes) >= e->len &&
        now - atomic_load_explicit(&hk_huge_reused, memory_order_relaxed) >=
            2 * hk_pol_purge_delay()) {
        *huge = e;
        return 1;
    }
    hk_free_block(a, e, e->len, now);
    return 1;
}

/* Hands the free of block p to whoever next holds a's lock: 0 if every slot is full. */
static int hk_pend_push(struct hk_arena *a, uintptr_t p) {
    unsigned first = (unsigned)(p >> 12); /* blocks start on pages: their frees spread out */
    for (unsigned k = 0; k < HK_PEND; k++) {
        _Atomic uintptr_t *slot = &a->pend[(first + k) % HK_PEND];
        uintptr_t none = 0;
        hk_chaos();
        if (atomic_load_explicit(slot, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(slot, &none, p, memory_order_release,
                                                    memory_order_relaxed)) {
            atomic_fetch_add_explicit(&a->npend, 1, memory_order_release);
            return 1;
        }
    }
    return 0;
}

/* Frees the blocks waiting in a's slots (a locked), reporting misuse as free would have: a
 * second free of a block is found here as at once, from the records or the recent frees. */
static void hk_arena_drain(struct hk_arena *a) {
    if (atomic_load_explicit(&a->npend, memory_order_acquire) <= 0) return;
    uint64_t now = hk_now_ms(); /* read only when there is work: most calls find none */
    for (unsigned i = 0; i < HK_PEND; i++) {
        if (atomic_load_explicit(&a->pend[i], memory_order_relaxed) == 0) continue;
        uintptr_t p = atomic_exchange_explicit(&a->pend[i], 0, memory_order_acquire);
        atomic_fetch_sub_explicit(&a->npend, 1, memory_order_relaxed);
        a->queued++;
        int r = hk_free_locked(a, p, hk_tab_find(&a->by_start, p, 0), now, NULL);
        if (r <= 0) hk_large_refused("free", (void *)p, r);
    }
}

/* The arena that knows address p, locked, with p's record by start (NULL if none), or NULL
 * when no arena has a block, a free extent or a recent free at p. One lookup in the page map
 * and one lock, but where the map could not be written: then every arena is asked. */
static struct hk_arena *hk_arena_lock_of(uintptr_t p, struct hk_ext **e) {
    if (p & (HK_PAGE_SIZE - 1)) return NULL; /* blocks start on pages */
    unsigned i = hk_pagemap_get(p);
    if (i != 0) {
        struct hk_arena *a = &hk_arenas[i - 1];
        hk_lock(&a->lock);
        hk_arena_drain(a);
        *e = hk_tab_find(&a->by_start, p, 0);
        return a;
    }
    if (!atomic_load_explicit(&hk_pm_failed, memory_order_relaxed)) return NULL;
    for (unsigned k = 0; k < hk_narenas; k++) {
        struct hk_arena *a = &hk_arenas[k];
        hk_lock(&a->lock);
        if ((*e = hk_tab_find(&a->by_start, p, 0)) != NULL || hk_recently_freed(a, p)) return a;
        hk_unlock(&a->lock);
    }
    return NULL;
}

static size_t hk_arena_decay(struct hk_arena *a, uint64_t now, int force);

/* --- the API -------------------------------------------------------------------------------- */

/* The sum over the arenas of the count at offset off in each (free_dirty, live_peak,
 * mapped_bytes): read without their locks, so only as exact as a moment allows. */
static size_t hk_sum(size_t off) {
    size_t s = 0;
    for (unsigned k = 0; k < hk_narenas; k++)
        s += hk_get((_Atomic size_t *)((char *)&hk_arenas[k] + off));
    return s;
}

/* Dirty bytes the arenas keep together regardless of age: the policy's budget, or with ACE
 * the peak of live bytes in this window (what the program has just shown it uses) and, without
 * cgroup pressure, the recent peak of the footprint (live and dirty free bytes as a block was
 * cut, foot_peak) less the live bytes now, up to the cap. Kept by all arenas together, so that
 * memory split among them costs no more than one page heap would keep. */
static size_t hk_large_budget(void) {
    size_t budget = atomic_load_explicit(&hk_pol.large_budget, memory_order_relaxed);
    if (!atomic_load_explicit(&hk_pol.demand, memory_order_relaxed)) return budget;
    size_t cap = atomic_load_explicit(&hk_pol.large_cap, memory_order_relaxed);
    size_t peak = hk_sum(offsetof(struct hk_arena, live_peak));
    /* And what brings the live bytes back to their recent peak, as in the pool (pool.c): it
     * goes back when idle for the purge delay, not at the first window that saw no reuse.
     * That window closed in the first pause of a program working in waves, and the budget
     * released the first wave's memory for the next to fault in again (bench/waves with
     * blocks up to 8 MiB: 31,000 page faults after the first wave, 7,900 with this, 1.5 times
     * as fast). Memory freed and not reused no longer costs a program the peak it did before
     * the page heap: the small objects that follow are cut from it (bench/phases). */
    size_t recent = atomic_load_explicit(&hk_pol.large_peak, memory_order_relaxed);
    size_t foot = hk_sum(offsetof(struct hk_arena, foot_peak));
    if (recent < foot) recent = foot;
    size_t live = hk_sum(offsetof(struct hk_arena, live_bytes));
    if (recent > live && recent - live > peak) peak = recent - live;
    if (peak > cap) peak = cap;
    return budget > peak ? budget : peak;
}

/* As in the pool: a free releases at once only beyond the budget and a quarter; the tick
 * trims to the budget. */
static int hk_large_over(void) {
    size_t budget = hk_large_budget();
    return hk_sum(offsetof(struct hk_arena, free_dirty)) > budget + budget / 4;
}

/* Cuts a block for a request of len bytes at align out of free extent e of arena a (locked,
 * three records reserved), and accounts for it; hit: e was free before this request. *fill:
 * whether the caller is to fill the block's pages once the lock is released (fill.h). */
static void *hk_take(struct hk_arena *a, struct hk_ext *e, size_t len, size_t align, int hit,
                     int inner, uint64_t now, unsigned *zeroed, int *fill) {
    int zero = e->zero, marks = e->marks;
    uint64_t idle = e->idle_since;
    int purged = e->purged;
    size_t fresh;
    e = hk_carve(a, e, len, align, inner, &fresh);
    /* A huge block may be an array the program means to use in part: never filled. */
    *fill = !inner && len < HK_HUGE && hk_fill_cut(a, e, len - fresh);
    /* The block's first page may hold a free mark where small or mid blocks lay in the extent
     * since its pages were last released. Told so of every first page that might be resident,
     * malloc wrote to each (malloc.c, hk_large_out), and that store faulted in a page of every
     * block the program had not touched: mimalloc-bench's malloc-large (20 blocks of 5..25
     * MiB, never written) took a fault and kept a page resident for each, 0.13 s and 32 MiB
     * peak RSS for 20,000 blocks (jemalloc 0.04 s and 4.6 MiB). Not narrowed by the dirty
     * span, an estimate (a piece cut from an extent gets a share of its dirt, and may be
     * counted clean): a mark missed is a free reported as a double free. */
    int head_marked = marks && !zero;
    *zeroed = (zero ? HK_LARGE_ZERO : 0) | (head_marked ? 0 : HK_LARGE_UNMARKED);
    /* A SuperSlab taken is demand for the page heap's free memory as much as a block is:
     * counted apart, a program whose phases alternate big arrays and small objects had the
     * arrays' free memory released beyond the budget before the pool could take it
     * (bench/phases: 27,000 page faults after the first round against 5,000). */
    hk_drawdown_take(&a->drawn, len - fresh);
    /* Released not long ago and wanted again: ACE lengthens the delay. */
    int refault = hit && fresh && purged && now - idle < 2 * hk_pol_purge_delay();
    if (refault) {
        a->refault_bytes += fresh;
        hk_drawdown_take(&a->drawn, fresh); /* taken back, though released (pool.c) */
    }
    if (len >= HK_HUGE && (refault || len - fresh >= len / 2))
        atomic_store_explicit(&hk_huge_reused, now, memory_order_relaxed);
    return (void *)e->addr;
}

/* For a request that arena a's free memory does not fit: a free extent of another arena that
 * does (with resident set, by its resident pages: hk_find_fit), taken out of that arena (in
 * no table, its mapped bytes no longer that arena's), or NULL. The caller gives it to a,
 * where it stays: memory moves to the arena whose threads ask for it, so free memory is never
 * stranded in one arena while another maps more, and after one move the blocks cut from it
 * are a's own (large_swap, 2 threads: 37% of the requests were served by another arena's lock
 * where blocks were cut there instead). Called without a lock held. */
static struct hk_ext *hk_steal(struct hk_arena *a, size_t len, size_t align, int resident) {
    unsigned self = (unsigned)(a - hk_arenas);
    for (unsigned k = 1; k < hk_narenas; k++) {
        struct hk_arena *b = &hk_arenas[(self + k) % hk_narenas];
        /* A racy glance, skipped unlocked; frees waiting in b's slots may make room. */
        if (hk_get(&b->free_total) < len &&
            atomic_load_explicit(&b->npend, memory_order_relaxed) <= 0)
            continue;
        hk_lock(&b->lock);
        hk_arena_drain(b);
        struct hk_ext *e = hk_find_fit(b, len, align, resident);
        if (e) {
            hk_free_remove(b, e);
            hk_set(&b->mapped_bytes, hk_get(&b->mapped_bytes) - e->len);
        }
        hk_unlock(&b->lock);
        if (e) {
            if (HK_TRACING(HK_T_LARGE))
                hk_trace(HK_T_LARGE, "free memory taken from another arena", "bytes", e->len,
                         "arena", (uint64_t)(b - hk_arenas), NULL, 0);
            return e;
        }
    }
    return NULL;
}


/* Arena a (locked, a record reserved) takes [addr, addr + len) of a new mapping, untouched,
 * as free memory (kept for the unmap delay, as any); returns its record, merged with free
 * neighbours. */
static struct hk_ext *hk_free_fresh(struct hk_arena *a, uintptr_t addr, size_t len,
                                    uint64_t now) {
    struct hk_ext *t = hk_ext_take(a);
    t->addr = addr;
    t->len = len;
    t->zero = 1;
    t->idle_since = now;
    hk_free_merge_insert(a, t);
    return t;
}

void *hk_large_alloc(size_t n, size_t align, unsigned *zeroed, unsigned flags) {
    int inner = (flags & HK_LARGE_INNER) != 0;
    if (align < HK_PAGE_SIZE) align = HK_PAGE_SIZE;
    size_t len = hk_align_up(n ? n : 1, HK_PAGE_SIZE);
    if (len < n || len > PTRDIFF_MAX || len + align < len) {
        errno = ENOMEM;
        return NULL;
    }
    int resident = (flags & HK_LARGE_RESIDENT) != 0;
    /* Too few resident free bytes in all arenas for any extent to hold half the block's worth
     * (hk_find_resident): no lock. A mid request asks at its class's refills (malloc.c). */
    if (resident && hk_sum(offsetof(struct hk_arena, free_dirty)) < len / 2) return NULL;
    uint64_t now = hk_now_ms();
    struct hk_arena *a = hk_arena_take();
    hk_arena_drain(a);
    if (!hk_reserve(a, 3)) goto oom;
    struct hk_ext *e = hk_find_fit(a, len, align, resident);
    if (!e && hk_narenas > 1) {
        hk_unlock(&a->lock);
        struct hk_ext *x = hk_steal(a, len, align, resident);
        hk_lock(&a->lock);
        if (x) {
            /* Its tables were reserved above: the insertion needs no record. */
            hk_set(&a->mapped_bytes, hk_get(&a->mapped_bytes) + x->len);
            a->steals++;
            hk_drawdown_give(&a->drawn, x->dirty); /* taking it back below is demand here */
            hk_free_merge_insert(a, x); /* x may grow by its neighbours, and stays x */
        }
        if (!hk_reserve(a, 3)) goto oom;
        e = x && hk_fits(x, len, align) ? x : hk_find_fit(a, len, align, resident);
    }
    if (!e && (flags & (HK_LARGE_NO_MAP | HK_LARGE_RESIDENT))) {
        hk_unlock(&a->lock);
        return NULL;
    }
    if (HK_TRACING(HK_T_LARGE))
        hk_trace(HK_T_LARGE,
                 inner ? (e ? "SuperSlab cut from free memory" : "SuperSlab: more is mapped")
                 : e   ? "hit (served from free large memory)"
                       : "miss (more is mapped)",
                 "bytes", len, "align", align, NULL, 0);
    int hit = e != NULL;
    if (hit) {
        if (!inner) a->hits++; /* the counts describe the program's requests */
    } else {
        /* Nothing free fits: map more, without the lock, gathering into it what free memory is
         * resident unless the mapping lands beside it (hk_lands_on_dirt). */
        struct hk_gather g = {.n = 0};
        int gather = align == HK_PAGE_SIZE && hk_get(&a->free_dirty) >= HK_GATHER_MIN &&
                     atomic_load_explicit(&hk_moved_pieces, memory_order_relaxed) < HK_GATHER_CAP;
        if (!inner) a->misses++;
        /* The tier grows geometrically, as a heap does. Mappings of one block each leave
         * free memory in pieces no longer than a block, which merge only where the kernel
         * happened to place mappings side by side; a later longer request fits none of them
         * and misses again. An eighth of the footprint, untouched until carved, costs address
         * space only, and later misses are carved from it. large_many (1,024 live blocks of
         * 1..4 MiB): 1,519 misses in 20,000 requests with 4 MiB mappings, 106 with this. */
        size_t grow = hk_align_up(hk_get(&a->mapped_bytes) / HK_LARGE_GROWTH, HK_PAGE_SIZE);
        hk_unlock(&a->lock);
        size_t need = len + (align > HK_PAGE_SIZE ? align : 0);
        if (need < len) need = len;
        size_t map = need > HK_LARGE_MAP_MIN ? need : HK_LARGE_MAP_MIN;
        if (map < grow) map = grow;
        /* Room to start a gathered block where its first piece lies in its stretch
         * (hk_gather_move); address space only. */
        if (gather && map - need < HK_LARGE_CHUNK) map = need + HK_LARGE_CHUNK;
        /* For a SuperSlab (or a block aligned as one), whole chunks: the kernel (since 6.7)
         * puts such a mapping on a chunk boundary, so the block starts it and the rest holds
         * the next SuperSlabs. Of any length, each SuperSlab mapped 4 MiB of its own and left
         * two pieces that no other could use. */
        if (align >= HK_LARGE_CHUNK) map = hk_align_up(map, HK_LARGE_CHUNK);
        void *m = hk_os_map(map);
        if (!m && map > need) {
            /* Address space or commit limits: the block alone may still fit. */
            map = need;
            m = hk_os_map(map);
        }
        /* The page map's leaves for the whole mapping now, outside the lock: blocks cut
         * from it later make no system call for their entries. */
        if (m && !hk_pagemap_cover((uintptr_t)m, map))
            atomic_store_explicit(&hk_pm_failed, 1, memory_order_relaxed);
        hk_lock(&a->lock);
        size_t moved = 0, lead = 0;
        int marks = 0; /* a moved piece may hold free marks */
        if (m && gather && !hk_lands_on_dirt(a, (uintptr_t)m, map, len)) {
            hk_gather_take(a, &g, len);
            for (unsigned i = 0; i < g.n; i++) marks |= g.piece[i]->marks;
            if (g.n) {
                /* The block starts where its first piece lies in its stretch, if the
                 * mapping has room; else that piece lands past a gap (hk_gather_move). */
                lead = (g.piece[0]->addr - (uintptr_t)m) & (HK_LARGE_CHUNK - 1);
                if (lead > map - len) lead = 0;
                hk_unlock(&a->lock);
                moved = hk_gather_move(&g, (uintptr_t)m + lead, len);
                hk_lock(&a->lock);
                hk_gather_done(a, &g, now);
            }
        }
        if (!m) goto oom;
        if (!hk_reserve(a, 3)) {
            hk_unlock(&a->lock);
            hk_os_unmap(m, map);
            errno = ENOMEM;
            return NULL;
        }
        hk_set(&a->mapped_bytes, hk_get(&a->mapped_bytes) + map);
        if (moved) {
            /* The block lies lead bytes into the mapping and holds the moved resident pages;
             * the rest of the mapping, before and after it, is free and untouched (kept for
             * the unmap delay, as any). */
            a->gathers++;
            a->gathered_bytes += moved;
            hk_drawdown_take(&a->drawn, moved);
            if (HK_TRACING(HK_T_LARGE))
                hk_trace(HK_T_LARGE, "miss gathered (free resident pages moved into the block)",
                         "bytes", len, "moved", moved, NULL, 0);
            uintptr_t b = (uintptr_t)m + lead;
            if (lead) hk_free_fresh(a, (uintptr_t)m, lead, now);
            if (map > lead + len) hk_free_fresh(a, b + len, map - lead - len, now);
            e = hk_ext_take(a);
            e->addr = b;
            e->len = len;
            e->marks = (uint8_t)marks;
            hk_live_insert(a, e, 0);
            int fill = len < HK_HUGE && hk_fill_cut(a, e, moved);
            *zeroed = marks ? 0 : HK_LARGE_UNMARKED;
            hk_unlock(&a->lock);
            if (fill) hk_fill((void *)b, len);
            return (void *)b;
        }
        e = hk_free_fresh(a, (uintptr_t)m, map, now);
        if (!hk_fits(e, len, align)) e = hk_find_fit(a, len, align, 0);
        HK_ASSERT(e != NULL);
    }
    int fill;
    void *p = hk_take(a, e, len, align, hit, inner, now, zeroed, &fill);
    hk_unlock(&a->lock);
    if (fill) hk_fill(p, len);
    return p;
oom:
    hk_unlock(&a->lock);
    errno = ENOMEM;
    return NULL;
}

/* Unlocks arena a after a free, and releases what is over the budget. */
static void hk_unlock_decay(struct hk_arena *a, uint64_t now) {
    int over = hk_large_over();
    hk_unlock(&a->lock);
    if (over) hk_arena_decay(a, now, 0);
}

/* Live block e of arena a (locked), out of the start table, becomes free memory; unlocks, and
 * releases what is over the budget. */
static void hk_free_unlock(struct hk_arena *a, struct hk_ext *e, size_t dirty, uint64_t now) {
    hk_free_block(a, e, dirty, now);
    hk_unlock_decay(a, now);
}

void hk_large_refused(const char *op, void *p, int r) {
    hk_report(op, p, r < 0 ? "double free" : "invalid pointer (not allocated by hakmem)");
}

int hk_large_free(void *p) {
    uint64_t now = hk_now_ms();
    uintptr_t x = (uintptr_t)p;
    struct hk_arena *a;
    struct hk_ext *e = NULL;
    unsigned i = x & (HK_PAGE_SIZE - 1) ? 0 : hk_pagemap_get(x);
    if (i != 0) {
        a = &hk_arenas[i - 1];
        /* Another arena's block, or the lock taken: the free waits in a slot for the lock's
         * next holder, and this thread goes on. The arena's tables stay in the caches of the
         * threads that allocate from it, and nobody waits on a lock to free. large_swap (2
         * threads freeing each other's 1..4 MiB blocks): 1.09e6 -> 1.49e6 steps a second;
         * 1.22e6 where only a free that found the lock taken waited in a slot. */
        int mine = i == hk_arena_tls || hk_narenas == 1;
        if (!(mine && hk_lock_try(&a->lock))) {
            if (hk_pend_push(a, x)) return 1;
            hk_lock(&a->lock); /* every slot full: free them all */
        }
        hk_arena_drain(a);
        e = hk_tab_find(&a->by_start, x, 0);
    } else if ((a = hk_arena_lock_of(x, &e)) == NULL) {
        return 0;
    }
    struct hk_ext *huge = NULL;
    int r = hk_free_locked(a, x, e, now, &huge);
    if (r <= 0) {
        hk_unlock(&a->lock);
        return r;
    }
    if (huge) {
        /* A huge block that nothing suggests will be wanted again soon: its pages go back
         * now, outside the lock (in no table meanwhile: a second free of p finds it among
         * the recent ones). glibc gives back every block above 32 MiB at free; kept, a table
         * that grew and left its old copy free held it until the purge delay, which needs a
         * malloc slow path to run: python building a dict of 2 million entries, whose old
         * 40 MiB table waited through the rest of the run, peaked 44 MiB above glibc. Kept
         * as any: a block while the arena holds less than it live (one huge block at a time
         * is reallocated, not replaced: big_zero of 32..96 MiB, whose first frees went back,
         * mapped a second region beside the released one and ran 0.15 s or 0.57 s by the
         * timing of ACE's first window, against 0.15 s always), and every block while huge
         * ones are reused (one cut from resident memory, or released and wanted again, within
         * two purge delays). A free that waited in a slot is kept as any. */
        size_t len = huge->len;
        hk_unlock(&a->lock);
        hk_os_release(p, len);
        hk_lock(&a->lock);
        a->purged_bytes += len;
        hk_ext_released(huge, now);
        hk_free_merge_insert(a, huge);
        hk_unlock(&a->lock);
        if (HK_TRACING(HK_T_LARGE))
            hk_trace(HK_T_LARGE, "release (a huge block, at its free)", "addr@", x, "bytes", len,
                     NULL, 0);
        return 1;
    }
    hk_unlock_decay(a, now);
    return 1;
}

void hk_large_free_inner(void *p, size_t dirty) {
    uint64_t now = hk_now_ms();
    struct hk_ext *e = NULL;
    struct hk_arena *a = hk_arena_lock_of((uintptr_t)p, &e);
    HK_ASSERT(a != NULL && e != NULL && e->state == HK_EXT_LIVE && e->inner);
    if (!a) return;
    hk_tab_remove(&a->by_start, e, 0);
    hk_free_unlock(a, e, dirty < e->len ? dirty : e->len, now);
}

int hk_large_lookup(const void *p, size_t *len, unsigned *arena) {
    struct hk_ext *e = NULL;
    struct hk_arena *a = hk_arena_lock_of((uintptr_t)p, &e);
    if (!a) return 0;
    int st = 0;
    if (e && e->state == HK_EXT_LIVE && !e->inner) {
        st = HK_LARGE_LIVE;
        if (len) *len = e->len;
        if (arena) *arena = (unsigned)(a - hk_arenas) + 1;
    } else if (e ? e->state == HK_EXT_FREE : hk_recently_freed(a, (uintptr_t)p)) {
        st = HK_LARGE_FREED;
    }
    hk_unlock(&a->lock);
    return st;
}

/* Grows live block e of arena a (locked, two records reserved) to len bytes where resident
 * free memory that fits the new length is at hand: the block is cut there and its bytes are
 * copied over, and its old place becomes free memory, still resident. Grown by mremap alone,
 * a block moves to new address space and faults its growth in fresh while free pages sit idle
 * (bench/phases: arrays doubled to 4 MiB by realloc, round after round, in memory the last
 * round's small objects had used, faulted in 40 MiB a round beside 36 MiB of resident free
 * memory). Copied, not moved onto the free pages: a move (mremap) drops the resident pages it
 * lands on, leaves a hole where the block was, and costs each moved page a fault at its next
 * touch where the kernel runs in a virtual machine that shadows page tables (9 us a page on
 * this project's machines, against 0.2 us to copy it; bench/phases ran 1.35 times as fast
 * copying). Returns the block, the lock released, or NULL (the lock held) where there is no
 * such memory. */
static void *hk_grow_into_resident(struct hk_arena *a, struct hk_ext *e, size_t len,
                                   size_t room, uint64_t now) {
    if (hk_get(&a->free_dirty) < len - e->len || !hk_reserve(a, 3)) return NULL;
    struct hk_ext *f = hk_find_resident(a, len + room, HK_PAGE_SIZE);
    if (!f || (room && hk_place(f, len, HK_PAGE_SIZE) != f->addr)) return NULL;
    /* e is out of the live counts from now, so that the peak does not count both; it stays
     * in the start table while its bytes are copied without the lock: the block is the
     * caller's, and nobody else reaches its record meanwhile. */
    uintptr_t p = e->addr;
    size_t old = e->len;
    a->live_n--;
    hk_set(&a->live_bytes, hk_get(&a->live_bytes) - old);
    unsigned zeroed;
    int fill;
    void *q = hk_take(a, f, len, HK_PAGE_SIZE, 1, 0, now, &zeroed, &fill);
    a->copied++;
    hk_unlock(&a->lock);
    if (fill) hk_fill(q, len);
    memcpy(q, (void *)p, old);
    hk_lock(&a->lock);
    hk_probe_done(a, e);
    hk_tab_remove(&a->by_start, e, 0);
    hk_free_unlock(a, e, e->len, now);
    return q;
}

void *hk_large_realloc(void *p, size_t n, unsigned flags) {
    size_t len = hk_align_up(n ? n : 1, HK_PAGE_SIZE);
    if (len < n || len > PTRDIFF_MAX) return NULL;
    uint64_t now = hk_now_ms();
    struct hk_ext *e = NULL;
    struct hk_arena *a = hk_arena_lock_of((uintptr_t)p, &e);
    if (!a) return NULL;
    if (!e || e->state != HK_EXT_LIVE || e->inner || !hk_reserve(a, 2)) {
        hk_unlock(&a->lock);
        return NULL;
    }
    if (len <= e->len) {
        /* Shrink in place; a tail worth having becomes free memory. */
        if (e->len - len >= HK_LARGE_SHRINK_MIN) {
            struct hk_ext *t = hk_ext_take(a);
            t->addr = e->addr + len;
            t->len = e->len - len;
            t->marks = e->marks;
            hk_set(&a->live_bytes, hk_get(&a->live_bytes) - t->len);
            e->len = len;
            hk_free_block(a, t, t->len, now);
        }
        a->in_place++;
        hk_unlock(&a->lock);
        return p;
    }
    struct hk_ext *r = hk_tab_find(&a->by_start, e->addr + e->len, 0);
    if (r && r->state == HK_EXT_FREE && e->len + r->len >= len) {
        /* Grow in place into the free neighbour, from its front. */
        size_t need = len - e->len;
        hk_free_remove(a, r);
        e->marks |= r->marks;
        if (r->len > need) {
            size_t rest = r->dirty - hk_dirt_in(r, r->addr, r->addr + need);
            r->addr += need;
            r->len -= need;
            hk_dirt_set(r, rest, r->dlo, r->dhi);
            hk_free_insert(a, r);
        } else {
            hk_ext_give(a, r);
        }
        e->len = len;
        hk_live_grew(a, need);
        a->in_place++;
        hk_unlock(&a->lock);
        return p;
    }
    size_t old = e->len;
    /* A block grown by less than a quarter (a buffer grown a little at a time: a file read
     * into it) moves where it has room to grow after it, so that its next growths are in
     * place: copied to the front of resident free memory that holds an eighth of its length
     * more (which stays free), else moved to new address space with half its length more
     * address space after it, which the tier keeps as free memory. Without it such a buffer
     * met another block or mapping after it at every other step (4 buffers grown 4 KiB at a
     * time to 4 MiB, 5 rounds: 7,014 mremap calls and 15 s; with the room 16 and 0.03 s;
     * mimalloc 0.03 s), or was copied, a few MiB, to a piece of resident memory just as long
     * (bench/realloc_grow with STEP: 1,138 copies, 76% of the time). Half its length more of
     * resident memory took long resident extents that other blocks then missed (8 lists grown
     * by an eighth to 8 MB: 153-163 MiB peak RSS against 128-131 with an eighth). A program
     * that grows its blocks by half or more gets what it asks for. */
    size_t room = len - old < old / 4 ? hk_align_up(len / HK_LARGE_ROOM, HK_PAGE_SIZE) : 0;
    void *q = room ? hk_grow_into_resident(
                         a, e, len, hk_align_up(len / HK_LARGE_ROOM_RESIDENT, HK_PAGE_SIZE), now)
                   : NULL;
    if (!q) q = hk_grow_into_resident(a, e, len, 0, now);
    if (q) return q;
    hk_unlock(&a->lock);
    if (flags & HK_LARGE_NO_MAP) return NULL;
    /* Move the pages: the block is the caller's, nobody else reaches this record meanwhile. */
    q = room ? hk_os_remap(p, old, len + room) : NULL;
    if (!q) {
        room = 0;
        q = hk_os_remap(p, old, len);
        if (!q) return NULL;
    }
    if (room && !hk_pagemap_cover((uintptr_t)q + len, room))
        atomic_store_explicit(&hk_pm_failed, 1, memory_order_relaxed);
    hk_lock(&a->lock);
    hk_tab_remove(&a->by_start, e, 0);
    e->addr = (uintptr_t)q;
    e->len = len;
    hk_tab_insert(&a->by_start, e, 0);
    hk_arena_mark(a, e->addr);
    hk_live_grew(a, len - old);
    hk_set(&a->mapped_bytes, hk_get(&a->mapped_bytes) + len - old);
    a->mremaps++;
    if (HK_TRACING(HK_T_LARGE))
        hk_trace(HK_T_LARGE, "realloc by mremap", "bytes", len, "room", room, NULL, 0);
    if (room && hk_reserve(a, 1)) {
        hk_set(&a->mapped_bytes, hk_get(&a->mapped_bytes) + room);
        hk_free_fresh(a, (uintptr_t)q + len, room, now);
        room = 0;
    }
    hk_unlock(&a->lock);
    if (room) hk_os_unmap((char *)q + len, room); /* no record for it */
    return q;
}

#define HK_DECAY_BATCH 32
#define HK_RELEASE_MIN ((size_t)1 << 20) /* a release for the budget takes at least this */

/* hk_large_decay for one arena. */
static size_t hk_arena_decay(struct hk_arena *a, uint64_t now, int force) {
    size_t released = 0;
    for (;;) {
        /* What goes: purge[i]'s pages in [lo[i], hi[i]); unmap[i] whole. */
        struct hk_ext *purge[HK_DECAY_BATCH], *unmap[HK_DECAY_BATCH];
        uintptr_t lo[HK_DECAY_BATCH], hi[HK_DECAY_BATCH];
        unsigned np = 0, nu = 0;
        hk_lock(&a->lock);
        hk_arena_drain(a); /* frees that waited for the lock: no longer than a tick */
        uint64_t delay = hk_pol_purge_delay(), udelay = hk_pol_unmap_delay();
        size_t keep = hk_large_budget();
        struct hk_ext *e;
        /* Taken out of every table while their pages go: nothing merges with them or
         * allocates from them meanwhile. */
        while ((e = a->age_head[HK_AGE_CLEAN]) != NULL && nu < HK_DECAY_BATCH &&
               (force || now - e->idle_since >= udelay)) {
            hk_free_remove(a, e);
            unmap[nu++] = e;
        }
        size_t dirty = hk_sum(offsetof(struct hk_arena, free_dirty));
        while ((e = a->age_head[HK_AGE_DIRTY]) != NULL && np < HK_DECAY_BATCH &&
               (force || now - e->idle_since >= delay || dirty > keep)) {
            hk_free_remove(a, e);
            lo[np] = e->dlo;
            hi[np] = e->dhi;
            if (!force && now - e->idle_since < delay) {
                /* Only for the budget: the top of its span, as much as is over (releasing
                 * the whole extent would fault in again what the budget means to keep). */
                size_t over = hk_align_up(dirty - keep, HK_PAGE_SIZE);
                if (over < HK_RELEASE_MIN) over = HK_RELEASE_MIN;
                if (over < e->dhi - e->dlo) lo[np] = e->dhi - over;
            }
            size_t gone = lo[np] == e->dlo ? e->dirty : hk_dirt_in(e, lo[np], hi[np]);
            dirty -= gone < dirty ? gone : dirty;
            purge[np++] = e;
        }
        hk_unlock(&a->lock);
        if (np == 0 && nu == 0) break;
        for (unsigned i = 0; i < nu; i++) {
            hk_os_unmap((void *)unmap[i]->addr, unmap[i]->len);
            released += unmap[i]->len;
        }
        for (unsigned i = 0; i < np; i++) /* only the span can hold resident pages */
            hk_os_release((void *)lo[i], hi[i] - lo[i]);
        hk_lock(&a->lock);
        for (unsigned i = 0; i < nu; i++) {
            hk_set(&a->mapped_bytes, hk_get(&a->mapped_bytes) - unmap[i]->len);
            hk_ext_give(a, unmap[i]);
        }
        /* Every moved piece is unmapped once no arena has anything mapped. */
        if (hk_sum(offsetof(struct hk_arena, mapped_bytes)) == 0)
            atomic_store_explicit(&hk_moved_pieces, 0, memory_order_relaxed);
        for (unsigned i = 0; i < np; i++) {
            e = purge[i];
            size_t gone = lo[i] == e->dlo ? e->dirty : hk_dirt_in(e, lo[i], hi[i]);
            released += gone;
            a->purged_bytes += gone;
            if (HK_TRACING(HK_T_LARGE))
                hk_trace(HK_T_LARGE, "release (idle free pages)", "addr@", lo[i], "bytes", gone,
                         NULL, 0);
            if (lo[i] == e->dlo) {
                hk_ext_released(e, now);
            } else {
                hk_dirt_set(e, e->dirty - gone, e->dlo, lo[i]); /* still idle since then */
                e->purged = 1;
            }
            hk_free_merge_insert(a, e);
        }
        hk_unlock(&a->lock);
        /* With force, what was just released is unmapped on the next round. */
        if (np < HK_DECAY_BATCH && nu < HK_DECAY_BATCH && !(force && np)) break;
    }
    return released;
}

size_t hk_large_decay(uint64_t now, int force) {
    size_t released = 0;
    for (unsigned k = 0; k < hk_narenas; k++) released += hk_arena_decay(&hk_arenas[k], now, force);
    return released;
}

/* --- reports -------------------------------------------------------------------------------- */

void hk_large_demand(struct hk_large_demand *out) {
    *out = (struct hk_large_demand){0};
    for (unsigned k = 0; k < hk_narenas; k++) {
        struct hk_arena *a = &hk_arenas[k];
        hk_lock(&a->lock);
        out->refault_bytes += a->refault_bytes;
        out->peak_live_bytes += hk_get(&a->live_peak);
        out->peak_foot_bytes += hk_get(&a->foot_peak);
        hk_set(&a->live_peak, hk_get(&a->live_bytes));
        hk_set(&a->foot_peak, hk_get(&a->live_bytes));
        out->drawn_bytes += hk_drawdown_read(&a->drawn);
        hk_unlock(&a->lock);
    }
}

void hk_large_stats(struct hak_stats *out) {
    out->large_arenas = hk_narenas;
    for (unsigned k = 0; k < hk_narenas; k++) {
        struct hk_arena *a = &hk_arenas[k];
        hk_lock(&a->lock);
        hk_arena_drain(a);
        out->large_now += a->live_n;
        out->large_bytes_now += hk_get(&a->live_bytes);
        out->large_free_dirty_now += hk_get(&a->free_dirty);
        out->large_free_clean_now += hk_get(&a->free_total) - hk_get(&a->free_dirty);
        out->large_cache_hits += a->hits;
        out->large_cache_misses += a->misses;
        out->large_purged_bytes += a->purged_bytes;
        out->large_realloc_in_place += a->in_place;
        out->large_realloc_mremap += a->mremaps;
        out->large_realloc_copied += a->copied;
        out->large_gathers += a->gathers;
        out->large_gathered_bytes += a->gathered_bytes;
        out->large_steals += a->steals;
        out->large_queued_frees += a->queued;
        out->mapped_bytes_now += hk_get(&a->mapped_bytes);
        hk_unlock(&a->lock);
        hk_lock_add(&a->lock, &out->large_lock, &out->large_lock_waited);
    }
}

void hk_large_lock_all(void) {
    for (unsigned k = 0; k < hk_narenas; k++) pthread_mutex_lock(&hk_arenas[k].lock.m);
}
void hk_large_unlock_all(void) {
    for (unsigned k = 0; k < hk_narenas; k++) pthread_mutex_unlock(&hk_arenas[k].lock.m);
}

void hk_large_forked_child(void) {
    for (unsigned k = 0; k < HK_LARGE_ARENAS_MAX; k++)
        atomic_store_explicit(&hk_arena_threads[k], 0, memory_order_relaxed);
    if (hk_arena_tls)
        atomic_store_explicit(&hk_arena_threads[hk_arena_tls - 1], 1, memory_order_relaxed);
}
