/* The malloc family: hak_* entry points with glibc's semantics, exported under the standard
 * names as aliases unless built with HK_NO_OVERRIDE (the sanitizer build of the tests).
 *
 * malloc's and free's fast paths are here, written out so that a hit costs no call (heap.h
 * describes them). Requests up to HK_MID_MAX go to the thread heap (small and mid classes),
 * larger ones to the large tier (large.c), as does a malloc of a class of one block a span
 * that the large tier's resident free memory holds where a new span would be cut
 * (hk_mid_borrow); everything else is in heap.c.
 *
 * The hardened build (HK_HARDENED) asks the heap for HK_GUARD_ROOM more bytes than requested
 * and arms the guards of guard.h on every small and mid block; free checks them. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

#include "../include/hakmem.h"
#include "clock.h"
#include "decay.h"
#include "guard.h"
#include "heap.h"
#include "init.h"
#include "large.h"
#include "os.h"
#include "pool.h"
#include "report.h"
#include "trace.h"

/* glibc refuses requests above PTRDIFF_MAX so that pointer differences stay defined. */
#define HK_MAX_REQUEST ((size_t)PTRDIFF_MAX)

/* Resizes large block p in place, by copying it into resident free memory, or by moving its
 * pages (hk_large_realloc); where that would map more while the pool keeps free SuperSlabs,
 * they go to the page heap first, and the block grows into them. NULL if the tier cannot (p
 * intact). */
static void *hk_large_grow(void *p, size_t n) {
    if (!hk_pool_has_cache()) return hk_large_realloc(p, n, 0);
    void *q = hk_large_realloc(p, n, HK_LARGE_NO_MAP);
    if (q) return q;
    hk_pool_give_cache();
    return hk_large_realloc(p, n, 0);
}

/* Bookkeeping of a large block p just cut for a request of n bytes (zeroed: what the tier
 * told of its bytes); clear: calloc's. */
static void *hk_large_out(void *p, size_t n, unsigned zeroed, int clear) {
    hk_heap_large_taken();
    if (HK_UNLIKELY(hk_counting)) hk_heap_count_large(1);
    if (clear && !(zeroed & HK_LARGE_ZERO)) hk_os_zero(p, n);
    /* Memory that held free small blocks (a SuperSlab gone back to the page heap resident)
     * may hold the free mark where the block begins, as no block malloc hands out may:
     * realloc copies that word into the small block it moves to, whose free then looked like
     * a double free (block.h). malloc clears it for small and mid blocks; here likewise, where
     * the tier says the mark may be there (not elsewhere: the store would fault the page in
     * before the program asks for it, large.c, hk_take). */
    else if (!(zeroed & HK_LARGE_UNMARKED)) hk_mark_live(p);
    return p;
}

static void *hk_large_block(size_t n, size_t align, int clear) {
    hk_init(); /* a program's first call may be a large one: the configuration holds for it */
    if (n > HK_MAX_REQUEST) {
        if (HK_TRACING(HK_T_FAIL))
            hk_trace(HK_T_FAIL, "malloc failed: TooBig (above PTRDIFF_MAX)", "bytes", n, NULL, 0,
                     NULL, 0);
        errno = ENOMEM;
        return NULL;
    }
    hk_heap_mid_home();
    unsigned zeroed;
    /* Free SuperSlabs the pool keeps serve before the tier maps more (hk_large_grow), and a
     * block of a SuperSlab or more before untouched free memory: either would fault in fresh
     * pages while the SuperSlabs' resident ones sit idle (phases, arrays to 4 MiB and small
     * objects in turn: 2,340 page faults after its first round and 120.8 MiB peak RSS where
     * untouched memory served, 285 and 112.6). Not a shorter one: it would send them all to
     * the page heap (hk_pool_give_cache) for a few fresh pages. */
    unsigned flags = !hk_pool_has_cache() ? 0
                     : n >= HK_SS_SIZE     ? HK_LARGE_RESIDENT
                                           : HK_LARGE_NO_MAP;
    void *p = hk_large_alloc(n, align, &zeroed, flags);
    if (!p && flags) {
        hk_pool_give_cache();
        p = hk_large_alloc(n, align, &zeroed, 0);
    }
    if (p) hk_large_out(p, n, zeroed, clear);
    else if (HK_TRACING(HK_T_FAIL))
        hk_trace(HK_T_FAIL, "malloc failed: MapFail (the OS refused memory)", "bytes", n, "align",
                 align, NULL, 0);
    /* A program of big blocks only may never refill a thread cache: let it tick here. */
    hk_decay_tick(hk_now_ms());
    return p;
}

/* Bookkeeping of a small or mid block p of class c just handed out for n bytes (p may be
 * NULL): a mid block notes its request (superslab.h), and the call is counted if asked. */
static inline void *hk_handed_out(void *p, unsigned c, size_t n) {
    if (!p) return NULL;
#ifndef HK_HARDENED /* the hardened build knows the request from its guards */
    if (c >= HK_NSMALL) hk_mid_note((uintptr_t)p, n);
#else
    (void)n;
#endif
    if (HK_UNLIKELY(hk_counting)) hk_heap_count_alloc(c);
    return p;
}

#ifdef HK_HARDENED
/* Block bytes for a request of n: the guards' room (which keeps requests out of the 16-byte
 * class, whose free blocks have no room for a trailer beside the link and the free mark).
 * 0 if n is too big. */
static inline size_t hk_guard_request(size_t n) {
    size_t m = n + HK_GUARD_ROOM;
    return m < n ? 0 : m;
}

/* A guarded block of class c for a request of n bytes, from the heap's slow path. While
 * counting, every small request comes here with the empty class HK_CLS_NONE (heap.c). */
static HK_NOINLINE void *hk_guarded_refill(unsigned c, size_t n) {
    int counted_here = c == HK_CLS_NONE; /* other callers count for themselves */
    if (counted_here) c = hk_class_of(n + HK_GUARD_ROOM);
    void *p = hk_heap_refill(c);
    if (p) hk_guard_arm(p, n, hk_class_size[c]);
    if (counted_here && p) hk_heap_count_alloc(c);
    return p;
}

/* The same after the cache of class c was found corrupt at block b (see hk_heap_corrupt). */
static HK_NOINLINE void *hk_guarded_corrupt(unsigned c, void *b, size_t n) {
    if ((b = hk_heap_corrupt(c, b)) != NULL) hk_guard_arm(b, n, hk_class_size[c]);
    return b;
}

/* A guarded block of class c for a request of n bytes; small says c < HK_NSMALL (known where
 * it is inlined, so that the link check drops the test). */
static inline void *hk_guarded_alloc(unsigned c, size_t n, int small) {
    struct hk_heap *h = hk_heap_here();
    void *b = h->free[c];
    if (HK_LIKELY(b != NULL)) {
        void *next = hk_link_get(b);
        if (HK_UNLIKELY(!(small ? hk_link_ok_small(b, next, c) : hk_link_ok(b, next, c))))
            return hk_guarded_corrupt(c, b, n);
        h->free[c] = next;
        hk_block_prefetch(next);
        hk_mark_live(b);
        hk_guard_arm(b, n, hk_class_size[c]);
        return b;
    }
    return hk_guarded_refill(c, n);
}

HK_EXPORT void *hak_malloc(size_t n) {
    size_t m = hk_guard_request(n);
    if (HK_LIKELY(m && m <= HK_TABLE_MAX))
        return hk_guarded_alloc(hk_malloc_class[(m + 15) >> 4], n, 1);
    if (m && m <= HK_MID_MAX) {
        unsigned c = hk_mid_class_of(m);
        return hk_handed_out(hk_guarded_alloc(c, n, 0), c, n);
    }
    return hk_large_block(n, HK_PAGE_SIZE, 0);
}
#else
/* A block for a malloc of n bytes of class c, of one block a span (above 256 KiB), whose
 * refill would take a span from elsewhere: cut from the large tier's resident free memory
 * where a piece of it holds the block (a large block, then), else NULL. A span of a SuperSlab
 * cannot be cut from the pieces that big blocks leave between them, nor a big block from
 * EMPTY slots, so where both came and went the tiers kept a peak each: mixed_churn (blocks
 * of 8 B to 4 MiB swapped between threads) peaked at 106.8 MiB with 27,000 page faults
 * (tcmalloc, one page heap for all sizes: 88.4 MiB and 22,300); with this, 97.0 MiB and
 * 24,500. A thread whose borrowed blocks die young (freed before its next such request)
 * borrows no more until its tick (heap.h): its cache serves them without a lock (malloc and
 * free of 400 KB in a loop beside 20 MiB of free memory: 181 ns a pair when every malloc
 * borrowed, 9-17 with the score, as before). calloc and realloc's moves borrow through
 * malloc; the aligned calls do not. */
static void *hk_mid_borrow(unsigned c, size_t n) {
    if (!hk_heap_may_borrow(c)) return NULL;
    unsigned zeroed;
    void *p = hk_large_alloc(n, HK_PAGE_SIZE, &zeroed, HK_LARGE_RESIDENT);
    if (!p) return NULL;
    hk_heap_borrowed(p);
    return hk_large_out(p, n, zeroed, 0);
}

/* A mid block of class c for a request of n bytes where the hit path below does not take
 * one: the cache is empty (a refill) or corrupt, or the counters are on. */
static HK_NOINLINE void *hk_malloc_mid(unsigned c, size_t n) {
    void *p = c >= HK_MID_ONE ? hk_mid_borrow(c, n) : NULL;
    if (p) return p;
    return hk_handed_out(hk_heap_alloc(c), c, n);
}

/* malloc above the table: a mid block, from its class's cache where that holds one (a block
 * the thread kept at its free, heap.c, hk_mid_keep), without a call or a frame on that path
 * (tight 100000: 75 -> 61 instructions a malloc, the span's offset by hk_slab_offset
 * included); else a refill, or a large block. hk_heap_alloc's pop, but for its refill, whose
 * call inlined here made this a function with a frame. */
static HK_NOINLINE void *hk_malloc_big(size_t n) {
    if (HK_LIKELY(n <= HK_MID_MAX)) {
        unsigned c = hk_mid_class_of(n);
        struct hk_heap *h = hk_heap_here();
        void *b = h->free[c];
        if (HK_LIKELY(b != NULL && !hk_counting)) {
            void *next = hk_link_get(b);
            if (HK_LIKELY(hk_link_ok(b, next, c))) {
                hk_heap_took(h, c, b, next);
                hk_mid_note((uintptr_t)b, n);
                return b;
            }
        }
        return hk_malloc_mid(c, n);
    }
    return hk_large_block(n, HK_PAGE_SIZE, 0);
}

HK_EXPORT HK_HOT_ENTRY void *hak_malloc(size_t n) {
    if (HK_LIKELY(n <= HK_TABLE_MAX)) {
        struct hk_heap *h = hk_heap_here();
        unsigned c = hk_malloc_class[(n + 15) >> 4];
        void *b = h->free[c];
        if (HK_LIKELY(b != NULL)) {
            void *next = hk_link_get(b);
            if (HK_UNLIKELY(!hk_link_ok(b, next, c))) return hk_heap_corrupt_size(n, b);
            h->free[c] = next;
            h->taken[c]++;
            hk_block_prefetch(next);
            hk_mark_live(b);
            return b;
        }
        /* The refill takes the size, not the class: the hit path then needs no register move
         * to set up the call. */
        return hk_heap_refill_size(n);
    }
    return hk_malloc_big(n);
}
#endif

static inline void hk_free_inline(void *p) {
    uintptr_t a = (uintptr_t)p, mark = hk_free_mark();
    const struct hk_owned *e = hk_free_entry(a);
    __asm__("" : "+r"(e)); /* one address for the entry: gcc would derive it twice from %fs */
    /* A carved block start of one of this thread's small slabs, and not marked free: anything
     * else is validated (and reported) by the slow path. */
    if (HK_LIKELY(hk_owned_block(e, p, mark))) {
#ifdef HK_HARDENED
        struct hk_heap *h = hk_heap_here();
        struct hk_slab *s = h->oslab[e - hk_tls.ftab];
        if (!hk_heap_guard_free(p, s->bsize, a - e->base, "free")) return;
        if (HK_LIKELY(hk_heap_free_fast(h, e, p, mark))) return;
        hk_heap_free_owned(s, p);
#else
        hk_heap_free_fast(e, p, mark);
#endif
        return;
    }
    hk_heap_free_slow(p);
}

HK_EXPORT HK_HOT_ENTRY void hak_free(void *p) { hk_free_inline(p); }

/* Whether size cannot be the request that block start p of slab s (not a free block's, which
 * the free reports) was handed out for: the hardened build keeps the request, in the block's
 * trailer (guard.h); the default build knows only the block's size, which no request exceeds,
 * so a larger size shows and a smaller one does not. */
static inline int hk_size_differs(const struct hk_slab *s, void *p, size_t size) {
#ifdef HK_HARDENED
    size_t n;
    return hk_guard_check(p, s->bsize, &n) == HK_GUARD_OK && n != size;
#else
    return !hk_marked_free(p) && size > __atomic_load_n(&s->bsize, __ATOMIC_RELAXED);
#endif
}

/* free_sized and free_aligned_sized must be given the size that was asked for (C23): checked
 * for small and mid blocks as far as the build knows it (hk_size_differs). */
static void hk_free_checked_size(void *p, size_t size, const char *op) {
    if (p && hk_is_superslab((uintptr_t)p)) {
        struct hk_slab *s = hk_slab_of((uintptr_t)p);
        if (__atomic_load_n(&s->cls, __ATOMIC_ACQUIRE) != HK_CLS_NONE &&
            hk_slab_block_index(s, (uintptr_t)p) >= 0 && hk_size_differs(s, p, size)) {
            hk_report(op, p, "size differs from the size allocated");
            return;
        }
    }
    hk_free_inline(p);
}

HK_EXPORT void hak_free_sized(void *p, size_t size) { hk_free_checked_size(p, size, "free_sized"); }

HK_EXPORT void hak_free_aligned_sized(void *p, size_t alignment, size_t size) {
    (void)alignment;
    hk_free_checked_size(p, size, "free_aligned_sized");
}

/* Usable size of live block p in *n: 1, or 0 after reporting p as invalid or free. */
static int hk_usable(void *p, const char *op, size_t *n) {
    uintptr_t a = (uintptr_t)p;
    if (hk_is_superslab(a)) {
        struct hk_slab *s = hk_slab_of(a);
        if (HK_LIKELY(__atomic_load_n(&s->cls, __ATOMIC_ACQUIRE) != HK_CLS_NONE &&
                      hk_slab_block_index(s, a) >= 0)) {
            if (HK_UNLIKELY(hk_marked_free(p))) {
                hk_report(op, p, "use after free (the block is free)");
                return 0;
            }
#ifdef HK_HARDENED
            int g = hk_guard_check(p, s->bsize, n);
            if (g == HK_GUARD_OK) return 1;
            hk_report(op, p, g == HK_GUARD_IS_FREE
                                 ? "use after free (the block is free)"
                                 : "heap overflow (the bytes after the block were overwritten)");
            return 0;
#else
            *n = s->bsize;
            return 1;
#endif
        }
    } else {
        int st = hk_large_lookup(p, n, NULL);
        if (st == HK_LARGE_LIVE) return 1;
        if (st == HK_LARGE_FREED) {
            hk_report(op, p, "use after free (the block is free)");
            return 0;
        }
    }
    hk_report(op, p, "invalid pointer (not allocated by hakmem)");
    return 0;
}

/* malloc_usable_size of anything its fast path below does not take. */
static HK_NOINLINE size_t hk_usable_size_slow(void *p) {
    size_t n;
    if (!p || !hk_usable(p, "malloc_usable_size", &n)) return 0;
#ifndef HK_HARDENED
    /* Told the block's size, the program may fill all of it: realloc must then copy it all. */
    if (n > HK_SMALL_MAX && hk_is_superslab((uintptr_t)p))
        hk_mid_forget((uintptr_t)p);
#endif
    return n;
}

HK_EXPORT size_t hak_usable_size(void *p) {
#ifndef HK_HARDENED
    /* A block of one of the thread's own small slabs, or of a mid span its table admits,
     * found as free's fast path finds it, without a frame: redis asks the size of each block
     * it allocates and frees. */
    const struct hk_owned *e = hk_free_entry((uintptr_t)p);
    if (HK_LIKELY(hk_owned_block(e, p, hk_free_mark()))) {
        uintptr_t c = hk_owned_class(hk_heap_here(), e);
        if (HK_LIKELY(c < HK_NSMALL)) return hk_class_size[c];
        if (c < HK_NCLASS) {
            hk_mid_forget((uintptr_t)p); /* as below */
            return hk_class_size[c];
        }
    }
#endif
    return hk_usable_size_slow(p);
}

HK_EXPORT int hak_owns(const void *p) {
    uintptr_t a = (uintptr_t)p;
    if (hk_is_superslab(a)) return 1;
    return p && hk_large_lookup(p, NULL, NULL) == HK_LARGE_LIVE;
}

/* malloc of n bytes, and in *fresh whether the block was carved from a fresh slab within
 * this call (heap.h, zero_block): zero but for its first two words. The note is compared
 * before and after, on one heap: one carved before may have been handed out since, and a
 * thread's first call may take over an exited thread's heap with that thread's note. */
static void *hk_malloc_carved(size_t n, int *fresh) {
    struct hk_heap *h = hk_heap_here();
    void *before = h->zero_block;
    void *p = hak_malloc(n);
    *fresh = p != NULL && hk_heap_here() == h && p == h->zero_block && p != before;
    return p;
}

HK_EXPORT void *hak_calloc(size_t nmemb, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(nmemb, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    if (n > HK_MID_MAX) return hk_large_block(n, HK_PAGE_SIZE, 1); /* clears what may be dirty */
    /* A block carved from a fresh slab within this call holds zeros but for its first two
     * words (the carve's link, malloc's cleared mark): clearing those leaves its pages
     * untouched until the program writes them, as glibc and jemalloc leave fresh memory.
     * Blocks of a page or less are cleared in full (their pages are touched either way). */
    int fresh = 0;
    void *p = n > HK_PAGE_SIZE ? hk_malloc_carved(n, &fresh) : hak_malloc(n);
    if (p) memset(p, 0, fresh ? 2 * sizeof(void *) : n);
    return p;
}

/* What a realloc that moves a block holding `have` bytes of data to n bytes asks for. A block
 * grown to a mid size by less than a quarter (a buffer grown a little at a time: a file read 4
 * KiB at a time, a list grown by an eighth) gets a quarter more, up to the largest mid size,
 * for its next growths to find in place; it is the next class or two up, past which the
 * program's writes have not reached (address space, where the pages are untouched). A buffer
 * grown 4 KiB at a time from 4 KiB to 1 MiB moved 29 times and copied 9.9 MiB, every class a
 * move (mimalloc: 22 times). A program that grows its buffers by half or more (doubling) gets
 * what it asks for, and so does a large one: the large tier leaves room of its own
 * (large.c, hk_large_realloc), where a large block cut a quarter longer had its room filled
 * at its malloc (fill.h; lists grown by an eighth to 8 MB: 170 MiB peak RSS, 131 without). */
static size_t hk_realloc_room(size_t have, size_t n) {
#ifdef HK_HARDENED
    (void)have; /* its guards follow the request: room past it would be writable unseen */
    return n;
#else
    if (n <= HK_SMALL_MAX || n > HK_MID_MAX || n <= have || n - have >= have / 4) return n;
    size_t m = n + n / 4;
    return m > HK_MID_MAX ? HK_MID_MAX : m;
#endif
}

/* realloc by moving: a new block, the common bytes copied, the old block freed. */
static void *hk_realloc_move(void *p, size_t have, size_t n) {
    int fresh = 0;
    size_t k = n < have ? n : have, m = hk_realloc_room(have, n);
    void *q = k > HK_PAGE_SIZE ? hk_malloc_carved(m, &fresh) : hak_malloc(m);
    if (!q) return NULL;
#ifndef HK_HARDENED
    /* A mid block notes what was asked for: the next move copies that, not the room. */
    if (m != n && hk_is_superslab((uintptr_t)q)) hk_mid_note((uintptr_t)q, n);
#endif
    /* A block carved from a fresh slab within this call: its pages past the first hold
     * nothing, and the copy would fault them in one by one (see carve.h, hk_heap_carve). */
    if (fresh) hk_os_populate(q, k);
    memcpy(q, p, k);
    hk_free_inline(p);
    return q;
}

#ifndef HK_HARDENED
/* Whether a realloc to n bytes keeps a small or mid block of `have` bytes, `used` of them the
 * program's data (the block's size, or a mid block's request), where it is: n fits, and fills
 * at least half the data and 40% of the block, or the block is 128 bytes or less. */
static inline int hk_keeps_place(size_t have, size_t used, size_t n) {
    return n <= have && (have <= 128 || (n >= used / 2 && n >= have / 5 * 2));
}
#endif

/* realloc of block p (not NULL) to n bytes. */
static HK_NOINLINE void *hk_realloc_block(void *p, size_t n) {
    if (n == 0) { /* glibc: frees and returns NULL */
        hk_free_inline(p);
        return NULL;
    }
#ifndef HK_HARDENED
    /* A block of one of the thread's own small slabs, found as free's fast path finds it (a
     * carved block start by its slab's entry, not marked free): its class is the one whose
     * cache the entry leads to (hk_owned_class). The validation below is for the rest. A
     * realloc of a 16-byte block to 32 took 174 instructions through it and takes 93 here (a
     * malloc, a copy and a free among them), and lua5.4 makes 7.3 M of those building binary
     * trees (bench/programs/lua_trees.lua: a table's array part grown from one value to two):
     * 1.07 times as fast. The same rule as below keeps a block in place. */
    const struct hk_owned *e = hk_free_entry((uintptr_t)p);
    if (HK_LIKELY(hk_owned_block(e, p, hk_free_mark()))) {
        uintptr_t c = hk_owned_class(hk_heap_here(), e);
        if (c >= HK_NCLASS) c = hk_slot_of((uintptr_t)p)->cls; /* a slab with a side list */
        /* A mid span's blocks have entries too (owned.h, hk_owned_admits), and a mid block
         * moves as much as was asked for (below). */
        if (HK_LIKELY(c < HK_NSMALL)) {
            size_t bs = hk_class_size[c];
            if (hk_keeps_place(bs, bs, n)) return p;
            return hk_realloc_move(p, bs, n);
        }
    }
#endif
    size_t have;
    if (!hk_usable(p, "realloc", &have)) return NULL;
    if (n > HK_MAX_REQUEST) {
        errno = ENOMEM;
        return NULL;
    }
    if (hk_is_superslab((uintptr_t)p)) {
        /* Small and mid blocks stay where they are while the new size still fits and fills at
         * least half of the block: a buffer halved stays put, as with the peers. */
#ifdef HK_HARDENED
        size_t bsize = hk_slab_of((uintptr_t)p)->bsize, m = hk_guard_request(n);
        if (m && m <= bsize && (bsize <= 128 || m >= bsize / 2)) {
            hk_guard_arm(p, n, bsize);
            return p;
        }
#else
        /* A mid block's data is what was asked for (noted at allocation): halving that keeps
         * the block, as halving the block does for small ones, as long as the block stays at
         * least 40% used (a second halving moves it). */
        struct hk_slab *s = hk_slab_of((uintptr_t)p);
        int mid = s->bsize > HK_SMALL_MAX;
        size_t used = mid ? hk_mid_used(s, (uintptr_t)p) : have;
        if (hk_keeps_place(have, used, n)) {
            if (mid) hk_mid_note((uintptr_t)p, n); /* what a later move must copy */
            return p;
        }
        have = used;
#endif
        return hk_realloc_move(p, have, n);
    }
    if (n > HK_MID_MAX) {
        /* Large to large: in place, copied into resident free memory, or the pages move with
         * mremap; a new block of another tier is the last resort. */
        void *q = hk_large_grow(p, n);
        if (q) return q;
    } else if (n > HK_SMALL_MAX) {
        /* A large block at a mid size (a mid malloc's, borrowed from the large tier's free
         * memory, or a big buffer cut down) stays large where the tier can resize it without
         * mapping: its tail freed, or grown into the free memory after it. A borrowed block is
         * cut to its pages, and moved to a new mid block (borrowed in turn) at every growth, a
         * buffer grown 4 KiB at a time from 320 KiB to 1 MiB moved at each step. */
        void *q = hk_large_realloc(p, n, HK_LARGE_NO_MAP);
        if (q) return q;
    }
    return hk_realloc_move(p, have, n);
}

/* A null p is malloc, without the frame the rest needs: with it in the same function, gcc
 * saved four registers before the test, 16 instructions a realloc(NULL, n), and lua5.4 asks
 * for every new object so (tests/lua/garbage.lua: 13 M of them, 0.2 G instructions). */
HK_EXPORT void *hak_realloc(void *p, size_t n) {
    if (p == NULL) return hak_malloc(n);
    return hk_realloc_block(p, n);
}

HK_EXPORT void *hak_reallocarray(void *p, size_t nmemb, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(nmemb, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return hak_realloc(p, n);
}

/* A block of n bytes aligned to align (a power of two). Up to a slot's alignment, the first
 * class whose size is a multiple of align: slabs and spans start on 64 KiB boundaries, so all
 * its blocks are aligned. Beyond that, the large tier carves a page-granular block at that
 * alignment: memalign(2 MiB, 100) gets one page, not 2 MiB. */
static void *hk_alloc_aligned(size_t align, size_t n) {
    if (align <= 16) return hak_malloc(n);
    if (n > HK_MAX_REQUEST) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = n;
#ifdef HK_HARDENED
    if ((need = hk_guard_request(n)) == 0) need = HK_MAX_REQUEST; /* goes to the large tier */
#endif
    if (need < align) need = align;
    if (align <= HK_SLAB_SIZE && need <= HK_MID_MAX) {
        for (unsigned c = hk_class_of(need); c < HK_NCLASS; c++) {
            if ((hk_class_size[c] & (align - 1)) == 0) {
#ifdef HK_HARDENED
                return hk_handed_out(hk_guarded_alloc(c, n, 0), c, n);
#else
                return hk_handed_out(hk_heap_alloc(c), c, n);
#endif
            }
        }
    }
    return hk_large_block(n, align, 0);
}

HK_EXPORT int hak_posix_memalign(void **out, size_t align, size_t n) {
    if (align < sizeof(void *) || !hk_is_pow2(align)) return EINVAL;
    int saved = errno;
    void *p = hk_alloc_aligned(align, n);
    if (!p) {
        errno = saved; /* POSIX: the error is returned, errno is left alone */
        return ENOMEM;
    }
    *out = p;
    return 0;
}

HK_EXPORT void *hak_aligned_alloc(size_t align, size_t n) {
    if (!hk_is_pow2(align)) {
        errno = EINVAL;
        return NULL;
    }
    return hk_alloc_aligned(align, n);
}

HK_EXPORT void *hak_memalign(size_t align, size_t n) {
    /* glibc: an alignment that is not a power of two is rounded up to one; above the largest
     * power of two there is none (EINVAL), and one that cannot be met is ENOMEM. */
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (!hk_is_pow2(align)) {
        size_t a = 1;
        while (a < align) a <<= 1;
        align = a;
    }
    return hk_alloc_aligned(align, n);
}

HK_EXPORT void *hak_valloc(size_t n) { return hk_alloc_aligned(HK_PAGE_SIZE, n); }

HK_EXPORT void *hak_pvalloc(size_t n) {
    size_t r = hk_align_up(n ? n : 1, HK_PAGE_SIZE);
    if (r < n) {
        errno = ENOMEM;
        return NULL;
    }
    return hk_alloc_aligned(HK_PAGE_SIZE, r);
}

HK_EXPORT int hak_trim(void) {
    uint64_t now = hk_now_ms();
    hk_heap_trim();
    size_t released = hk_pool_decay(now, 1);
    released += hk_large_decay(now, 1);
    return released != 0;
}

#ifndef HK_NO_OVERRIDE
/* The standard names. */
#define HK_ALIAS(name) __attribute__((alias(name), visibility("default")))
void *malloc(size_t) HK_ALIAS("hak_malloc");
void free(void *) HK_ALIAS("hak_free");
void *calloc(size_t, size_t) HK_ALIAS("hak_calloc");
void *realloc(void *, size_t) HK_ALIAS("hak_realloc");
void *reallocarray(void *, size_t, size_t) HK_ALIAS("hak_reallocarray");
int posix_memalign(void **, size_t, size_t) HK_ALIAS("hak_posix_memalign");
void *aligned_alloc(size_t, size_t) HK_ALIAS("hak_aligned_alloc");
void *memalign(size_t, size_t) HK_ALIAS("hak_memalign");
void *valloc(size_t) HK_ALIAS("hak_valloc");
void *pvalloc(size_t) HK_ALIAS("hak_pvalloc");
size_t malloc_usable_size(void *) HK_ALIAS("hak_usable_size");
void free_sized(void *, size_t) HK_ALIAS("hak_free_sized");
void free_aligned_sized(void *, size_t, size_t) HK_ALIAS("hak_free_aligned_sized");
void cfree(void *) HK_ALIAS("hak_free");

HK_EXPORT int malloc_trim(size_t pad) {
    (void)pad;
    return hak_trim();
}

/* Accepted and ignored: hakmem's tuning is HAKMEM_* variables. glibc returns 1 on success. */
HK_EXPORT int mallopt(int param, int value) {
    (void)param;
    (void)value;
    return 1;
}

HK_EXPORT struct mallinfo2 mallinfo2(void) {
    struct hak_stats s;
    struct mallinfo2 mi;
    memset(&mi, 0, sizeof mi);
    hak_stats_get(&s);
    mi.arena = s.superslabs_now * (2u << 20);
    mi.hblks = s.large_now;
    mi.hblkhd = s.large_bytes_now;
    mi.uordblks = s.slabs_active_now * (64u << 10) + s.large_bytes_now;
    mi.fordblks = mi.arena > mi.uordblks ? mi.arena - mi.uordblks : 0;
    return mi;
}

HK_EXPORT struct mallinfo mallinfo(void) {
    struct mallinfo2 m2 = mallinfo2();
    struct mallinfo mi;
    memset(&mi, 0, sizeof mi);
    mi.arena = (int)m2.arena;
    mi.hblks = (int)m2.hblks;
    mi.hblkhd = (int)m2.hblkhd;
    mi.uordblks = (int)m2.uordblks;
    mi.fordblks = (int)m2.fordblks;
    return mi;
}

HK_EXPORT void malloc_stats(void) { hak_stats_print(); }
#endif
