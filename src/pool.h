/* The shared SuperSlab pool: every SuperSlab, each slot UNUSED, ACTIVE, EMPTY or PURGING.
 *
 * A thread heap that needs a slab of class c (one slot, or a span of several) acquires one
 * here, in stages:
 *   stage 1  an EMPTY slab that last served class c (its pages are warm, its length right):
 *            from the class's front first, then from the pool proper
 *   stage 2  a run of free slots (UNUSED, or EMPTY of other classes) in a SuperSlab in use,
 *            found in constant time: SuperSlabs wait on lists by their longest free run; a
 *            run of EMPTY slots in one of the first few that fit, else the tightest fit
 *   stage 3  a whole free SuperSlab: from the cache first, then a new mapping
 * so new memory is mapped only when no free run exists anywhere (DESIGN invariant 2).
 *
 * A slab given back with no live block becomes EMPTY: its pages stay resident, it is reused
 * first, and it joins an age list. Memory goes back to the OS by time and by demand
 * (DESIGN invariant 4):
 *   - an EMPTY slab idle for the purge delay has its pages released (madvise) and becomes
 *     UNUSED; so does the oldest one at once while the EMPTY bytes exceed the pool budget;
 *   - a SuperSlab with no ACTIVE slot waits in the cache, newest first, and is unmapped after
 *     the unmap delay, or at once beyond the cache's size.
 * The delays, the budget and the cache size come from the policy (policy.h). One mutex
 * guards the pool proper, never taken per block and released around the system calls. In
 * front of it, each class keeps a few EMPTY slabs under its lock stripe (lock.h): a slab given
 * back while its SuperSlab is busy waits there and serves the class's next acquire, so that
 * slab traffic of a steady program takes no process-wide lock, and a burst moves between a
 * front and the pool proper half a front at a time, one hold of the mutex each (pool.c says
 * when they move). */
#ifndef HK_POOL_H
#define HK_POOL_H

#include "superslab.h"

/* An ACTIVE slab formatted for class c with no owner set, or NULL when the OS is out of memory. */
struct hk_slab *hk_pool_acquire(unsigned c) HK_INTERNAL;
/* Returns slab s, which has no live block and no owner, to the pool. It has been empty since
 * idle_since (hk_now_ms; a thread may have kept it for a while first). */
void hk_pool_release(struct hk_slab *s, uint64_t idle_since) HK_INTERNAL;
/* Returns the slabs of list l (linked by next; each with no live block and no owner, empty
 * since its idle_since) to the pool proper under one hold of its mutex, not to their classes'
 * fronts: slabs of classes their thread has stopped allocating, for stage 2 to hand to any
 * class (heap.c, hk_heap_unretain_idle). */
void hk_pool_release_idle(struct hk_slab *l) HK_INTERNAL;
/* Releases what is due at time now: pages of EMPTY slabs past the delay or beyond the budget,
 * cached SuperSlabs past the unmap delay or beyond the cache size; with force, everything
 * free. Returns the bytes given back to the OS. */
size_t hk_pool_decay(uint64_t now, int force) HK_INTERNAL;

/* Gives every cached SuperSlab (one with no ACTIVE slot) back to the page heap now: the
 * large tier is about to map memory for a block, or to cut one of a SuperSlab or more from
 * untouched memory, which they can serve instead. All of them, so that neighbours merge into
 * runs longer than one: given only a run that holds the block, bench/phases took 17,000 page
 * faults after its first round and peaked at 126 MiB, against 2,900 and 117 MiB. */
void hk_pool_give_cache(void) HK_INTERNAL;
/* Whether the pool holds cached SuperSlabs (read without the lock: a hint). */
int hk_pool_has_cache(void) HK_INTERNAL;
/* What ACE measures: cumulative counts (it takes differences) and the window's drawdown.
 * Each call starts a new window, so ACE is its only caller (reports read hk_pool_stats). */
struct hk_pool_demand {
    uint64_t retaken[HK_NCLASS];   /* slabs a thread acquired soon after it gave one of the
                                    * class up past its soft cap (hk_pool_retaken) */
    size_t drawn_bytes;            /* the deepest drawdown of the EMPTY bytes by reuse in the
                                    * window: how much free memory the program took back */
    uint64_t refault_bytes;        /* bytes taken again soon after their pages were released */
    size_t peak_bytes;             /* the most bytes of ACTIVE slabs in the window, and the
                                    * EMPTY ones the pool held at that moment */
};
void hk_pool_demand(struct hk_pool_demand *out) HK_INTERNAL;
/* Counts a slab of class c that a thread acquired soon after it released one past its soft
 * cap: a round trip a higher cap would have saved (ACE raises the cap on them). */
void hk_pool_retaken(unsigned c) HK_INTERNAL;

/* Whether slab s is in the pool with no live block (EMPTY, or in its class's front): a block
 * freed into it was freed already. Read racily, on the misuse path only. */
static inline int hk_pool_has_free_slab(const struct hk_slab *s) {
    return s->state == HK_SLOT_EMPTY || s->list == HK_LIST_POOL_FRONT;
}

struct hak_stats;
void hk_pool_stats(struct hak_stats *out) HK_INTERNAL;

/* fork support: hold the pool across fork, then release (in the parent and the child). */
void hk_pool_lock_all(void) HK_INTERNAL;
void hk_pool_unlock_all(void) HK_INTERNAL;

#endif
