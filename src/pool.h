/* The shared SuperSlab pool: every SuperSlab, each slot UNUSED, ACTIVE or EMPTY.
 *
 * A thread heap that needs a slab acquires one here, in stages:
 *   stage 1  an EMPTY slot that last served the same class
 *   stage 2  any non-ACTIVE slot of a SuperSlab that has one (EMPTY of another class, or UNUSED)
 *   stage 3  a whole SuperSlab: from the cache of fully empty ones first, then a new mapping
 * so new memory is mapped only when no empty slot exists anywhere (DESIGN invariant 2).
 * A slab released back (all its blocks free) becomes EMPTY; a SuperSlab whose slots are all
 * non-ACTIVE goes to the cache, most recent first. The cache keeps HAKMEM_SS_HOT SuperSlabs
 * resident, releases the pages of the next ones, and unmaps beyond HAKMEM_SS_CACHE.
 * One mutex guards the pool; it is only taken on slab acquire and release. */
#ifndef HK_POOL_H
#define HK_POOL_H

#include "superslab.h"

/* An ACTIVE slab formatted for class c with no owner set, or NULL when the OS is out of memory. */
struct hk_slab *hk_pool_acquire(unsigned c) HK_INTERNAL;
/* Returns a slab with no live block to the pool. Its owner must already be cleared. */
void hk_pool_release(struct hk_slab *s) HK_INTERNAL;
/* Unmaps every cached SuperSlab; returns the number unmapped. */
size_t hk_pool_trim(void) HK_INTERNAL;

struct hak_stats;
void hk_pool_stats(struct hak_stats *out) HK_INTERNAL;

/* fork support: hold the pool across fork, then release (in the parent and the child). */
void hk_pool_lock_all(void) HK_INTERNAL;
void hk_pool_unlock_all(void) HK_INTERNAL;

#endif
