#include "large.h"

#include <errno.h>
#include <pthread.h>

#include "../include/hakmem.h"
#include "clock.h"
#include "drawdown.h"
#include "os.h"
#include "policy.h"
#include "stats.h"
#include "trace.h"

#define HK_LARGE_MAP_MIN ((size_t)4 << 20) /* smallest mapping asked of the OS */
#define HK_LARGE_GROWTH 8 /* a miss maps at least 1/8 of what the tier has mapped (see below) */
#define HK_LARGE_SHRINK_MIN ((size_t)64 << 10) /* a shrink frees the tail from this much */

enum { HK_EXT_LIVE = 1, HK_EXT_FREE };
enum { HK_AGE_DIRTY = 0, HK_AGE_CLEAN = 1 }; /* age lists: free extents with / without dirt */

/* An extent: a page-aligned range of mapped memory, live (a block) or free. */
struct hk_ext {
    uintptr_t addr;
    size_t len;
    size_t dirty;                 /* free: bytes that may be resident (an estimate) */
    uintptr_t dlo, dhi;           /* free: every page that may be resident lies in [dlo, dhi)
                                   * (empty when dirty is 0) */
    uint64_t idle_since;          /* free: since when (0: fresh from the OS) */
    uint8_t state;                /* HK_EXT_* */
    uint8_t zero;                 /* free: every byte known to be zero */
    uint8_t bin;
    struct hk_ext *snext, *enext; /* hash chains: by start (all), by end (free ones) */
    struct hk_ext *next, *prev;   /* bin list of a free extent; the spare list */
    struct hk_ext *anext, *aprev; /* age list of a free extent, oldest first */
};

static pthread_mutex_t hk_large_mutex = PTHREAD_MUTEX_INITIALIZER;

static void hk_large_lock(void) { HK_LOCK_COUNTED(&hk_large_mutex, large_lock, large_lock_waited); }

/* --- extent records ------------------------------------------------------------------------- */

#define HK_EXT_CHUNK ((size_t)64 << 10)
static struct hk_ext *hk_spare;                  /* free records */
static size_t hk_nspare;

/* Makes sure n records can be taken without failing. */
static int hk_ext_reserve(size_t n) {
    while (hk_nspare < n) {
        struct hk_ext *chunk = hk_os_map(HK_EXT_CHUNK);
        if (!chunk) return 0;
        for (size_t i = 0; i < HK_EXT_CHUNK / sizeof *chunk; i++) {
            chunk[i].next = hk_spare;
            hk_spare = &chunk[i];
            hk_nspare++;
        }
    }
    return 1;
}

static struct hk_ext *hk_ext_take(void) {
    struct hk_ext *e = hk_spare;
    HK_ASSERT(e != NULL);
    hk_spare = e->next;
    hk_nspare--;
    *e = (struct hk_ext){0};
    return e;
}

static void hk_ext_give(struct hk_ext *e) {
    e->state = 0;
    e->next = hk_spare;
    hk_spare = e;
    hk_nspare++;
}

/* --- hash tables by start and by end address ------------------------------------------------- */

struct hk_htab {
    struct hk_ext **b;
    size_t cap, n; /* cap: a power of two, or 0 */
};
static struct hk_htab hk_by_start, hk_by_end;

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
static int hk_reserve(size_t n) {
    return hk_ext_reserve(n) && hk_tab_reserve(&hk_by_start, 0) && hk_tab_reserve(&hk_by_end, 1);
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
#define HK_NBINS 144
static inline unsigned hk_bin(size_t len) {
    size_t pg = len >> 12;
    if (pg <= 4) return (unsigned)pg - 1;
    unsigned e = 63u - (unsigned)__builtin_clzl(pg - 1);
    return 4u * (e - 1u) + (unsigned)(((pg - 1) >> (e - 2u)) & 3u);
}

static struct hk_ext *hk_bins[HK_NBINS];
static uint64_t hk_binmap[(HK_NBINS + 63) / 64];
static struct hk_ext *hk_age_head[2], *hk_age_tail[2];
static size_t hk_free_total, hk_free_dirty;

/* Counters (under the lock). */
static size_t hk_live_n, hk_live_bytes, hk_live_peak, hk_mapped_bytes;
static uint64_t hk_hits, hk_misses, hk_refault_bytes, hk_purged_bytes;
static uint64_t hk_in_place, hk_mremaps, hk_gathers, hk_gathered_bytes;

static struct hk_drawdown hk_drawn; /* of the dirty free bytes (drawdown.h) */

static inline void hk_live_grew(size_t n) {
    hk_live_bytes += n;
    if (hk_live_bytes > hk_live_peak) hk_live_peak = hk_live_bytes;
}

static inline int hk_age_of(const struct hk_ext *e) {
    return e->dirty ? HK_AGE_DIRTY : HK_AGE_CLEAN;
}

static void hk_free_insert(struct hk_ext *e) {
    unsigned b = hk_bin(e->len);
    int a = hk_age_of(e);
    e->state = HK_EXT_FREE;
    e->bin = (uint8_t)b;
    hk_tab_insert(&hk_by_start, e, 0);
    hk_tab_insert(&hk_by_end, e, 1);
    e->prev = NULL;
    e->next = hk_bins[b];
    if (e->next) e->next->prev = e;
    hk_bins[b] = e;
    hk_binmap[b / 64] |= (uint64_t)1 << (b % 64);
    /* Age list, sorted by idle_since (pieces of a split extent keep their older time). */
    struct hk_ext *after = hk_age_tail[a];
    while (after && after->idle_since > e->idle_since) after = after->aprev;
    e->aprev = after;
    e->anext = after ? after->anext : hk_age_head[a];
    if (e->anext) e->anext->aprev = e;
    else hk_age_tail[a] = e;
    if (after) after->anext = e;
    else hk_age_head[a] = e;
    hk_free_total += e->len;
    hk_free_dirty += e->dirty;
}

static void hk_free_remove(struct hk_ext *e) {
    unsigned b = e->bin;
    int a = hk_age_of(e);
    hk_tab_remove(&hk_by_start, e, 0);
    hk_tab_remove(&hk_by_end, e, 1);
    if (e->prev) e->prev->next = e->next;
    else hk_bins[b] = e->next;
    if (e->next) e->next->prev = e->prev;
    if (!hk_bins[b]) hk_binmap[b / 64] &= ~((uint64_t)1 << (b % 64));
    if (e->aprev) e->aprev->anext = e->anext;
    else hk_age_head[a] = e->anext;
    if (e->anext) e->anext->aprev = e->aprev;
    else hk_age_tail[a] = e->aprev;
    e->next = e->prev = e->anext = e->aprev = NULL;
    hk_free_total -= e->len;
    hk_free_dirty -= e->dirty;
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
static void hk_free_merge_insert(struct hk_ext *e) {
    struct hk_ext *l = hk_tab_find(&hk_by_end, e->addr, 1);
    if (l && l->state == HK_EXT_FREE) {
        hk_free_remove(l);
        e->addr = l->addr;
        e->len += l->len;
        hk_dirt_add(e, l);
        e->zero &= l->zero;
        if (l->idle_since > e->idle_since) e->idle_since = l->idle_since;
        hk_ext_give(l);
    }
    struct hk_ext *r = hk_tab_find(&hk_by_start, e->addr + e->len, 0);
    if (r && r->state == HK_EXT_FREE) {
        hk_free_remove(r);
        e->len += r->len;
        hk_dirt_add(e, r);
        e->zero &= r->zero;
        if (r->idle_since > e->idle_since) e->idle_since = r->idle_since;
        hk_ext_give(r);
    }
    hk_free_insert(e);
}

static inline int hk_fits(const struct hk_ext *e, size_t len, size_t align) {
    uintptr_t p = hk_align_up(e->addr, align);
    return p + len <= e->addr + e->len;
}

/* The shortest extent of bin b that can hold len bytes at alignment align (of the first
 * HK_FIT_TRIES; the dirtier of two as long), or NULL. */
#define HK_FIT_TRIES 32
static struct hk_ext *hk_best_in(unsigned b, size_t len, size_t align) {
    struct hk_ext *best = NULL;
    int tries = HK_FIT_TRIES;
    for (struct hk_ext *e = hk_bins[b]; e && tries--; e = e->next)
        if (hk_fits(e, len, align) &&
            (!best || e->len < best->len || (e->len == best->len && e->dirty > best->dirty)))
            best = e;
    return best;
}

/* A free extent that can hold len bytes at alignment align, or NULL: best fit, the shortest
 * of the lowest bin that has one. */
static struct hk_ext *hk_find_fit(size_t len, size_t align) {
    unsigned b = hk_bin(len);
    struct hk_ext *e = hk_best_in(b, len, align);
    if (e) return e;
    for (unsigned w = (b + 1) / 64; w < (HK_NBINS + 63) / 64; w++) {
        uint64_t m = hk_binmap[w];
        if (w == (b + 1) / 64) m &= ~(uint64_t)0 << ((b + 1) % 64);
        while (m) {
            unsigned bb = w * 64 + (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            if ((e = hk_best_in(bb, len, align)) != NULL) return e;
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
static void hk_piece(const struct hk_ext *e, uintptr_t addr, size_t len, size_t dirty) {
    struct hk_ext *x = hk_ext_take();
    x->addr = addr;
    x->len = len;
    hk_dirt_set(x, dirty, e->dlo, e->dhi);
    x->zero = e->zero;
    x->idle_since = e->idle_since;
    hk_free_insert(x);
}

/* Makes e (addr and len set, in no table) a live block. */
static void hk_live_insert(struct hk_ext *e) {
    e->state = HK_EXT_LIVE;
    hk_tab_insert(&hk_by_start, e, 0);
    hk_live_n++;
    hk_live_grew(e->len);
}

/* Where in free extent e a block of len bytes at alignment align goes: at e's start, or at
 * its end where that covers more of e's dirt (those pages are resident already: a block placed
 * elsewhere would fault in fresh pages while they sit idle). Never in between, which would
 * leave two free pieces where one will do. This matters where a new mapping lands below a
 * dirty extent and merges with it: big_zero (one 5..25 MiB block at a time) peaked at
 * 37.5 MiB, cut from the fresh front, and peaks at 26.7 MiB now. */
static uintptr_t hk_place(const struct hk_ext *e, size_t len, size_t align) {
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
static struct hk_ext *hk_carve(struct hk_ext *e, size_t len, size_t align, size_t *fresh) {
    uintptr_t p = hk_place(e, len, align);
    uintptr_t end = e->addr + e->len;
    hk_free_remove(e);
    size_t mine = hk_dirt_in(e, p, p + len), before = hk_dirt_in(e, e->addr, p);
    *fresh = len - mine;
    if (p > e->addr) hk_piece(e, e->addr, p - e->addr, before);
    if (p + len < end) hk_piece(e, p + len, end - (p + len), e->dirty - mine - before);
    e->addr = p;
    e->len = len;
    e->dirty = 0;
    e->dlo = e->dhi = 0;
    hk_live_insert(e);
    return e;
}

/* A freed block: all of it may hold data. */
static void hk_free_block(struct hk_ext *e, uint64_t now) {
    hk_dirt_set(e, e->len, e->addr, e->addr + e->len);
    hk_drawdown_give(&hk_drawn, e->len);
    e->zero = 0;
    e->idle_since = now;
    hk_free_merge_insert(e);
}

/* --- gathering: a new block made of free extents' resident pages ---------------------------- */

/* Free memory can be plentiful and resident yet in pieces, none long enough for a request:
 * blocks of varied sizes freed in another order than they were allocated leave live blocks
 * between the free ones. A new mapping would then fault in the whole block while those pages
 * sit idle. Instead, a miss moves the resident pages of free extents into the new mapping
 * (mremap, which moves page tables and copies nothing): the block costs no fresh pages where
 * free ones were resident, and the footprint stays near the live size. The places they leave
 * are unmapped. Only pieces worth a system call move, and a few per block. Each moved piece
 * is a mapping of its own to the kernel, which does not merge it with its neighbours, and
 * their count only grows while the tier keeps memory mapped (bench/large: 1,183 mappings
 * after 200,000 blocks, against 45 without gathering); gathering stops after HK_GATHER_CAP
 * pieces, far below the kernel's limit of 65,530 mappings, until the tier has nothing mapped. */
#define HK_GATHER_MIN ((size_t)256 << 10)
#define HK_GATHER_PIECES 8
#define HK_GATHER_CAP 8192

static size_t hk_moved_pieces; /* pieces moved while the tier has had memory mapped */

struct hk_gather {
    struct hk_ext *piece[HK_GATHER_PIECES]; /* taken out of every table while they move */
    size_t dirty[HK_GATHER_PIECES];         /* their dirt, should one have to go back */
    unsigned n;
};

/* Under the lock: takes out of the free extents, newest first, the resident spans to fill up
 * to len bytes; what is left of an extent around its span stays free. */
static void hk_gather_take(struct hk_gather *g, size_t len) {
    struct hk_ext *cand[HK_GATHER_PIECES];
    unsigned nc = 0;
    size_t want = 0;
    for (struct hk_ext *e = hk_age_tail[HK_AGE_DIRTY]; e && nc < HK_GATHER_PIECES && want < len;
         e = e->aprev) {
        if (e->dirty < HK_GATHER_MIN) continue;
        cand[nc++] = e;
        want += e->dhi - e->dlo;
    }
    g->n = 0;
    for (unsigned i = 0; i < nc && len >= HK_GATHER_MIN; i++) {
        struct hk_ext *e = cand[i];
        if (!hk_reserve(2)) break;
        size_t t = e->dhi - e->dlo < len ? e->dhi - e->dlo : len;
        uintptr_t lo = e->dlo, end = e->addr + e->len;
        size_t mine = hk_dirt_in(e, lo, lo + t);
        hk_free_remove(e);
        if (lo > e->addr) hk_piece(e, e->addr, lo - e->addr, 0);
        if (lo + t < end) hk_piece(e, lo + t, end - (lo + t), e->dirty - mine);
        e->addr = lo;
        e->len = t;
        e->state = 0;
        g->dirty[g->n] = mine;
        g->piece[g->n++] = e;
        len -= t;
    }
}

/* Without the lock: moves the pieces to the front of the new mapping m of len bytes, one
 * after the other; a piece that cannot move (it spans two mappings) is left where it is.
 * Returns the bytes moved; a moved piece has SIZE_MAX for its dirt. */
static size_t hk_gather_move(struct hk_gather *g, uintptr_t m) {
    size_t off = 0;
    for (unsigned i = 0; i < g->n; i++) {
        struct hk_ext *e = g->piece[i];
        if (hk_os_move((void *)e->addr, e->len, (void *)(m + off))) {
            off += e->len;
            g->dirty[i] = SIZE_MAX;
        }
    }
    return off;
}

/* Under the lock: moved pieces' records go, the others are free again. */
static void hk_gather_done(struct hk_gather *g, uint64_t now) {
    for (unsigned i = 0; i < g->n; i++) {
        struct hk_ext *e = g->piece[i];
        if (g->dirty[i] == SIZE_MAX) {
            hk_moved_pieces++;
            hk_mapped_bytes -= e->len;
            hk_ext_give(e);
        } else {
            hk_dirt_set(e, g->dirty[i], e->addr, e->addr + e->len);
            if (!e->idle_since) e->idle_since = now;
            hk_free_merge_insert(e);
        }
    }
}

/* --- the API -------------------------------------------------------------------------------- */

/* Dirty bytes kept regardless of age: the policy's budget, or with ACE twice the peak of live
 * bytes in this window (what the program has just shown it uses, and room for the pieces it
 * is split into), up to the cap. */
static size_t hk_large_budget(void) {
    size_t budget = atomic_load_explicit(&hk_pol.large_budget, memory_order_relaxed);
    if (!atomic_load_explicit(&hk_pol.demand, memory_order_relaxed)) return budget;
    size_t cap = atomic_load_explicit(&hk_pol.large_cap, memory_order_relaxed);
    size_t peak = 1 * hk_live_peak < cap ? 1 * hk_live_peak : cap;
    return budget > peak ? budget : peak;
}

/* As in the pool: a free releases at once only beyond the budget and a quarter; the tick
 * trims to the budget. */
static int hk_large_over(void) {
    size_t budget = hk_large_budget();
    return hk_free_dirty > budget + budget / 4;
}

void *hk_large_alloc(size_t n, size_t align, int *zeroed) {
    if (align < HK_PAGE_SIZE) align = HK_PAGE_SIZE;
    size_t len = hk_align_up(n ? n : 1, HK_PAGE_SIZE);
    if (len < n || len > PTRDIFF_MAX || len + align < len) {
        errno = ENOMEM;
        return NULL;
    }
    uint64_t now = hk_now_ms();
    hk_large_lock();
    if (!hk_reserve(3)) goto oom;
    struct hk_ext *e = hk_find_fit(len, align);
    if (HK_TRACING(HK_T_LARGE))
        hk_trace(HK_T_LARGE, e ? "hit (served from free large memory)" : "miss (more is mapped)",
                 "bytes", len, "align", align, NULL, 0);
    int hit = e != NULL;
    if (hit) {
        hk_hits++;
    } else {
        /* Nothing free fits: map more, without the lock, gathering into it what free memory is
         * resident. */
        struct hk_gather g = {.n = 0};
        if (align == HK_PAGE_SIZE && hk_free_dirty >= HK_GATHER_MIN &&
            hk_moved_pieces < HK_GATHER_CAP)
            hk_gather_take(&g, len);
        hk_misses++;
        /* The tier grows geometrically, as a heap does. Mappings of one block each leave
         * free memory in pieces no longer than a block, which merge only where the kernel
         * happened to place mappings side by side; a later longer request fits none of them
         * and misses again. An eighth of the footprint, untouched until carved, costs address
         * space only, and later misses are carved from it. large_many (1,024 live blocks of
         * 1..4 MiB): 1,519 misses in 20,000 requests with 4 MiB mappings, 106 with this. */
        size_t grow = hk_align_up(hk_mapped_bytes / HK_LARGE_GROWTH, HK_PAGE_SIZE);
        pthread_mutex_unlock(&hk_large_mutex);
        size_t need = len + (align > HK_PAGE_SIZE ? align : 0);
        if (need < len) need = len;
        size_t map = need > HK_LARGE_MAP_MIN ? need : HK_LARGE_MAP_MIN;
        if (map < grow) map = grow;
        void *m = hk_os_map(map);
        if (!m && map > need) {
            /* Address space or commit limits: the block alone may still fit. */
            map = need;
            m = hk_os_map(map);
        }
        size_t moved = m && g.n ? hk_gather_move(&g, (uintptr_t)m) : 0;
        hk_large_lock();
        hk_gather_done(&g, now);
        if (!m) goto oom;
        if (!hk_reserve(3)) {
            pthread_mutex_unlock(&hk_large_mutex);
            hk_os_unmap(m, map);
            errno = ENOMEM;
            return NULL;
        }
        hk_mapped_bytes += map;
        if (moved) {
            /* The block starts the mapping, which begins with the moved resident pages; the
             * rest of a mapping longer than the block is free. */
            hk_gathers++;
            hk_gathered_bytes += moved;
            hk_drawdown_take(&hk_drawn, moved);
            if (HK_TRACING(HK_T_LARGE))
                hk_trace(HK_T_LARGE, "miss gathered (free resident pages moved into the block)",
                         "bytes", len, "moved", moved, NULL, 0);
            if (map > len) {
                struct hk_ext *t = hk_ext_take();
                t->addr = (uintptr_t)m + len;
                t->len = map - len;
                t->zero = 1;
                hk_free_merge_insert(t);
            }
            e = hk_ext_take();
            e->addr = (uintptr_t)m;
            e->len = len;
            hk_live_insert(e);
            *zeroed = 0;
            pthread_mutex_unlock(&hk_large_mutex);
            return m;
        }
        e = hk_ext_take();
        e->addr = (uintptr_t)m;
        e->len = map;
        e->zero = 1;
        hk_free_merge_insert(e);
        if (!hk_fits(e, len, align)) e = hk_find_fit(len, align);
        HK_ASSERT(e != NULL);
    }
    *zeroed = e->zero;
    uint64_t idle = e->idle_since;
    size_t fresh;
    e = hk_carve(e, len, align, &fresh);
    hk_drawdown_take(&hk_drawn, len - fresh);
    /* Released not long ago and wanted again: ACE lengthens the delay. */
    if (hit && fresh && idle && now - idle < 2 * hk_pol_purge_delay()) {
        hk_refault_bytes += fresh;
        hk_drawdown_take(&hk_drawn, fresh); /* taken back, though released (pool.c) */
    }
    pthread_mutex_unlock(&hk_large_mutex);
    return (void *)e->addr;
oom:
    pthread_mutex_unlock(&hk_large_mutex);
    errno = ENOMEM;
    return NULL;
}

/* Start addresses of the blocks freed last: a freed block merges with free neighbours and
 * its start may no longer begin an extent, yet a second free of it is still a double free. */
#define HK_RECENT 64
static uintptr_t hk_recent[HK_RECENT];
static unsigned hk_recent_next;

static int hk_recently_freed(uintptr_t a) {
    for (unsigned i = 0; i < HK_RECENT; i++)
        if (hk_recent[i] == a) return 1;
    return 0;
}

int hk_large_free(void *p) {
    uint64_t now = hk_now_ms();
    hk_large_lock();
    struct hk_ext *e = hk_tab_find(&hk_by_start, (uintptr_t)p, 0);
    if (!e || e->state != HK_EXT_LIVE) {
        int twice = e != NULL || hk_recently_freed((uintptr_t)p);
        pthread_mutex_unlock(&hk_large_mutex);
        return twice ? -1 : 0;
    }
    hk_recent[hk_recent_next++ % HK_RECENT] = (uintptr_t)p;
    hk_tab_remove(&hk_by_start, e, 0);
    hk_live_n--;
    hk_live_bytes -= e->len;
    hk_free_block(e, now);
    int over = hk_large_over();
    pthread_mutex_unlock(&hk_large_mutex);
    if (over) hk_large_decay(now, 0);
    return 1;
}

size_t hk_large_usable(const void *p) {
    hk_large_lock();
    struct hk_ext *e = hk_tab_find(&hk_by_start, (uintptr_t)p, 0);
    size_t n = e && e->state == HK_EXT_LIVE ? e->len : 0;
    pthread_mutex_unlock(&hk_large_mutex);
    return n;
}

void *hk_large_realloc(void *p, size_t n) {
    size_t len = hk_align_up(n ? n : 1, HK_PAGE_SIZE);
    if (len < n || len > PTRDIFF_MAX) return NULL;
    uint64_t now = hk_now_ms();
    hk_large_lock();
    struct hk_ext *e = hk_tab_find(&hk_by_start, (uintptr_t)p, 0);
    if (!e || e->state != HK_EXT_LIVE || !hk_reserve(2)) {
        pthread_mutex_unlock(&hk_large_mutex);
        return NULL;
    }
    if (len <= e->len) {
        /* Shrink in place; a tail worth having becomes free memory. */
        if (e->len - len >= HK_LARGE_SHRINK_MIN) {
            struct hk_ext *t = hk_ext_take();
            t->addr = e->addr + len;
            t->len = e->len - len;
            hk_live_bytes -= t->len;
            e->len = len;
            hk_free_block(t, now);
        }
        hk_in_place++;
        pthread_mutex_unlock(&hk_large_mutex);
        return p;
    }
    struct hk_ext *r = hk_tab_find(&hk_by_start, e->addr + e->len, 0);
    if (r && r->state == HK_EXT_FREE && e->len + r->len >= len) {
        /* Grow in place into the free neighbour, from its front. */
        size_t need = len - e->len;
        hk_free_remove(r);
        if (r->len > need) {
            size_t rest = r->dirty - hk_dirt_in(r, r->addr, r->addr + need);
            r->addr += need;
            r->len -= need;
            hk_dirt_set(r, rest, r->dlo, r->dhi);
            hk_free_insert(r);
        } else {
            hk_ext_give(r);
        }
        e->len = len;
        hk_live_grew(need);
        hk_in_place++;
        pthread_mutex_unlock(&hk_large_mutex);
        return p;
    }
    size_t old = e->len;
    pthread_mutex_unlock(&hk_large_mutex);
    /* Move the pages: the block is the caller's, nobody else reaches this record meanwhile. */
    void *q = hk_os_remap(p, old, len);
    if (!q) return NULL;
    hk_large_lock();
    hk_tab_remove(&hk_by_start, e, 0);
    e->addr = (uintptr_t)q;
    e->len = len;
    hk_tab_insert(&hk_by_start, e, 0);
    hk_live_grew(len - old);
    hk_mapped_bytes += len - old;
    hk_mremaps++;
    if (HK_TRACING(HK_T_LARGE))
        hk_trace(HK_T_LARGE, "realloc by mremap", "bytes", len, NULL, 0, NULL, 0);
    pthread_mutex_unlock(&hk_large_mutex);
    return q;
}

#define HK_DECAY_BATCH 32
#define HK_RELEASE_MIN ((size_t)1 << 20) /* a release for the budget takes at least this */

size_t hk_large_decay(uint64_t now, int force) {
    size_t released = 0;
    for (;;) {
        /* What goes: purge[i]'s pages in [lo[i], hi[i]); unmap[i] whole. */
        struct hk_ext *purge[HK_DECAY_BATCH], *unmap[HK_DECAY_BATCH];
        uintptr_t lo[HK_DECAY_BATCH], hi[HK_DECAY_BATCH];
        unsigned np = 0, nu = 0;
        hk_large_lock();
        uint64_t delay = hk_pol_purge_delay(), udelay = hk_pol_unmap_delay();
        size_t keep = hk_large_budget();
        struct hk_ext *e;
        /* Taken out of every table while their pages go: nothing merges with them or
         * allocates from them meanwhile. */
        while ((e = hk_age_head[HK_AGE_CLEAN]) != NULL && nu < HK_DECAY_BATCH &&
               (force || now - e->idle_since >= udelay)) {
            hk_free_remove(e);
            unmap[nu++] = e;
        }
        size_t dirty = hk_free_dirty;
        while ((e = hk_age_head[HK_AGE_DIRTY]) != NULL && np < HK_DECAY_BATCH &&
               (force || now - e->idle_since >= delay || dirty > keep)) {
            hk_free_remove(e);
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
        pthread_mutex_unlock(&hk_large_mutex);
        if (np == 0 && nu == 0) break;
        for (unsigned i = 0; i < nu; i++) {
            hk_os_unmap((void *)unmap[i]->addr, unmap[i]->len);
            released += unmap[i]->len;
        }
        for (unsigned i = 0; i < np; i++) /* only the span can hold resident pages */
            hk_os_release((void *)lo[i], hi[i] - lo[i]);
        hk_large_lock();
        for (unsigned i = 0; i < nu; i++) {
            hk_mapped_bytes -= unmap[i]->len;
            hk_ext_give(unmap[i]);
        }
        if (hk_mapped_bytes == 0) hk_moved_pieces = 0; /* every moved piece is unmapped */
        for (unsigned i = 0; i < np; i++) {
            e = purge[i];
            size_t gone = lo[i] == e->dlo ? e->dirty : hk_dirt_in(e, lo[i], hi[i]);
            released += gone;
            hk_purged_bytes += gone;
            if (HK_TRACING(HK_T_LARGE))
                hk_trace(HK_T_LARGE, "release (idle free pages)", "addr@", lo[i], "bytes", gone,
                         NULL, 0);
            if (lo[i] == e->dlo) {
                e->dirty = 0;
                e->dlo = e->dhi = 0;
                e->zero = 1;
                e->idle_since = now; /* when its pages went: refault detection, unmap delay */
            } else {
                hk_dirt_set(e, e->dirty - gone, e->dlo, lo[i]); /* still idle since then */
            }
            hk_free_merge_insert(e);
        }
        pthread_mutex_unlock(&hk_large_mutex);
        /* With force, what was just released is unmapped on the next round. */
        if (np < HK_DECAY_BATCH && nu < HK_DECAY_BATCH && !(force && np)) break;
    }
    return released;
}

/* --- reports -------------------------------------------------------------------------------- */

void hk_large_demand(struct hk_large_demand *out) {
    hk_large_lock();
    out->refault_bytes = hk_refault_bytes;
    out->peak_live_bytes = hk_live_peak;
    hk_live_peak = hk_live_bytes;
    out->drawn_bytes = hk_drawdown_read(&hk_drawn);
    pthread_mutex_unlock(&hk_large_mutex);
}

void hk_large_stats(struct hak_stats *out) {
    hk_large_lock();
    out->large_now = hk_live_n;
    out->large_bytes_now = hk_live_bytes;
    out->large_free_dirty_now = hk_free_dirty;
    out->large_free_clean_now = hk_free_total - hk_free_dirty;
    out->large_cache_hits = hk_hits;
    out->large_cache_misses = hk_misses;
    out->large_purged_bytes = hk_purged_bytes;
    out->large_realloc_in_place = hk_in_place;
    out->large_realloc_mremap = hk_mremaps;
    out->large_gathers = hk_gathers;
    out->large_gathered_bytes = hk_gathered_bytes;
    out->mapped_bytes_now += hk_mapped_bytes;
    pthread_mutex_unlock(&hk_large_mutex);
}

void hk_large_lock_all(void) { pthread_mutex_lock(&hk_large_mutex); }
void hk_large_unlock_all(void) { pthread_mutex_unlock(&hk_large_mutex); }
