/* The OS layer: every mmap, munmap and madvise hakmem makes goes through here and is counted. */
#ifndef HK_OS_H
#define HK_OS_H

#include "common.h"

/* Maps size bytes of fresh zeroed read-write memory; NULL on failure. */
void *hk_os_map(size_t size) HK_INTERNAL;
void hk_os_unmap(void *p, size_t size) HK_INTERNAL;
/* Releases the pages (contents become zero on next touch); the range stays mapped. */
void hk_os_release(void *p, size_t size) HK_INTERNAL;
/* Grows or shrinks a mapping, possibly moving it; NULL on failure (old mapping intact). */
void *hk_os_remap(void *p, size_t old_size, size_t new_size) HK_INTERNAL;

/* Moves the pages of [from, from+size) to [to, to+size), replacing what was mapped there; the
 * source range is then unmapped. 0 on failure (nothing moved: the source may span mappings). */
int hk_os_move(void *from, size_t size, void *to) HK_INTERNAL;

#endif
