/* hakmem: a general-purpose malloc for Linux.
 *
 * Used as a drop-in replacement (LD_PRELOAD=libhakmem.so, or linked with -lhakmem), hakmem
 * exports the standard malloc family. The same allocator is reachable under the hak_ prefix
 * below, for programs that want it alongside another malloc or explicitly.
 *
 * Every hak_ function has the semantics of its glibc namesake: errors return NULL (or an error
 * code for hak_posix_memalign) with errno set to ENOMEM or EINVAL, hak_free(NULL) does nothing,
 * and every block of 16 bytes or more is 16-byte aligned.
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *hak_malloc(size_t size);
void hak_free(void *ptr);
void *hak_calloc(size_t nmemb, size_t size);
void *hak_realloc(void *ptr, size_t size);
void *hak_reallocarray(void *ptr, size_t nmemb, size_t size);
int hak_posix_memalign(void **out, size_t alignment, size_t size);
void *hak_aligned_alloc(size_t alignment, size_t size);
void *hak_memalign(size_t alignment, size_t size);
void *hak_valloc(size_t size);
void *hak_pvalloc(size_t size);
size_t hak_usable_size(void *ptr);
void hak_free_sized(void *ptr, size_t size);
void hak_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* Returns free memory to the OS now: the calling thread's kept slabs, every EMPTY slab's
 * pages, cached SuperSlabs and free large memory. Returns 1 if anything was released. */
int hak_trim(void);

/* Nonzero if ptr is a live-or-free block inside memory hakmem manages (small or large). */
int hak_owns(const void *ptr);

/* Counters, merged over all threads. Monotonic except the *_now fields and the policy. */
#define HAK_STATS_NCLASS 64
struct hak_stats {
    size_t os_mmap, os_munmap, os_madvise, os_mremap; /* system calls made */
    size_t os_mmap_bytes, os_munmap_bytes, os_madvise_bytes, os_mremap_bytes; /* their bytes */
    size_t os_populate, os_populate_bytes;     /* madvise(POPULATE_WRITE) calls that filled a
                                                * fresh slab's pages ahead of its carve, or a
                                                * big block's at its malloc (large_filled) */
    size_t mapped_bytes_now;                   /* the page heap's mappings (all tiers) */
    size_t superslabs_now, superslabs_cached_now;
    size_t slabs_active_now;                   /* 64 KiB slots in slabs threads own */
    size_t large_now, large_bytes_now;         /* live large blocks */
    size_t acquire_stage1, acquire_stage2;     /* slab acquisitions served by each stage */
    size_t acquire_stage3_cache, acquire_stage3_mmap;
    size_t slab_release, slab_adopt, slab_abandon;
    size_t remote_free;
    size_t inbox_helps;                        /* idle threads' remote frees applied by others */
    size_t pool_lock, pool_lock_waited;        /* pool mutex acquisitions; those that waited */
    size_t pool_class_lock, pool_class_lock_waited; /* the pool's per-class front locks */
    size_t large_lock, large_lock_waited;      /* the large tier's arena locks, likewise */
    size_t orphan_lock, orphan_lock_waited;    /* the orphans' mutex, likewise */
    size_t xfer_lock, xfer_lock_waited;        /* the mid transfer lists' locks, likewise */
    size_t threads_started, threads_exited;    /* thread heaps set up and torn down */
    size_t heaps_taken_over, heaps_taken_in, heaps_given_up; /* exited threads' heaps: a new
                                                * thread took one over whole; a thread that
                                                * freed its blocks took one in; given up (its
                                                * slabs to the pool or the orphans) */
    /* Memory lifecycle: free memory kept resident, and what went back to the OS. */
    size_t pool_empty_bytes_now;               /* EMPTY slabs in the pool (resident) */
    size_t pool_purged_bytes;                  /* EMPTY slab pages released (madvise) */
    size_t superslabs_unmapped;                /* free SuperSlabs given back to the page heap */
    size_t large_free_dirty_now, large_free_clean_now; /* free large bytes: resident / released */
    size_t large_cache_hits, large_cache_misses;  /* large requests served from free memory or not */
    size_t large_purged_bytes;
    size_t large_realloc_in_place, large_realloc_mremap; /* large blocks grown in place, or
                                               * moved to new address space (mremap) */
    size_t large_realloc_copied;               /* large blocks grown by copying them into
                                               * free memory still resident */
    size_t large_gathers, large_gathered_bytes; /* misses served partly by moving free
                                                 * resident pages into the new block (mremap) */
    size_t large_arenas;                       /* page heaps the large tier is split into */
    size_t large_steals;                       /* free extents an arena took from another */
    size_t large_queued_frees;                 /* frees left for an arena's lock's next holder */
    size_t large_filled, large_filled_bytes;   /* blocks whose untouched pages were filled at
                                                * their malloc (HAKMEM_POPULATE) */
    size_t large_fill_probes, large_fill_probes_filled; /* blocks left to fault as probes of
                                                * whether the program fills its blocks, looked
                                                * at when freed; those it had filled */
    /* The policy in force (ACE's current choices, or the fixed ones with HAKMEM_ACE=0). */
    size_t purge_delay_ms, unmap_delay_ms;
    size_t pool_budget, large_budget;          /* free resident bytes kept regardless of age */
    size_t ss_cache_max;
    size_t nclass;                             /* size classes below */
    size_t class_size[HAK_STATS_NCLASS];       /* block size of each class */
    size_t soft_cap[HAK_STATS_NCLASS];         /* empty slabs a thread keeps, per class */
    size_t class_slabs_acquired[HAK_STATS_NCLASS]; /* slabs taken from the pool, per class */
    size_t class_slabs_held[HAK_STATS_NCLASS]; /* taken and not given back: threads' slabs */
    size_t class_slabs_retained[HAK_STATS_NCLASS]; /* of those, empty ones threads keep */
    size_t class_slabs_empty[HAK_STATS_NCLASS];    /* EMPTY in the pool, last of this class */
    /* Operations, counted only when HAKMEM_STATS is set at start-up (counted says so): while
     * counting, small mallocs and frees take hakmem's slow paths, which count them. */
    size_t counted;
    size_t class_allocs[HAK_STATS_NCLASS], class_frees[HAK_STATS_NCLASS];
    size_t class_remote_frees[HAK_STATS_NCLASS]; /* frees by a thread not owning the slab */
    size_t class_live[HAK_STATS_NCLASS];       /* allocs - frees */
    size_t large_allocs, large_frees;
};
void hak_stats_get(struct hak_stats *out);
/* Writes the counters to stderr, one per line. */
void hak_stats_print(void);

#ifdef __cplusplus
}
#endif
#endif
