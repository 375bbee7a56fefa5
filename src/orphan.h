/* Slabs without an owner. Orphaned slabs: slabs whose owner thread exited while some of their
 * blocks were still live, and whose heap no thread took over (heap.c, "Handover": a parked
 * heap is given up), or that an idle owner let go. And each small class's shared slab, which
 * no thread ever owns (see "Shared slabs" below).
 *
 * They wait here, per class, until their last block is freed (then they go back to the pool)
 * or another thread's refill adopts one that has free blocks. The lists of a class are
 * guarded by its lock stripe (lock.h). While a slab is an orphan its owner is NULL and frees
 * to it take its class's stripe (a thread with a heap batches them, heap.h, and takes a stripe
 * once a batch); adoption sets the owner under the same stripe, so a free either lands before
 * the adoption or sees the new owner. */
#ifndef HK_ORPHAN_H
#define HK_ORPHAN_H

#include "owner.h"
#include "superslab.h"

/* Gives up the slabs of list l (linked by next), all of one class, each with used > 0, which
 * the calling thread owned: one acquisition of the class's stripe for all of them (a thread
 * that exits leaves dozens: thread_churn with 16 threads took the orphans' locks 144 times a
 * thread for them, one slab at a time). */
void hk_orphan_abandon(struct hk_slab *l) HK_INTERNAL;
/* An orphan of class c with free blocks, now owned by o; NULL if none. */
struct hk_slab *hk_orphan_adopt(unsigned c, struct hk_owner *o) HK_INTERNAL;
/* Frees block b of slab s if s is (still) an orphan: returns 1 if done, 0 if s has an owner. */
int hk_orphan_free(struct hk_slab *s, void *b) HK_INTERNAL;

/* Frees the lists of blocks of orphans lists[c] of each small class c in mask (each linked,
 * marked free and checked for double frees by the caller; emptied here) under one
 * acquisition of each lock stripe they need. Blocks of one slab that follow each other in a
 * list join its free list at once, one count update for all of them: a thread that frees what
 * exited threads allocated one after another frees whole runs. Returns, as a list, the blocks
 * whose slab has an owner by now, to be freed to it. */
void *hk_orphan_free_lists(void *lists[HK_NSMALL], uint64_t mask) HK_INTERNAL;

#ifndef HK_HARDENED
/* Shared slabs: a thread's first few blocks of a small class (HAKMEM_SHARED_BLOCKS) come from
 * the class's shared slab, an orphan from the start that hands its blocks out a few at a time,
 * so that a thread that allocates a few blocks of many classes does not take a slab (and touch
 * a page) for each: 1,000 threads each holding 8 blocks of 16 B..4 KiB held 7 slabs a thread.
 * Each take is whole cache lines of blocks (no two threads' blocks share a line). Frees to it
 * take the orphans' path (it has no owner, and nostash: other threads do not stash its
 * blocks), so its count is exact, at once rather than in the freeing thread's batch; a block
 * that is a take of its own is handed out again before more is carved. Once it is carved to
 * its end it is an ordinary orphan, adopted when blocks come back, and the class gets a new
 * shared slab; one that has no live block for the purge delay goes back to the pool
 * (hk_orphan_share_decay).
 * Spares: a spent shared slab whose blocks all come back while it is an orphan is kept, up to
 * 64 a class, and the class's next shared slab is a spare before it is a slab of the pool.
 * Its blocks lay in every page of it, all resident; back in the pool it went to the next
 * thread that wanted a slab of the class, which carves a few blocks at a time and kept the
 * rest resident for nothing: crowd, a thousand threads a round, grew from 20.5 KiB a thread
 * after one round to 30 after five. Spares idle for the purge delay go to the pool too.
 *
 * Blocks of class c's shared slab (c < HK_NSMALL), *n of them (1 to 4), linked, not marked
 * free; NULL when the OS is out of memory. */
void *hk_orphan_share(unsigned c, uint32_t *n) HK_INTERNAL;
/* Gives the shared slabs without a live block since the purge delay (all of them with force)
 * back to the pool; at time now. */
void hk_orphan_share_decay(uint64_t now, int force) HK_INTERNAL;
#endif

/* Adds the acquisitions of the orphans' locks, and those that waited, to the counts. */
void hk_orphan_locks_add(size_t *taken, size_t *waited) HK_INTERNAL;

void hk_orphan_lock_all(void) HK_INTERNAL;
void hk_orphan_unlock_all(void) HK_INTERNAL;

#endif
