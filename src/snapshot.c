#include "snapshot.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../include/hakmem.h"
#include "config.h"
#include "init.h"
#include "large.h"
#include "policy.h"
#include "pool.h"
#include "stats.h"
#include "text.h"

HK_EXPORT void hak_stats_get(struct hak_stats *out) {
    hk_init(); /* the policy reported is the configured one, even before any allocation */
    memset(out, 0, sizeof *out);
#define HK_LOAD(f) out->f = atomic_load_explicit(&hk_ctr.f, memory_order_relaxed)
    HK_LOAD(os_mmap);
    HK_LOAD(os_munmap);
    HK_LOAD(os_madvise);
    HK_LOAD(os_mremap);
    HK_LOAD(acquire_stage1);
    HK_LOAD(acquire_stage2);
    HK_LOAD(acquire_stage3_cache);
    HK_LOAD(acquire_stage3_mmap);
    HK_LOAD(slab_release);
    HK_LOAD(slab_adopt);
    HK_LOAD(slab_abandon);
    HK_LOAD(remote_free);
#undef HK_LOAD
    out->superslabs_unmapped = atomic_load_explicit(&hk_ctr.ss_unmapped, memory_order_relaxed);
    hk_pool_stats(out);
    hk_large_stats(out);
    struct hk_pool_demand d;
    hk_pool_demand(&d);
    out->purge_delay_ms = hk_pol_purge_delay();
    out->unmap_delay_ms = hk_pol_unmap_delay();
    out->pool_budget = atomic_load_explicit(&hk_pol.pool_budget, memory_order_relaxed);
    out->large_budget = atomic_load_explicit(&hk_pol.large_budget, memory_order_relaxed);
    out->ss_cache_max = atomic_load_explicit(&hk_pol.ss_cache, memory_order_relaxed);
    out->nclass = HK_NCLASS;
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        out->class_size[c] = hk_class_size[c];
        out->soft_cap[c] = hk_pol_soft_cap(c);
        out->class_slabs_acquired[c] = d.acquire[c];
    }
}

void hk_stats_dump(void) {
    struct hak_stats s;
    hak_stats_get(&s);
    char buf[4096];
    /* snprintf with integer conversions does not allocate in glibc. The pid tells apart the
     * reports of a program and the programs it starts (they all inherit HAKMEM_STATS). */
    int n = snprintf(
        buf, sizeof buf,
        "hakmem stats (pid %ld):\n"
        "  os: mmap %zu, munmap %zu, madvise %zu, mremap %zu\n"
        "  mapped now %zu bytes: %zu SuperSlabs (%zu cached), %zu active slots, "
        "%zu large blocks (%zu bytes)\n"
        "  slab acquire: stage1 %zu, stage2 %zu, stage3 cache %zu, stage3 mmap %zu\n"
        "  slab release %zu, abandon %zu, adopt %zu; remote frees %zu\n"
        "  free memory kept: pool %zu bytes EMPTY, large %zu bytes resident + %zu released; "
        "given back: pool %zu bytes, large %zu bytes, %zu SuperSlabs unmapped\n"
        "  large: %zu hits, %zu misses; realloc %zu in place, %zu by mremap\n"
        "  policy: purge delay %zu ms, unmap delay %zu ms, budgets pool %zu / large %zu bytes, "
        "SuperSlab cache %zu\n"
        "  soft caps (class size:cap, classes used):",
        (long)getpid(), s.os_mmap, s.os_munmap, s.os_madvise, s.os_mremap, s.mapped_bytes_now,
        s.superslabs_now, s.superslabs_cached_now, s.slabs_active_now, s.large_now,
        s.large_bytes_now, s.acquire_stage1, s.acquire_stage2, s.acquire_stage3_cache,
        s.acquire_stage3_mmap, s.slab_release, s.slab_abandon, s.slab_adopt, s.remote_free,
        s.pool_empty_bytes_now, s.large_free_dirty_now, s.large_free_clean_now,
        s.pool_purged_bytes, s.large_purged_bytes, s.superslabs_unmapped, s.large_cache_hits,
        s.large_cache_misses, s.large_realloc_in_place, s.large_realloc_mremap,
        s.purge_delay_ms, s.unmap_delay_ms, s.pool_budget, s.large_budget, s.ss_cache_max);
    for (size_t c = 0; c < s.nclass && n > 0 && (size_t)n < sizeof buf - 32; c++)
        if (s.class_slabs_acquired[c])
            n += snprintf(buf + n, sizeof buf - (size_t)n, " %zu:%zu", s.class_size[c],
                          s.soft_cap[c]);
    if (n > 0 && (size_t)n < sizeof buf - 2) strcpy(buf + n, "\n");
    hk_write_err(buf);
}

HK_EXPORT void hak_stats_print(void) { hk_stats_dump(); }

/* Runs at exit when the library is loaded; prints the counters if HAKMEM_STATS=1. */
__attribute__((destructor)) static void hk_stats_at_exit(void) {
    if (hk_cfg.stats) hk_stats_dump();
}
