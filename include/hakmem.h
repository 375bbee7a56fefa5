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

/* Returns empty cached memory to the OS now. Returns 1 if anything was released. */
int hak_trim(void);

/* Nonzero if ptr is a live-or-free block inside memory hakmem manages (small or large). */
int hak_owns(const void *ptr);

/* Counters, merged over all threads. Monotonic except the *_now fields. */
struct hak_stats {
    size_t os_mmap, os_munmap, os_madvise, os_mremap; /* system calls made */
    size_t mapped_bytes_now;                   /* SuperSlabs + large mappings */
    size_t superslabs_now, superslabs_cached_now;
    size_t slabs_active_now;
    size_t large_now, large_bytes_now;
    size_t acquire_stage1, acquire_stage2;     /* slab acquisitions served by each stage */
    size_t acquire_stage3_cache, acquire_stage3_mmap;
    size_t slab_release, slab_adopt, slab_abandon;
    size_t remote_free;
};
void hak_stats_get(struct hak_stats *out);
/* Writes the counters to stderr, one per line. */
void hak_stats_print(void);

#ifdef __cplusplus
}
#endif
#endif
