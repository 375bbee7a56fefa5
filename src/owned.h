/* The owned-slab table of a thread heap (heap.h, struct hk_owned): entry (p >> 16) % n is
 * where free's fast path looks for the slab of p, one of the thread's own small slabs or the
 * current span of a mid class it reuses (hk_owned_admits; an entry for each of the span's
 * slots). This module keeps the table: it gives a slab its entries when the thread takes it
 * (current, partial or full), takes them away when the slab leaves, counts the frees that
 * found another slab in their entry, and grows the table (mapped apart from the record, a
 * spare kept with it) when the thread owns more slabs than the table holds. Only the owner
 * changes its table, on its slow paths; a helper (heap.c, "Idle owners") may clear an entry
 * while the owner's free reads it, which one store of lim makes safe. */
#ifndef HK_OWNED_H
#define HK_OWNED_H

#include "heap.h"

/* The owned-slab table entry of slab s, and the slab that holds it (NULL: none). */
static inline struct hk_owned *hk_owned_entry(struct hk_heap *h, const struct hk_slab *s) {
    return hk_owned_at(h, (uintptr_t)hk_slab_base(s));
}
static inline struct hk_slab **hk_owned_holder(struct hk_heap *h, const struct hk_owned *e) {
    return &h->oslab[e - h->otab];
}
/* The entry of slot k of slab s (0: its first, hk_owned_entry's). */
static inline struct hk_owned *hk_owned_slot(struct hk_heap *h, const struct hk_slab *s,
                                             unsigned k) {
    return hk_owned_at(h, (uintptr_t)hk_slab_base(s) + ((uintptr_t)k << HK_SLAB_SHIFT));
}
/* Whether slab s may hold entries: a small slab, or a span given them (hk_owned_set_span;
 * most spans have none). */
static inline int hk_owned_may_hold(const struct hk_slab *s) {
    return s->nslots == 1 || s->entered;
}

/* Whether slab s of heap h may have entries: every small slab the thread owns; a mid span only
 * while it is the thread's current span of its class and the thread has shown that it
 * allocates the class again after freeing it (heap.c, hk_mid_keep), and only of a class
 * whose multiply is exact wherever a pointer may lie (size_class.h, hk_mul_exact: 8 classes
 * of 40 to 224 KiB): free's fast path then keeps the thread's own mid blocks in its cache, as
 * the room allows (room.h). Not in the hardened build, whose caches hold a mid class's one
 * block. */
static inline int hk_owned_admits(const struct hk_heap *h, const struct hk_slab *s) {
    unsigned c = s->cls;
    if (c < HK_NSMALL) return 1;
#ifdef HK_HARDENED
    (void)h;
    return 0;
#else
    return c < HK_NCLASS && h->cur[c] == s && (h->mid_reuse >> c & 1) &&
           hk_mul_exact(hk_class_mul[c], hk_class_size[c]);
#endif
}

/* Gives small slab s its entry (a slab there loses it: its frees take the slow path), set for
 * s being current or not. */
void hk_owned_set(struct hk_heap *h, struct hk_slab *s) HK_INTERNAL;
/* Gives mid span s the entries of its slots, where it may have them (hk_owned_admits): at the
 * thread's first free to it that the slow path keeps (heap.c, hk_mid_keep), not when it
 * becomes current. A span whose blocks the thread frees while it is current pays for its
 * entries (5 to 8 slots' worth); one it never does would pay for nothing (mid_churn, random
 * blocks of 40 KiB to 1 MiB: 125 instructions a span, 4% of all, when it became current). */
void hk_owned_set_span(struct hk_heap *h, struct hk_slab *s) HK_INTERNAL;
/* Takes slab s out of the table, where it holds its entries. */
void hk_owned_clear(struct hk_heap *h, struct hk_slab *s) HK_INTERNAL;
/* Notes n frees to the thread's own slabs that found another slab in their entry, or n slabs
 * that took another's entry; the table may grow. */
void hk_owned_missed(struct hk_heap *h, uint32_t n) HK_INTERNAL;
/* Starts counting the table's misses afresh (at a tick, or a new table). */
void hk_owned_window(struct hk_heap *h) HK_INTERNAL;
/* Makes the table of n entries at t (zeroed) the heap's; the one before is kept as the
 * record's spare or unmapped. */
void hk_owned_switch(struct hk_heap *h, struct hk_owned *t, size_t n) HK_INTERNAL;
/* Sets free's view of the table (hk_tls.ftab, fmask) from the heap: the table, or, while the
 * thread frees by slab metadata, an entry that admits nothing. */
void hk_free_view(struct hk_heap *h) HK_INTERNAL;

/* Slab s carved more: the entries it holds admit its new blocks. */
static inline void hk_owned_carved(struct hk_heap *h, const struct hk_slab *s) {
    if (!hk_owned_may_hold(s)) return;
    for (unsigned k = 0; k < s->nslots; k++) {
        struct hk_owned *e = hk_owned_slot(h, s, k);
        if (*hk_owned_holder(h, e) == s) e->lim = s->lim * e->mul;
    }
}

/* Whether slab s holds its entry in the calling thread's table; for tests. */
int hk_heap_has_entry(const struct hk_slab *s) HK_INTERNAL;
/* Entries of the calling thread's owned-slab table; for tests. */
size_t hk_heap_table_size(void) HK_INTERNAL;

#endif
