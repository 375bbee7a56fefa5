/* Counters for slow-path events (system calls, pool stages, ownership hand-overs). They are
 * bumped with relaxed atomics, never on a malloc/free fast path. This is a leaf: modules
 * write into it; snapshot.c gathers it with every module's own figures. */
#ifndef HK_STATS_H
#define HK_STATS_H

#include <stdatomic.h>

#include "common.h"
#include "size_class.h"

struct hk_counters {
    _Atomic size_t os_mmap, os_munmap, os_madvise, os_mremap;
    _Atomic size_t os_mmap_bytes, os_munmap_bytes, os_madvise_bytes;
    _Atomic size_t acquire_stage1, acquire_stage2, acquire_stage3_cache, acquire_stage3_mmap;
    _Atomic size_t slab_release, slab_adopt, slab_abandon;
    _Atomic size_t remote_free; /* by threads without a heap (the others count in their tally) */
    _Atomic size_t ss_unmapped;
    _Atomic size_t threads_started, threads_exited;
    _Atomic size_t heaps_taken_over, heaps_taken_in, heaps_given_up; /* exited threads' heaps
                                                                      * (heap.c) */
    _Atomic size_t os_mremap_bytes;
    _Atomic size_t os_populate, os_populate_bytes; /* pages filled ahead of a carve or of
                                                    * a big block's first use (os.c) */
    _Atomic size_t inbox_helps; /* idle threads' inboxes applied by other threads */
    _Atomic size_t fill_blocks, fill_bytes;    /* big blocks filled at their malloc (fill.c) */
    _Atomic size_t fill_probes, fill_probes_filled; /* probes looked at, and found filled */
};

extern struct hk_counters hk_ctr HK_INTERNAL;

#define HK_STAT_INC(f) atomic_fetch_add_explicit(&hk_ctr.f, 1, memory_order_relaxed)
#define HK_STAT_ADD(f, n) atomic_fetch_add_explicit(&hk_ctr.f, (n), memory_order_relaxed)

/* Operations per size class, and of large blocks, kept only when hk_counting is
 * set (HAKMEM_STATS at start-up): each thread counts into its own owner record (owner.h, the cold part),
 * written by that thread alone and read by others with relaxed loads; a record's counts join
 * the process-wide ones when its thread exits. frees counts every free of the class, by any
 * thread; remote_frees those by a thread that did not own the block's slab. */
struct hk_tally {
    _Atomic uint64_t allocs[HK_NCLASS], frees[HK_NCLASS], remote_frees[HK_NCLASS];
    _Atomic uint64_t large_allocs, large_frees;
    _Atomic uint32_t retained[HK_NCLASS]; /* empty slabs the thread keeps now (always kept) */
};

/* The tallies of all threads added up (owner.c's hk_owner_tally). */
struct hk_tally_sum {
    uint64_t allocs[HK_NCLASS], frees[HK_NCLASS], remote_frees[HK_NCLASS];
    uint64_t large_allocs, large_frees, remote_pushes;
    uint64_t retained[HK_NCLASS];
};

/* Set once at start-up, before any block is handed out; read on slow paths. With it, the
 * thread heaps route every small malloc and free through their slow paths, which count:
 * counting costs nothing while it is off. */
extern int hk_counting HK_INTERNAL;

/* Adds n to a counter that only the calling thread (or the holder of its lock) writes: a
 * load and a store, no read-modify-write. */
static inline void hk_tally_plus(_Atomic uint64_t *x, uint64_t n) {
    atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* One more in such a counter. */
static inline void hk_tally_bump(_Atomic uint64_t *x) { hk_tally_plus(x, 1); }

#endif
