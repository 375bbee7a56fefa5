/* The policy: the limits that decide how much free memory hakmem keeps, and for how long.
 *
 * ACE (ace.h) writes them from measured demand, or leaves them at the fixed values derived
 * from the configuration when HAKMEM_ACE=0; the thread heaps, the pool and the large tier
 * read them on their slow paths (relaxed loads: a stale value only shifts one decision).
 * This is a leaf: it depends on the configuration alone. */
#ifndef HK_POLICY_H
#define HK_POLICY_H

#include <stdatomic.h>

#include "common.h"
#include "size_class.h"

/* The pool's share without cgroup pressure; the recent peak holds only there. */
#define HK_POOL_SHARE 4

struct hk_policy {
    /* Empty slabs of each class a thread keeps for itself (its soft cap): releasing one more
     * takes it to the pool. Never makes an allocation fail. */
    _Atomic unsigned soft_cap[HK_NCLASS];
    unsigned cap_max[HK_NCLASS];          /* the most ACE may set (HAKMEM_SOFT_CAP, by bytes) */
    _Atomic uint64_t purge_delay_ms;      /* idle time before free pages are released */
    _Atomic uint64_t unmap_delay_ms;      /* idle time before free mappings are unmapped */
    /* Free resident bytes kept regardless of age: the pool's EMPTY slabs and the large tier's
     * free extents beyond these are released at once, oldest first. */
    _Atomic size_t pool_budget, large_budget;
    /* With ACE, each tier also keeps what its demand calls for right now, which ACE cannot
     * see before its next window: the pool up to pool_share times its ACTIVE bytes and up to
     * the EMPTY bytes taken again since the window began, and up to pool_peak (or the peak
     * since the window began) less its ACTIVE bytes (and as many free SuperSlabs as that
     * makes); the large tier up to the peak of its live bytes since then, and up to
     * large_peak (or the peak of its footprint since then) less its live bytes, at most
     * large_cap. 0 without ACE. */
    _Atomic int demand;
    _Atomic unsigned pool_share;          /* HK_POOL_SHARE; less near a cgroup limit */
    _Atomic size_t pool_peak;             /* the most ACTIVE bytes in ACE's last 32 windows */
    _Atomic size_t large_peak;            /* the large tier's largest footprint in them: live
                                           * and dirty free bytes as a block was cut (0:
                                           * pressure) */
    _Atomic size_t large_cap;             /* HAKMEM_LARGE_CACHE_MB, or less under pressure */
    _Atomic unsigned ss_cache;            /* fully free SuperSlabs kept mapped */
};

extern struct hk_policy hk_pol HK_INTERNAL;

/* Sets the fixed policy from hk_cfg (start-up, and what HAKMEM_ACE=0 keeps). */
void hk_policy_init(void) HK_INTERNAL;

static inline unsigned hk_pol_soft_cap(unsigned c) {
    return atomic_load_explicit(&hk_pol.soft_cap[c], memory_order_relaxed);
}
static inline uint64_t hk_pol_purge_delay(void) {
    return atomic_load_explicit(&hk_pol.purge_delay_ms, memory_order_relaxed);
}
static inline uint64_t hk_pol_unmap_delay(void) {
    return atomic_load_explicit(&hk_pol.unmap_delay_ms, memory_order_relaxed);
}

#endif
