/* Counters for slow-path events (system calls, pool stages, ownership hand-overs). They are
 * bumped with relaxed atomics, never on a malloc/free fast path. This is a leaf: modules
 * write into it; snapshot.c gathers it with every module's own figures. */
#ifndef HK_STATS_H
#define HK_STATS_H

#include <stdatomic.h>

#include "common.h"

struct hk_counters {
    _Atomic size_t os_mmap, os_munmap, os_madvise, os_mremap;
    _Atomic size_t acquire_stage1, acquire_stage2, acquire_stage3_cache, acquire_stage3_mmap;
    _Atomic size_t slab_release, slab_adopt, slab_abandon, remote_free;
    _Atomic size_t ss_unmapped;
};

extern struct hk_counters hk_ctr HK_INTERNAL;

#define HK_STAT_INC(f) atomic_fetch_add_explicit(&hk_ctr.f, 1, memory_order_relaxed)

#endif
