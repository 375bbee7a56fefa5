/* Side lists: a free list of its own for each of a thread's slabs of a class it frees without
 * allocating (a structure torn down, a collector's sweep; heap.c, "Side lists"), which free's
 * fast path pushes onto through the slab's owned-slab entry, as it pushes onto a class's
 * cache: the entry's head leads to the slab's side list, and one array after it to the blocks
 * the slab has left live, which the push counts down. So a block freed there goes onto its
 * slab at once, not into the cache and then home in a walk, and the slab empties at the free
 * of its last block. This module keeps the lists' storage: a mapping per heap record, taken
 * at the record's first use of it and kept with the record, of HK_SIDE_SLOTS slots; which
 * slab each serves, and the whole protocol, is heap.c's. Only the owner changes the slots,
 * on its slow paths (free's fast path pushes and counts down; a helper, heap.c "Idle owners",
 * gives back the slot of a slab it empties, whose side list is empty). Not in the hardened
 * build, whose entries lead to the slabs' own lists already. */
#ifndef HK_SIDE_H
#define HK_SIDE_H

#include <stdint.h>

#include "common.h"
#include "size_class.h"

struct hk_slab;

#define HK_SIDE_GROUPS 16
#define HK_SIDE_SLOTS (HK_SIDE_GROUPS * 64)

/* 64 slots: the side lists, and one array after them (as a heap's rooms lie after its caches,
 * heap.h) the frees each slab's list may take before its slab is empty. Entry HK_NCLASS of
 * each array serves no slot. */
struct hk_side_group {
    void *head[HK_NCLASS + 1];
    intptr_t left[HK_NCLASS + 1];
};
_Static_assert(HK_NCLASS == 64, "a group's slots are those of one 64-bit word");

struct hk_side {
    struct hk_side_group g[HK_SIDE_GROUPS];
    struct hk_slab *slab[HK_SIDE_SLOTS]; /* the slab each slot in use serves */
    uint32_t armed[HK_SIDE_SLOTS];       /* its left when the slot was taken */
    uint8_t cls[HK_SIDE_SLOTS];          /* its class */
    uint64_t taken[HK_SIDE_GROUPS];      /* a bit per slot in use */
};

/* Slot i's side list, and the frees it may take. */
static inline void **hk_side_head(struct hk_side *d, unsigned i) {
    return &d->g[i >> 6].head[i & 63];
}
static inline intptr_t *hk_side_left(struct hk_side *d, unsigned i) {
    return &d->g[i >> 6].left[i & 63];
}
/* The slot whose side list head is, or -1 if head is none of d's (d may be NULL). */
static inline int hk_side_slot(const struct hk_side *d, void *const *head) {
    uintptr_t off = (uintptr_t)head - (uintptr_t)d;
    if (!d || off >= sizeof d->g) return -1;
    unsigned g = (unsigned)(off / sizeof(struct hk_side_group));
    unsigned j = (unsigned)(off % sizeof(struct hk_side_group) / sizeof(void *));
    return j < 64 ? (int)(g * 64 + j) : -1;
}
/* Whether slot i is in use. */
static inline int hk_side_in_use(const struct hk_side *d, unsigned i) {
    return (int)(d->taken[i >> 6] >> (i & 63) & 1);
}

/* Maps the storage of a heap's side lists (no slot in use), or NULL if the OS refuses. */
struct hk_side *hk_side_map(void) HK_INTERNAL;
/* Takes a free slot of d, or -1 if all are in use. */
int hk_side_take(struct hk_side *d) HK_INTERNAL;
/* Gives slot i back. */
static inline void hk_side_give(struct hk_side *d, unsigned i) {
    d->taken[i >> 6] &= ~((uint64_t)1 << (i & 63));
}

#endif
