/* The large tier: requests above the small classes, each in a mapping of its own.
 *
 * A table of live large blocks (open addressing, keyed by the user pointer) records each
 * mapping, so free() and realloc() find it without a header and a pointer that is not in the
 * table is known to be foreign. Blocks are page aligned (or aligned as asked), and realloc
 * moves them with mremap rather than by copying. One mutex guards the table. */
#ifndef HK_LARGE_H
#define HK_LARGE_H

#include "common.h"

/* A block of at least n bytes aligned to align (a power of two); fresh pages, already zero.
 * NULL with errno ENOMEM on failure. */
void *hk_large_alloc(size_t n, size_t align) HK_INTERNAL;
/* Frees p if it is a large block; returns 0 if it is not. */
int hk_large_free(void *p) HK_INTERNAL;
/* Usable size of large block p, or 0 if p is not one. */
size_t hk_large_usable(const void *p) HK_INTERNAL;
/* Resizes large block p to n > HK_SMALL_MAX bytes; NULL (p intact) on failure. */
void *hk_large_realloc(void *p, size_t n) HK_INTERNAL;

struct hak_stats;
void hk_large_stats(struct hak_stats *out) HK_INTERNAL;
void hk_large_lock_all(void) HK_INTERNAL;
void hk_large_unlock_all(void) HK_INTERNAL;

#endif
