/* Transfer lists: big blocks of other threads, offered to every thread's refill.
 *
 * A block of a class with a list (HK_XFER_FIRST and up: 1,280 bytes .. 1 MiB) freed by a
 * thread that does not own its slab goes first into the freeing thread's stash (heap.h,
 * "Reuse"), where that thread's next malloc of the class reuses it. A thread that cannot keep
 * it (its stash is full) and allocates the class too used to send it to the owner's inbox,
 * where it waited until the owner ran a refill, and then on the owner's slab until the
 * owner's current slab ran out: with more threads than cores, owners are often not running
 * (at 16 threads on 2 cores, 100-300 MB of mid blocks waited in inboxes beside 1 GB of heap),
 * and a class of big blocks left each of 16 threads a few slabs of free blocks of it. Here
 * such a block joins its class's transfer list instead, and the next refill of the class by
 * any thread takes it. A small block comes in a batch of up to HK_XFER_BATCH from its freeing
 * thread (heap.c, hk_xpend_add), a mid block alone. A refill of a mid class takes one, so that
 * the blocks go to whichever threads ask next (refills that took 8 of every class kept
 * shared_swap's 16 threads at 63 MiB against 59); one of a small class takes up to
 * HK_XFER_TAKE_SMALL (128 KiB at most): where threads free bursts of each other's blocks
 * and then allocate as many (scatter), every malloc of such a class took a refill and the
 * list's lock (scatter 2 2000 1000 100 2 8 16000 42 under callgrind: 132.0 -> 119.9
 * instructions an operation with 4).
 *
 * A block on a list is marked free (block.h) and still counts as live in its slab, as a
 * stashed block does, so its slab cannot empty meanwhile (exact accounting: heap.h). Bounded
 * by bytes per class, and in time: a list whose class no refill took from for
 * HK_XFER_IDLE_MS is handed back whole (hk_xfer_take_idle), and its blocks go home. The lists
 * of class c are guarded by lock stripe c % HK_LOCK_STRIPES (lock.h). Not in the hardened
 * build, which has no stash either. */
#ifndef HK_TRANSFER_H
#define HK_TRANSFER_H

#include "common.h"

/* The first class with a list: 1,280 bytes, 51 blocks a slab. From 640 bytes on, larson's
 * threads (16..1,024-byte blocks, freed by each other) ran at 0.93; from 5 KiB on, 16 threads
 * sharing blocks of mostly 16..128 bytes and a quarter of 129..2,048 (shared_swap) peaked at
 * 82 MiB against 72. */
#define HK_XFER_FIRST 21u
#define HK_XFER_BATCH 8u  /* most small blocks a batch brings */
#define HK_XFER_TAKE_SMALL 4u /* most blocks a refill of a small class takes */
/* Most bytes a class's list holds (at least 2 blocks): a mid class's, a small class's. */
#define HK_XFER_BYTES ((size_t)4 << 20)
#define HK_XFER_SMALL_BYTES ((size_t)1 << 20)
#define HK_XFER_IDLE_MS 20              /* a list no refill took from for this long goes home */
#define HK_XFER_LOOK_MS 5               /* the lists are looked at this often at most */

/* Offers the n blocks of class c (HK_XFER_FIRST or above) linked from head to tail (block.h)
 * and marked free: 1 if they joined the list, 0 if it has no room for them. */
int hk_xfer_put(unsigned c, void *head, void *tail, uint32_t n) HK_INTERNAL;
/* Up to max blocks of class c from its list (still marked free, linked, the last link NULL),
 * or NULL. */
void *hk_xfer_take(unsigned c, uint32_t max) HK_INTERNAL;
/* Whether class c's list holds blocks, as far as a read without the lock tells. */
int hk_xfer_any(unsigned c) HK_INTERNAL;
/* The blocks of every list that has held blocks and seen no take for HK_XFER_IDLE_MS, as
 * far as the calls to this at times now tell (all of them with all set), linked (block.h),
 * for the caller to send home; NULL if none, if another thread is looking, or (but with all
 * set) if a look was made less than HK_XFER_LOOK_MS ago. */
void *hk_xfer_take_idle(uint64_t now, int all) HK_INTERNAL;

/* Adds the lists' lock acquisitions, and those that waited, to the counts. */
void hk_xfer_locks_add(size_t *taken, size_t *waited) HK_INTERNAL;
void hk_xfer_lock_all(void) HK_INTERNAL;
void hk_xfer_unlock_all(void) HK_INTERNAL;

#endif
