#include "stats.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../include/hakmem.h"
#include "large.h"
#include "pool.h"
#include "report.h"

struct hk_counters hk_ctr;

HK_EXPORT void hak_stats_get(struct hak_stats *out) {
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
    hk_pool_stats(out);
    hk_large_stats(out);
}

void hk_stats_dump(void) {
    struct hak_stats s;
    hak_stats_get(&s);
    char buf[1024];
    /* snprintf with integer conversions does not allocate in glibc. The pid tells apart the
     * reports of a program and the programs it starts (they all inherit HAKMEM_STATS). */
    snprintf(buf, sizeof buf,
             "hakmem stats (pid %ld):\n"
             "  os: mmap %zu, munmap %zu, madvise %zu, mremap %zu\n"
             "  mapped now %zu bytes: %zu SuperSlabs (%zu cached), %zu active slabs, "
             "%zu large blocks (%zu bytes)\n"
             "  slab acquire: stage1 %zu, stage2 %zu, stage3 cache %zu, stage3 mmap %zu\n"
             "  slab release %zu, abandon %zu, adopt %zu; remote frees %zu\n",
             (long)getpid(), s.os_mmap, s.os_munmap, s.os_madvise, s.os_mremap,
             s.mapped_bytes_now, s.superslabs_now,
             s.superslabs_cached_now, s.slabs_active_now, s.large_now, s.large_bytes_now,
             s.acquire_stage1, s.acquire_stage2, s.acquire_stage3_cache, s.acquire_stage3_mmap,
             s.slab_release, s.slab_abandon, s.slab_adopt, s.remote_free);
    hk_write_err(buf);
}

HK_EXPORT void hak_stats_print(void) { hk_stats_dump(); }
