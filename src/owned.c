#include "owned.h"

#include <string.h>

#include "os.h"
#include "room.h"
#include "side.h"
#include "stats.h"
#include "trace.h"

const struct hk_owned hk_owned_none = {.lim = 0};

/* A mapped table of n entries (a power of two, at least 256): the entries, then their slabs,
 * then a bit per entry that is set once the entry has been written. A spare table (see
 * hk_owned_grow) is cleared by those bits, not whole: a thread that takes over a record and
 * grows its table as the thread before it did has a few dozen entries to clear, where a
 * memset of the spare's 1,024 entries wrote 41 KiB, 36,000 instructions (mixed_churn with 16
 * threads of 2,000 steps each: 3% of all, the bits' upkeep counted). */
static inline size_t hk_owned_bytes(size_t n) {
    return n * (sizeof(struct hk_owned) + sizeof(struct hk_slab *)) + n / 8;
}
static inline uint64_t *hk_owned_written(struct hk_owned *t, size_t n) {
    return (uint64_t *)((struct hk_slab **)(t + n) + n);
}
/* Notes that entry i of the heap's mapped table was written (its bits follow its slabs). */
static inline void hk_owned_wrote(struct hk_heap *h, size_t i) {
    uint64_t *w = (uint64_t *)(h->oslab + (h->omask >> 5) + 1);
    w[i >> 6] |= (uint64_t)1 << (i & 63);
}

/* Makes every entry of mapped table t of n entries that was written empty again. */
static void hk_owned_clean(struct hk_owned *t, size_t n) {
    uint64_t *w = hk_owned_written(t, n);
    struct hk_slab **holder = (struct hk_slab **)(t + n);
    for (size_t k = 0; k < n / 64; k++) {
        for (uint64_t m = w[k]; m; m &= m - 1) {
            size_t i = k * 64 + (size_t)__builtin_ctzll(m);
            memset(&t[i], 0, sizeof t[i]);
            holder[i] = NULL;
        }
        w[k] = 0;
    }
}

/* Gives slab s the entries of its slots (a small slab's one; a mid span's, one for each of
 * its slots, all alike: free finds the entry by the slot a block starts in), set for s
 * being current or not, and returns how many other slabs held them before. */
static uint32_t hk_owned_put(struct hk_heap *h, struct hk_slab *s) {
    uintptr_t base = (uintptr_t)hk_slab_base(s);
    uint64_t mul = hk_class_mul[s->cls];
    uint32_t lost = 0;
#ifndef HK_HARDENED
    /* A slab with a side list keeps it (heap.c, "Side lists"), through a growth of the table
     * or a move off the full list. */
    void **head = s->side ? hk_side_head(h->side, s->side - 1u) : &h->free[s->cls];
#else
    void **head = h->cur[s->cls] == s ? &h->free[s->cls] : &s->free;
#endif
    s->entered = 1;
    for (unsigned k = 0; k < s->nslots; k++) {
        struct hk_owned *e = hk_owned_slot(h, s, k);
        struct hk_slab **holder = hk_owned_holder(h, e);
        if (*holder != NULL && *holder != s) lost++;
        if (h->otab != h->owned) hk_owned_wrote(h, (size_t)(holder - h->oslab));
        e->base = base;
        e->mul = mul;
        e->lim = s->lim * mul;
        e->head = head;
        *holder = s;
    }
    return lost;
}

static void hk_owned_grow(struct hk_heap *h);

/* Notes n frees to the thread's own slabs that found another slab in their entry, or n slabs
 * that took another's entry: where that happens a quarter of the table's size of times
 * within a tick, the thread owns more slabs than the table holds, and it grows. Slabs that
 * take each other's entries alone do not tell it: a thread whose current slabs stay put
 * (larson, 2 threads, some 50 slabs each) took few entries and sent a quarter of its frees
 * to the slow path with a first table of 64 entries. */
void hk_owned_missed(struct hk_heap *h, uint32_t n) {
    h->omiss += n;
    if (h->omiss < h->ogrow_at) return;
#ifndef HK_HARDENED
    /* Misses that are few beside the frees that hit do not pay for a larger table: a thread
     * that owns some 100 slabs has a few pairs of them share an entry in any table, and a
     * fast one misses a quarter of its table's size within a tick all the same. larson's
     * threads, each living a couple of milliseconds on 16 cores, grew to 4,096 entries, too
     * large to stay with their records, and so mapped and unmapped a table each (the
     * mappings' faults doubled its page faults, and an unmapping stops every core the process
     * runs on). Weighed again when the misses have doubled. */
    uint64_t frees = hk_small_frees(h, hk_rooms_used(h));
    frees = frees > h->ofrees ? frees - h->ofrees : 0;
    if ((uint64_t)h->omiss * HK_OWNED_MISS_SHARE < frees) {
        h->ogrow_at = h->omiss * 2;
        return;
    }
#endif
    hk_owned_grow(h);
}

/* Starts counting the table's misses afresh (at a tick, or a new table): it grows once a
 * quarter of its size missed it, if that is 1 in HK_OWNED_MISS_SHARE of the small frees
 * since. */
void hk_owned_window(struct hk_heap *h) {
    h->omiss = 0;
    h->ogrow_at = (uint32_t)((h->omask >> 5) + 1) / 4;
#ifndef HK_HARDENED
    h->ofrees = hk_small_frees(h, hk_rooms_used(h));
#endif
}

/* Gives slab s its entries (a slab there loses its own: its frees take the slow path), set
 * for s being current or not; that a slab lost its entry counts as a miss
 * (hk_owned_missed). */
static void hk_owned_enter(struct hk_heap *h, struct hk_slab *s) {
    /* The first table (owned[], beyond the record's first page) is the heap's from its first
     * slab on, not from its set-up: a thread that owns no slab never reads it (record.h).
     * Only the owner switches tables; a helper (heap.c, "Idle owners") moves slabs
     * of an owner that has had them, and so its table, already. */
    if (HK_UNLIKELY(h->otab == &hk_owned_none)) {
        if (h != hk_tls.heap) return;
        hk_owned_switch(h, h->owned, HK_OWNED);
    }
#ifndef HK_HARDENED
    /* Free's fast path tests the room for 0 only, so an entry needs a room of 1 or more: a
     * class the thread has not refilled yet, whose slabs it took over, has none. */
    if (h->room[s->cls] <= 0) hk_room_set(h, s->cls, hk_room_full(h, s->cls));
#endif
    uint32_t lost = hk_owned_put(h, s);
    if (lost) hk_owned_missed(h, lost);
}

/* While counting, the table stays empty: every free is counted on the slow path. */
void hk_owned_set(struct hk_heap *h, struct hk_slab *s) {
    if (s->cls >= HK_NSMALL || hk_counting) return;
    hk_owned_enter(h, s);
}

void hk_owned_set_span(struct hk_heap *h, struct hk_slab *s) {
    if (hk_counting || !hk_owned_admits(h, s)) return;
    /* Its class's cache may hold blocks kept (heap.c, hk_mid_keep), which counts as the
     * class's use at a tick. */
    h->mid_kept |= (uint64_t)1 << s->cls;
    hk_owned_enter(h, s);
}

/* Takes slab s out of the table. A helper may do this while the owner's free reads the entry
 * (heap.c, "Idle owners"): the one store of lim makes it admit nothing, and the rest of it may
 * stay as it was. */
void hk_owned_clear(struct hk_heap *h, struct hk_slab *s) {
    if (!hk_owned_may_hold(s)) return;
    for (unsigned k = 0; k < s->nslots; k++) {
        struct hk_owned *e = hk_owned_slot(h, s, k);
        struct hk_slab **holder = hk_owned_holder(h, e);
        if (*holder == s) {
            __atomic_store_n(&e->lim, 0, __ATOMIC_RELAXED);
            *holder = NULL;
        }
    }
    s->entered = 0;
}

/* Free's view of the owned-slab table: the table, or, while the thread frees by slab metadata
 * (heap.h, "Two ways to free"), an entry that admits nothing. */
void hk_free_view(struct hk_heap *h) {
    HK_ASSERT(h == hk_tls.heap);
    hk_tls.ftab = h->free_any ? (struct hk_owned *)&hk_owned_none : h->otab;
    hk_tls.fmask = h->free_any ? 0 : h->omask;
}

/* Makes the table of n entries at t (zeroed: every entry empty) the heap's. The one before,
 * if it was mapped, becomes the record's spare (see hk_owned_grow) if it is the larger and
 * at most HK_OWNED_SPARE entries, else it is unmapped. Only the owner changes its table, on
 * its slow paths (marked busy: no helper is at work, and free's fast path runs on this
 * thread), so nothing reads the old one after this. */
void hk_owned_switch(struct hk_heap *h, struct hk_owned *t, size_t n) {
    struct hk_owned *old = h->otab;
    size_t oldn = (h->omask >> 5) + 1;
    if (t == h->owned) hk_heap_rest_written(h);
    h->otab = t;
    h->oslab = t == h->owned ? h->owned_slab : (struct hk_slab **)(t + n);
    h->omask = (uintptr_t)(n - 1) << 5;
    hk_owned_window(h);
    hk_free_view(h);
    if (old == h->owned || old == &hk_owned_none) return;
    if (oldn <= HK_OWNED_SPARE && oldn > h->ospare_n) {
        struct hk_owned *drop = h->ospare;
        size_t dropn = h->ospare_n;
        h->ospare = old;
        h->ospare_n = oldn;
        old = drop;
        oldn = dropn;
    }
    if (old) hk_os_unmap(old, hk_owned_bytes(oldn));
}

/* Moves the heap to a table 4 times larger, and gives every slab that may hold an entry its
 * entry there: the current slabs, the partial ones and (but in the hardened build) the full
 * ones. The table is the record's spare, its written entries cleared, if that is as large:
 * a thread's grown table stays with its record when the thread exits, for the next thread
 * that takes the record; larson's threads, which each take over the last one's slabs, grew
 * a table each, and a mapping's faults and unmapping took 4% of its time (7,000 to 13,000
 * faults against 1,100, 2 threads, 2 s). Else it is mapped; if the OS refuses the memory,
 * the table stays as it is. */
static void hk_owned_grow(struct hk_heap *h) {
    size_t n = ((h->omask >> 5) + 1) * 4;
    h->omiss = 0;
    if (n > HK_OWNED_MAX || h->otab == &hk_owned_none) return;
    struct hk_owned *t;
    if (h->ospare_n >= n) {
        t = h->ospare;
        n = h->ospare_n;
        h->ospare = NULL;
        h->ospare_n = 0;
        hk_owned_clean(t, n);
    } else if ((t = hk_os_map(hk_owned_bytes(n))) == NULL) {
        return;
    }
    hk_owned_switch(h, t, n);
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        /* A current span that had entries has them here too. */
        struct hk_slab *cur = h->cur[c];
        if (cur && (c < HK_NSMALL || (cur->entered && hk_owned_admits(h, cur))))
            hk_owned_put(h, cur);
        if (c >= HK_NSMALL) continue;
        for (struct hk_slab *s = h->partial[c]; s; s = s->next) hk_owned_put(h, s);
#ifndef HK_HARDENED
        for (struct hk_slab *s = h->full[c]; s; s = s->next) hk_owned_put(h, s);
#endif
    }
    if (HK_TRACING(HK_T_THREAD))
        hk_trace(HK_T_THREAD, "owned-slab table grown (the thread owns more slabs)", "entries", n,
                 "bytes", hk_owned_bytes(n), NULL, 0);
}

int hk_heap_has_entry(const struct hk_slab *s) {
    struct hk_heap *h = hk_tls.heap;
    struct hk_owned *e = hk_owned_entry(h, s);
    return *hk_owned_holder(h, e) == s && e->lim != 0;
}

size_t hk_heap_table_size(void) { return (hk_tls.heap->omask >> 5) + 1; }
