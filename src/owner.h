/* Owner records: the part of a thread heap that other threads may touch.
 *
 * A slab's `owner` points at a record, not at the thread's heap, because a heap goes with its
 * thread when it exits (to be used by another, heap.c) while other threads may still be
 * freeing into it.
 * Records are never unmapped. A record whose thread exited is parked with its heap's slab
 * lists (its slabs still its own, its inbox open) until a new thread takes it over, or until
 * it is given up (heap.c, "Handover"); then it is recycled for a new thread.
 *
 * The inbox holds the blocks freed by threads that do not own their slab, in HK_LANES lock-free
 * stacks: any thread pushes a chain of blocks onto a lane (one CAS for a part of the batch a
 * freeing thread collected, see heap.h), only the owner takes, and it takes a whole lane at
 * once (exchange), so there is no ABA. The owner walks its lanes side by side, so that the
 * cache misses on blocks last written by other cores overlap instead of queueing one behind
 * the other on a single list. When the thread exits, every lane is closed: pushes fail, and
 * the pusher looks at the slab's owner again (it has been cleared by then). */
#ifndef HK_OWNER_H
#define HK_OWNER_H

#include <stdatomic.h>

#include "block.h"
#include "chaos.h"
#include "common.h"
#include "size_class.h"
#include "stats.h"

struct hk_slab;

#define HK_INBOX_CLOSED ((void *)1)
#define HK_LANES 4

/* hk_owner.parked_by once blocks came from more than one thread (hk_owner_tag). */
#define HK_TAG_MANY 1u

/* What a record holds that most threads never touch: the counts kept under HAKMEM_STATS and
 * the empty slabs a thread keeps, and the slab lists of a parked heap. Apart from the record,
 * in a mapping of their own, so that a thread that owns no slab (most of a thousand threads
 * that each hold a few blocks) has no page of them resident: they are written only by a
 * thread that counts, keeps or parks slabs, and read only where that was so (park_mask,
 * hk_counting) and by the report. */
struct hk_owner_cold {
    struct hk_tally tally; /* the thread's operation counts (stats.h) */
    /* A heap handed over at its thread's exit (heap.c, "Handover"): its slabs, still owned
     * by this record, until a new thread takes them or they are given up; set where
     * park_mask has the class's bit. */
    struct hk_slab *park_partial[HK_NCLASS], *park_full[HK_NCLASS];
    struct hk_slab *park_partial_tail[HK_NCLASS]; /* the last of park_partial's list */
};

/* The record itself: three cache lines, which every thread writes, packed with the other
 * records' (a record of 3 KiB, counts and park lists in it, kept 3 KiB a thread resident in
 * crowd, where every thread writes its first lines). */
struct hk_owner {
    _Atomic(void *) inbox[HK_LANES]; /* blocks freed remotely, linked as block.h says */
    struct hk_owner *next_free; /* recycling list */
    struct hk_owner *next_all;  /* every record ever made; set before it is published */
    /* Set while the record is parked (heap.c, "Handover"), under the records' mutex: read by
     * pushers on the line their push has just taken, not on the owner's line below. */
    _Atomic unsigned char parked;
    _Atomic uint32_t parked_pushes; /* blocks other threads brought it while parked */
    _Atomic uint32_t parked_kib;    /* and their KiB, rounded up a push at a time */
    /* Who brought them: hk_owner_tag of the one thread's record, HK_TAG_MANY once a second
     * thread did, 0 before any (heap.c, hk_parked_brought). */
    _Atomic uint32_t parked_by;
    /* One cache line for the above: pushers contend on it. */
    /* A helper that applies an idle owner's inbox (heap.c, "Idle owners") claims the record,
     * then flags the owner's heap; the heap says whether it is busy. */
    _Atomic unsigned claim __attribute__((aligned(64))); /* nonzero while a helper holds it */
    /* Set by a helper that applied the inbox (heap.c, "Idle owners"), cleared by the owner
     * when it takes its inbox, by a thread that sets the record up, and when its partial
     * slabs are let go. */
    _Atomic uint32_t helped;
    _Atomic(void *) heap;       /* the owner's thread heap; NULL before start and after exit */
    /* When the owner last ran its tick (hk_now_ms), written once a tick: a thread that has
     * not ticked for HK_IDLE_MS has run no slow path, and so has taken no partial slab. */
    _Atomic uint64_t last_tick;
    _Atomic uint64_t takes;     /* how often the inbox was taken (hk_owner_take) */
    _Atomic uint64_t seen;      /* the last scan for idle owners: takes * 2, + 1 if blocks
                                 * were waiting */
    _Atomic uint64_t remote_pushes; /* blocks the thread handed to other threads */
    struct hk_owner_cold *cold; /* this record's, for its whole life */
    _Atomic unsigned char kept; /* set once the cold tally's retained counts were written */
    /* Classes whose park_partial or park_full the parked heap set (the rest are NULL). */
    uint64_t park_mask;
    /* Classes of which the parked thread took slabs of its own (heap.h, outgrew): the thread
     * that takes the record over takes no shared blocks of them (orphan.h). */
    uint64_t park_outgrew;
    uint64_t parked_at;
    struct hk_owner *next_parked, *prev_parked; /* the parked list, newest first */
} __attribute__((aligned(64)));

/* A record's 32-bit tag (hk_owner.parked_by), never 0 or HK_TAG_MANY. Two records share one
 * only where their addresses lie a multiple of 128 GiB apart; the worst that comes of it is a
 * heap taken in by a thread that was not alone in freeing into it, which is correct too. */
static inline uint32_t hk_owner_tag(const struct hk_owner *o) {
    return (uint32_t)((uintptr_t)o >> 6) | 0x80000000u;
}

/* Notes that record o's thread keeps n empty slabs of class c now. */
static inline void hk_owner_set_retained(struct hk_owner *o, unsigned c, uint32_t n) {
    atomic_store_explicit(&o->cold->tally.retained[c], n, memory_order_relaxed);
    atomic_store_explicit(&o->kept, 1, memory_order_relaxed);
}

/* A record with an open, empty inbox; NULL when no memory is left. */
struct hk_owner *hk_owner_new(void) HK_INTERNAL;
/* Gives a record whose inbox is closed and drained back for reuse; its counts join the
 * process-wide ones. */
void hk_owner_retire(struct hk_owner *o) HK_INTERNAL;

/* Parks record o, whose thread exited at time now with its heap's lists in park_partial and
 * park_full (heap.c, "Handover"): its inbox stays open, and the record waits here for a new
 * thread to take it, or to be given up. */
void hk_owner_park(struct hk_owner *o, uint64_t now) HK_INTERNAL;
/* Takes the oldest parked record off the list (with older nonzero, only if it was parked
 * before older); NULL if none. */
struct hk_owner *hk_owner_unpark(uint64_t older) HK_INTERNAL;
/* Takes record o off the parked list: 1 if it was parked, else 0 (taken, or not parked). */
int hk_owner_unpark_this(struct hk_owner *o) HK_INTERNAL;
/* How many records are parked (read without the lock: a hint). */
unsigned hk_owner_parked(void) HK_INTERNAL;

/* The newest record; older ones follow by next_all. Records are never unmapped, so the list
 * may be walked without a lock. */
struct hk_owner *hk_owner_first(void) HK_INTERNAL;

/* Adds up the tallies of every thread, live or exited (exact when no thread counts meanwhile;
 * the retained slabs are those of live threads). */
void hk_owner_tally(struct hk_tally_sum *sum) HK_INTERNAL;

/* Pushes a chain of blocks, head to tail, already linked and marked free, onto lane `lane`
 * with one CAS; returns 0 (the chain untouched but for tail's link) if the inbox is closed. */
static inline int hk_owner_push_list(struct hk_owner *o, unsigned lane, void *head, void *tail) {
    _Atomic(void *) *in = &o->inbox[lane];
    void *old = atomic_load_explicit(in, memory_order_relaxed);
    do {
        if (old == HK_INBOX_CLOSED) return 0;
        hk_link_set(tail, old);
        hk_chaos();
    } while (!atomic_compare_exchange_weak_explicit(in, &old, head, memory_order_release,
                                                    memory_order_acquire));
    return 1;
}

/* Whether blocks are pending (an open inbox has some, or it is closed). */
static inline int hk_owner_pending(struct hk_owner *o) {
    int any = 0;
    for (unsigned i = 0; i < HK_LANES; i++)
        any |= atomic_load_explicit(&o->inbox[i], memory_order_relaxed) != NULL;
    return any;
}

/* Takes every pending block, a list per lane (the owner, or a helper that has claimed it);
 * a closed lane gives nothing. */
static inline void hk_owner_take(struct hk_owner *o, void *lists[HK_LANES]) {
    for (unsigned i = 0; i < HK_LANES; i++) {
        void *b = atomic_load_explicit(&o->inbox[i], memory_order_relaxed);
        lists[i] = b == NULL || b == HK_INBOX_CLOSED
                       ? NULL
                       : atomic_exchange_explicit(&o->inbox[i], NULL, memory_order_acquire);
    }
    atomic_fetch_add_explicit(&o->takes, 1, memory_order_relaxed);
}

/* Closes the inbox and returns what was pending, a list per lane (owner only, at exit). */
static inline void hk_owner_close(struct hk_owner *o, void *lists[HK_LANES]) {
    for (unsigned i = 0; i < HK_LANES; i++)
        lists[i] = atomic_exchange_explicit(&o->inbox[i], HK_INBOX_CLOSED, memory_order_acq_rel);
}

/* The lock that fork takes (hk_owner_lock_all) and that a helper holds while it works on
 * another thread's heap, so that no child is forked with a heap flagged as claimed by a
 * thread it does not have: 1 if taken. */
int hk_owner_trylock(void) HK_INTERNAL;
void hk_owner_unlock(void) HK_INTERNAL;
void hk_owner_lock_all(void) HK_INTERNAL;
void hk_owner_unlock_all(void) HK_INTERNAL;

#endif
