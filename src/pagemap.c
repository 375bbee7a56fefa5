#include "pagemap.h"

#include "os.h"

/* 1 MiB of .bss; a root entry's page is touched only where a leaf exists. */
_Atomic(uint8_t *) hk_pm_root[HK_PM_ROOT];

int hk_pagemap_set(uintptr_t a, unsigned v) {
    size_t r = a >> HK_PM_LEAF_SHIFT;
    if (r >= HK_PM_ROOT) return 0;
    uint8_t *leaf = atomic_load_explicit(&hk_pm_root[r], memory_order_acquire);
    if (!leaf) {
        /* Two threads may map a leaf for one GiB at once: the first to publish wins. */
        uint8_t *fresh = hk_os_map(HK_PM_LEAF);
        if (!fresh) return 0;
        if (atomic_compare_exchange_strong_explicit(&hk_pm_root[r], &leaf, fresh,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire)) {
            leaf = fresh;
        } else {
            hk_os_unmap(fresh, HK_PM_LEAF);
        }
    }
    __atomic_store_n(&leaf[(a >> 12) & (HK_PM_LEAF - 1)], (uint8_t)v, __ATOMIC_RELAXED);
    return 1;
}
