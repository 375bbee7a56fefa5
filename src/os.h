/* The OS layer: every mmap, munmap, madvise and mremap hakmem makes goes through here and is
 * counted; calls that change page tables cover at most one 2 MiB-aligned stretch each (os.c). */
#ifndef HK_OS_H
#define HK_OS_H

#include "common.h"

/* Maps size bytes of fresh zeroed read-write memory; NULL on failure. */
void *hk_os_map(size_t size) HK_INTERNAL;
void hk_os_unmap(void *p, size_t size) HK_INTERNAL;
/* Releases the pages (contents become zero on next touch); the range stays mapped. 0, or -1
 * where the kernel refused some of it (those pages keep their contents). */
int hk_os_release(void *p, size_t size) HK_INTERNAL;
/* Makes every byte of [p, p+size) and of its last page zero (p page-aligned, the range the
 * caller's own): released where most pages of a 2 MiB stretch are not resident, else written
 * (calloc of a large block that may hold old data). */
void hk_os_zero(void *p, size_t size) HK_INTERNAL;
/* Fills the pages that [p, p+size) reaches, which are about to be written and hold nothing yet,
 * in one call a 2 MiB stretch (madvise MADV_POPULATE_WRITE, Linux 5.14), where touching them
 * would fault once a page. Does nothing where the kernel does not know the call (the first
 * refusal stops further tries): the writes then fault the pages in as before. */
void hk_os_populate(void *p, size_t size) HK_INTERNAL;
/* Grows mapping p of old_size bytes to new_size, in place where the address space after it is
 * free, else by moving its pages to new address space (the rest copied, should some not
 * move); NULL on failure (old mapping intact). */
void *hk_os_remap(void *p, size_t old_size, size_t new_size) HK_INTERNAL;

/* Moves the pages of [from, from+size) to [to, to+size), replacing what was mapped there,
 * from the front, a 2 MiB-aligned stretch at a time; the source's moved part is then
 * unmapped. Returns the bytes moved: less than size where the kernel would not move a
 * stretch (before Linux 6.17 it refuses one that spans two mappings), the rest left in place. */
size_t hk_os_move(void *from, size_t size, void *to) HK_INTERNAL;

#endif
