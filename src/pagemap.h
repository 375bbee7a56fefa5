/* The page map: which large-tier arena a block starts at, found from the address alone and
 * without a lock. One byte per page of the 47-bit user address space, in leaves that cover
 * 1 GiB each (256 KiB of address space, of which only the pages holding written entries are
 * ever touched), mapped on first use and never unmapped.
 *
 * An entry is written when a block is made at that page and never cleared: a stale entry only
 * names the arena that last had a block there, which looks the address up in its own tables
 * and says it has none. So the map answers "which arena may know this page", and the arena
 * answers what it is. A live block's entry is always current: it was written before the
 * block was handed out, and a program that frees the block on another thread has passed it
 * there through some synchronisation of its own. A leaf of the OS and the counters. */
#ifndef HK_PAGEMAP_H
#define HK_PAGEMAP_H

#include <stdatomic.h>

#include "common.h"

#define HK_PM_LEAF_SHIFT 30 /* one leaf per GiB of address space */
#define HK_PM_ROOT ((size_t)1 << (47 - HK_PM_LEAF_SHIFT))
#define HK_PM_LEAF ((size_t)1 << (HK_PM_LEAF_SHIFT - 12)) /* entries (pages) per leaf */

extern _Atomic(uint8_t *) hk_pm_root[HK_PM_ROOT] HK_INTERNAL;

/* The entry of the page at a (page-aligned): 0 where no block was ever made. */
static inline unsigned hk_pagemap_get(uintptr_t a) {
    size_t r = a >> HK_PM_LEAF_SHIFT;
    if (r >= HK_PM_ROOT) return 0;
    uint8_t *leaf = atomic_load_explicit(&hk_pm_root[r], memory_order_acquire);
    if (!leaf) return 0;
    return __atomic_load_n(&leaf[(a >> 12) & (HK_PM_LEAF - 1)], __ATOMIC_RELAXED);
}

/* Maps the leaves for [a, a+len) that are not mapped yet, so that blocks made there later need
 * no system call for their entries (a new mapping of the large tier); 0 if one could not be. */
int hk_pagemap_cover(uintptr_t a, size_t len) HK_INTERNAL;

/* Sets the entry of the page at a to v (nonzero); 0 if its leaf could not be mapped or a lies
 * beyond the map. */
int hk_pagemap_set(uintptr_t a, unsigned v) HK_INTERNAL;

#endif
