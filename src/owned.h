/* The owned-slab table of a thread heap (heap.h, struct hk_owned): entry (p >> 16) % n is
 * where free's fast path looks for the slab of p, one of the thread's own small slabs. This
 * module keeps the table: it gives a slab its entry when the thread takes it (current,
 * partial or full), takes it away when the slab leaves, counts the frees that found another
 * slab in their entry, and grows the table (mapped apart from the record, a spare kept with
 * it) when the thread owns more slabs than the table holds. Only the owner changes its table,
 * on its slow paths; a helper (heap.c, "Idle owners") may clear an entry while the owner's
 * free reads it, which one store of lim makes safe. */
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

/* Gives small slab s the entry of its index (a slab there loses it: its frees take the slow
 * path), set for s being current or not. */
void hk_owned_set(struct hk_heap *h, struct hk_slab *s) HK_INTERNAL;
/* Takes slab s out of the table, if it holds its entry. */
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

/* Whether slab s holds its entry in the calling thread's table; for tests. */
int hk_heap_has_entry(const struct hk_slab *s) HK_INTERNAL;
/* Entries of the calling thread's owned-slab table; for tests. */
size_t hk_heap_table_size(void) HK_INTERNAL;

#endif
