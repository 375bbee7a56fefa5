#include "policy.h"

#include "config.h"

/* Before start-up (hk_init) the limits are those of the default configuration, so a slow
 * path that runs first still sees sensible values. */
struct hk_policy hk_pol = {
    .purge_delay_ms = 1000,
    .unmap_delay_ms = 10000,
    .pool_budget = (size_t)32 << 20,
    .large_budget = (size_t)1024 << 20,
    .ss_cache = 16,
    .pool_share = 4,
    .large_cap = (size_t)1024 << 20,
};

void hk_policy_init(void) {
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        /* HAKMEM_SOFT_CAP counts 64 KiB slabs: a class with longer slabs keeps as many bytes
         * (the default keeps no span longer than 512 KiB: those go to the pool, which keeps
         * them for any class and thread within its budget). */
        hk_pol.cap_max[c] = hk_cfg.soft_cap / hk_class_slots[c];
        atomic_store_explicit(&hk_pol.soft_cap[c], hk_pol.cap_max[c], memory_order_relaxed);
    }
    atomic_store_explicit(&hk_pol.purge_delay_ms, hk_cfg.purge_delay_ms, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.unmap_delay_ms, hk_cfg.unmap_delay_ms, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.pool_budget, (size_t)hk_cfg.ss_cache * (2u << 20),
                          memory_order_relaxed);
    atomic_store_explicit(&hk_pol.large_budget, (size_t)hk_cfg.large_cache_mb << 20,
                          memory_order_relaxed);
    atomic_store_explicit(&hk_pol.ss_cache, hk_cfg.ss_cache, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.pool_share, 4, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.large_cap, (size_t)hk_cfg.large_cache_mb << 20,
                          memory_order_relaxed);
}
