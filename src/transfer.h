/* Transfer lists: mid blocks of other threads, offered to every thread's refill.
 *
 * A mid block (40 KiB .. 1 MiB) freed by a thread that does not own its span goes first into
 * the freeing thread's stash (heap.h, "Reuse"), where that thread's next malloc of the class
 * reuses it. A thread that cannot keep it (its stash is full, or it does not allocate the
 * class) used to send it to the owner's inbox, where it waited until the owner ran a refill:
 * with more threads than cores, owners are often not running, and at 16 threads on 2 cores
 * 100-300 MB of mid blocks waited in inboxes beside 1 GB of heap. Here such a block joins its
 * class's transfer list instead, and the next refill of the class by any thread takes it.
 *
 * A block on a list is marked free (block.h) and still counts as live in its span, as a
 * stashed block does, so its span cannot empty meanwhile (exact accounting: heap.h). Bounded
 * by bytes per class, and in time: a list whose class no refill took from for
 * HK_XFER_IDLE_MS is handed back whole (hk_xfer_take_idle), and its blocks go home. The lists
 * of class c are guarded by lock stripe c % HK_LOCK_STRIPES (lock.h). Not in the hardened
 * build, which has no stash either. */
#ifndef HK_TRANSFER_H
#define HK_TRANSFER_H

#include "common.h"

#define HK_XFER_BYTES ((size_t)4 << 20) /* most bytes a class's list holds (at least 2 blocks) */
#define HK_XFER_IDLE_MS 20              /* a list no refill took from for this long goes home */

/* Offers block p (size bytes, of mid class c, marked free): 1 if it joined the list, 0 if
 * the list is full. */
int hk_xfer_put(unsigned c, void *p, uint32_t size) HK_INTERNAL;
/* A block of class c from its list (still marked free), or NULL. */
void *hk_xfer_take(unsigned c) HK_INTERNAL;
/* The blocks of every list that has held blocks and seen no take for HK_XFER_IDLE_MS, as
 * far as the calls to this at times now tell (all of them with all set), linked (block.h),
 * for the caller to send home; NULL if none (or if another thread is looking). */
void *hk_xfer_take_idle(uint64_t now, int all) HK_INTERNAL;

/* Adds the lists' lock acquisitions, and those that waited, to the counts. */
void hk_xfer_locks_add(size_t *taken, size_t *waited) HK_INTERNAL;
void hk_xfer_lock_all(void) HK_INTERNAL;
void hk_xfer_unlock_all(void) HK_INTERNAL;

#endif
