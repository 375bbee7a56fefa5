#include "pagemap.h"

#include "os.h"

/* 1 MiB of .bss; a root entry's page is touched only where a leaf exists. */
_Atomic(uint8_t *) hk_pm_root[HK_PM_ROOT];

/* The leaf of root entry r, mapped if need be; NULL if it cannot be. */
static uint8_t *hk_pm_leaf(size_t r) {
    if (r >= HK_PM_ROOT) return NULL;
    uint8_t *leaf = atomic_load_explicit(&hk_pm_root[r], memory_order_acquire);
    if (leaf) return leaf;
    /* Two threads may map a leaf for one GiB at once: the first to publish wins. */
    uint8_t *fresh = hk_os_map(HK_PM_LEAF);
    if (!fresh) return NULL;
    if (atomic_compare_exchange_strong_explicit(&hk_pm_root[r], &leaf, fresh,
                                                memory_order_acq_rel, memory_order_acquire))
        return fresh;
    hk_os_unmap(fresh, HK_PM_LEAF);
    return leaf;
}

int hk_pagemap_cover(uintptr_t a, size_t len) {
    if (len == 0) return 1;
    for (size_t r = a >> HK_PM_LEAF_SHIFT; r <= (a + len - 1) >> HK_PM_LEAF_SHIFT; r++)
        if (!hk_pm_leaf(r)) return 0;
    return 1;
}

int hk_pagemap_set(uintptr_t a, unsigned v) {
    uint8_t *leaf = hk_pm_leaf(a >> HK_PM_LEAF_SHIFT);
    if (!leaf) return 0;
    __atomic_store_n(&leaf[(a >> 12) & (HK_PM_LEAF - 1)], (uint8_t)v, __ATOMIC_RELAXED);
    return 1;
}
