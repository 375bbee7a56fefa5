#define _GNU_SOURCE /* syscall */
#include "heap.h"

#include <errno.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "carve.h"
#include "chaos.h"
#include "clock.h"
#include "config.h"
#include "decay.h"
#include "exit_key.h"
#include "guard.h"
#include "init.h"
#include "large.h"
#include "lock.h"
#include "orphan.h"
#include "owned.h"
#include "transfer.h"
#include "os.h"
#include "policy.h"
#include "pool.h"
#include "record.h"
#include "report.h"
#include "room.h"
#include "side.h"
#include "stats.h"
#include "trace.h"

/* The thread's heap (a record, record.h) and free's view of its owned-slab table. */
HK_TLS struct hk_tls hk_tls = {
    .heap = (struct hk_heap *)&hk_heap_none,   /* read by the fast paths, never written */
    .ftab = (struct hk_owned *)&hk_owned_none, /* admits nothing, and is never written */
};

_Static_assert(offsetof(struct hk_heap, room) ==
                   offsetof(struct hk_heap, free) + sizeof(void *) * (HK_NCLASS + 1),
               "free's fast path finds a class's room one array after its cache");

#define HK_TICK_MS HK_CHAOS_FAST(10, 1) /* a thread's tick runs at most this often */
#define HK_TICK_REFILLS HK_CHAOS_FAST(16, 2) /* refills between two looks at the clock */

/* The calling thread has just left `bytes` idle (now): once what it left idle within a tick,
 * less what it took back (a kept or pooled slab, a large block), makes HK_BEAT_BYTES, its
 * rooms beat until the purge delay has passed (hk_heap_tick ends it). A program that frees a
 * burst and then lives on its cache alone, malloc/free pairs of one class, takes no refill,
 * no stash and no batch: the room running out is its only slow path, and a full room is up
 * to 1,024 frees (bench/burst, 100 pairs after 1.2 s of sleep: 128 MiB kept in every run, 1
 * GiB in 3 of 8). The beat costs a slow path every 64 frees: 4-5% of tight 32 if it were on
 * for good, 10% of scatter, whose threads empty and take back 4 MiB of slabs within 10 ms,
 * if it counted what goes idle and not what stays so. So it is on only while there is memory
 * worth giving back; a program that leaves less idle has it released at its next slow path. */
#define HK_BEAT_BYTES ((intptr_t)4 << 20)
static void hk_heap_beat(struct hk_heap *h, uint64_t now, size_t bytes) {
    h->left_idle += (intptr_t)bytes;
    if (h->left_idle < HK_BEAT_BYTES) return;
    int start = !h->beat_since;
    h->beat_since = now ? now : 1;
#ifndef HK_HARDENED
    /* Rooms set before the beat started are set again, the same room handed out in parts. */
    if (start)
        for (unsigned c = 0; c < HK_NCLASS; c++)
            if (h->room[c] > (intptr_t)HK_ROOM_BEAT)
                hk_room_set(h, c, (uintptr_t)h->room[c] + h->taken[c]);
#else
    (void)start;
#endif
}

int hk_heap_frees_by_meta(void) { return hk_tls.heap->free_any; }

/* --- the thread-exit hook --------------------------------------------------------------------- */

static void hk_heap_teardown(struct hk_heap *h);

static struct hk_exit_key hk_exit_key;


/* glibc keeps a thread's key values in its descriptor, and a descriptor is used again by a
 * later thread: a value set after the last round of destructors (a later destructor's free,
 * or glibc's own, took a record or set a heap up again) comes back to that thread's exit.
 * It is not that thread's heap, and is left alone. */
static void hk_thread_exit(void *heap) {
    struct hk_heap *h = heap;
    if (h != hk_tls.heap) return;
    hk_heap_teardown(h);
    hk_record_parting(h);
}



/* The calling thread's heap record, taken now if it has none (record.h): NULL only if the OS
 * refuses the memory for one. The slow paths' way to their heap: hk_heap_none is never
 * written. */
static HK_NOINLINE struct hk_heap *hk_heap_record_take(void) {
    struct hk_heap *h = hk_record_take();
    if (!h) return NULL;
    hk_tls.heap = h;
    (void)hk_exit_key_arm(&hk_exit_key, hk_thread_exit, h);
    hk_record_forkable(); /* after the record is the thread's: pthread_atfork may allocate */
    return h;
}

static inline struct hk_heap *hk_heap_self(void) {
    struct hk_heap *h = hk_tls.heap;
    return HK_LIKELY(h != &hk_heap_none) ? h : hk_heap_record_take();
}

/* Notes whether caches may take blocks that are not of the thread's table (free's second try
 * and the stash): the exit hook will send them home, no trim or teardown is under way, the
 * counters are off, and the heap holds slabs (a cache takes a block only where its class has a
 * current slab; a heap without reads no slab list, heap.h). One flag, so that the second try
 * reads one byte for it. */
static void hk_heap_may_take(struct hk_heap *h) {
    h->take_ok = h->hooked && !h->no_stash && !hk_counting && h->slabbed;
}

/* A heap rebuilt by a later destructor's malloc is torn down too (exit_key.h). Without a key
 * hakmem still works, but the heaps of exiting threads are not handed over: their slabs stay
 * with them. */
static void hk_heap_watch_exit(struct hk_heap *h) {
    h->hooked = (uint8_t)hk_exit_key_arm(&hk_exit_key, hk_thread_exit, h);
    hk_heap_may_take(h);
}

/* --- idle owners ---------------------------------------------------------------------------- */

/* Blocks other threads free into a thread's inbox are applied by the owner at its next refill.
 * A thread that has stopped allocating (blocked, or busy with other work) would strand them,
 * and with them every slab they would empty. So a scan, run at most every HK_HELP_MS from any
 * thread's tick, looks at every owner record: an inbox that held blocks at the last scan and
 * holds blocks now, and that its owner has not taken since (the record counts the takes), has
 * had a block waiting for at least HK_HELP_MS, and the scanning thread applies the owner's inbox
 * to its slabs itself: an emptied slab is kept or goes to the pool as if the owner had freed
 * its last block. (The scan once took a lane whose first block was the one the last scan saw:
 * an idle owner that others kept freeing into, a new first block every time, was never
 * helped.)
 *
 * Exclusion without a read-modify-write on the owner's side: wherever the owner changes slab
 * state (its slow paths, and the hardened build's free fast path, heap.h) it stores busy,
 * loads its heap's claimed flag, and clears busy when done (hk_heap_enter, hk_heap_leave).
 * A helper claims the record (a CAS, which keeps helpers apart), sets the heap's flag, then
 * membarrier(PRIVATE_EXPEDITED) makes every running thread of the process pass a full barrier,
 * and then the helper reads busy. Either the owner's busy is visible by then and the helper
 * backs off (the next scan tries again), or the owner sees the flag and waits for it. The
 * flag lives in the owner's heap so that free's fast path reads it without going through
 * the record; an exiting owner therefore waits for any claim on its record after it has
 * unpublished its heap (hk_heap_teardown), so that no helper writes to a heap record that
 * another thread uses next. A helper holds the owner lock while it works, so fork
 * (which takes it) never copies a heap flagged by a thread the child does not have. A helper
 * changes slab lists, slabs' free lists and counts, the heap's lists and batches, never the
 * thread's caches and rooms, which the owner's fast paths use without marking themselves
 * busy; for the same reason it never runs the owner's tick (hk_heap_emptied). Free's fast
 * path reads the owned-slab table unmarked too, so a helper never adds an entry (a slab it
 * makes partial gets its entry at the owner's next free to it) and clears only the entries
 * of slabs it empties, with one store of the entry's bound (hk_owned_clear): no valid free
 * reads those, every block of them being free, and the store makes the entry admit nothing. Without membarrier (kernels
 * before 4.14, seccomp filters) inboxes wait for their owners; under ThreadSanitizer, which
 * cannot see membarrier's ordering, too. */

#define HK_HELP_MS HK_CHAOS_FAST(10, 1)
/* An owner that was helped and has run no tick for this long loses its partial slabs. Where
 * a blocked thread's blocks are freed fast (larson's main thread, 16 lanes on 2 cores), the
 * others carve fresh slabs while they wait: the run peaked at 88 MiB with 100 ms, 73 with 40,
 * 72 with 20 (tcmalloc 52). */
#define HK_IDLE_MS HK_CHAOS_FAST(40, 2)

/* A helper has claimed the calling thread's heap: waits until it is done. */
static HK_NOINLINE HK_COLD void hk_heap_wait(struct hk_heap *h) {
    do {
        atomic_store_explicit(&h->busy, 0, memory_order_release);
        while (atomic_load_explicit(&h->claimed, memory_order_acquire)) sched_yield();
        atomic_store_explicit(&h->busy, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    } while (atomic_load_explicit(&h->claimed, memory_order_acquire));
}

#if !defined(__SANITIZE_THREAD__)
static _Atomic int hk_mb_state; /* 0 not tried, 1 registered, -1 not to be had */
#endif
static _Atomic uint64_t hk_help_next;

/* Enters a slow path of the calling thread's heap (marks it busy).
 * Slow paths do not nest, but for one case that needs no care: a corrupt cache found by the
 * refill refills again (hk_heap_corrupt), and the outer refill, once the inner one has left,
 * only returns the block. */
static inline void hk_heap_enter(struct hk_heap *h) {
    hk_chaos(); /* after what the caller read unmarked */
    atomic_store_explicit(&h->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* membarrier orders the store and the load */
    if (HK_UNLIKELY(atomic_load_explicit(&h->claimed, memory_order_acquire))) hk_heap_wait(h);
}

static inline void hk_heap_leave(struct hk_heap *h) {
    atomic_store_explicit(&h->busy, 0, memory_order_release);
    hk_chaos(); /* a helper may claim the heap now */
}

/* Whether the process may use hk_membarrier (registers it the first time). */
static int hk_membarrier_ok(void) {
#if defined(__SANITIZE_THREAD__)
    return 0;
#else
    int st = atomic_load_explicit(&hk_mb_state, memory_order_relaxed);
    if (st == 0) {
        st = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
        atomic_store_explicit(&hk_mb_state, st, memory_order_relaxed);
    }
    return st > 0;
#endif
}

/* A full barrier on every running thread of the process: 1, or 0 if it failed. */
static int hk_membarrier(void) {
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

static void hk_heap_free_lists(struct hk_heap *h, void *lists[HK_LANES]);
static void hk_batch_flush_all(struct hk_heap *h);
#ifndef HK_HARDENED
static void hk_heap_give_up_partial(struct hk_heap *oh, uint64_t now);
#endif

/* What tests hold from time (hk_heap_hold): HK_HOLD_* bits. */
static _Atomic unsigned hk_held;

void hk_heap_hold(unsigned what) { atomic_store_explicit(&hk_held, what, memory_order_relaxed); }

static inline int hk_heap_holds_off(unsigned what) {
    return (atomic_load_explicit(&hk_held, memory_order_relaxed) & what) != 0;
}

/* Whether record o's owner was helped since it last took its inbox, and has run no tick for
 * HK_IDLE_MS (at time now). */
static int hk_heap_idle(struct hk_owner *o, uint64_t now) {
    uint64_t t = atomic_load_explicit(&o->last_tick, memory_order_relaxed);
    return atomic_load_explicit(&o->helped, memory_order_relaxed) && now > t &&
           now - t >= HK_IDLE_MS && !hk_heap_holds_off(HK_HOLD_IDLE);
}

/* Applies the inbox of record o, whose owner has not taken it, if the owner is not in a slow
 * path now; and lets an idle owner's partial slabs go. */
static void hk_heap_help(struct hk_owner *o) {
    unsigned free_claim = 0;
    /* seq_cst, with the load of heap below: against the exiting owner's store of NULL and its
     * load of claim (hk_heap_teardown), one of the two sides sees the other. */
    if (!atomic_compare_exchange_strong_explicit(&o->claim, &free_claim, 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return;
    struct hk_heap *oh = atomic_load_explicit(&o->heap, memory_order_seq_cst);
    if (oh == NULL) {
        atomic_store_explicit(&o->helped, 0, memory_order_relaxed); /* nothing to let go */
        atomic_store_explicit(&o->claim, 0, memory_order_release);
        return;
    }
    hk_chaos(); /* the owner may exit or enter a slow path meanwhile */
    int err = errno; /* a failed syscall must not show through malloc */
    atomic_store_explicit(&oh->claimed, 1, memory_order_relaxed);
    if (hk_membarrier() && !atomic_load_explicit(&oh->busy, memory_order_acquire)) {
        hk_chaos(); /* the owner, back in a slow path meanwhile, waits */
        void *lists[HK_LANES];
        hk_owner_take(o, lists);
        int any = 0;
        for (unsigned l = 0; l < HK_LANES; l++) any |= lists[l] != NULL;
        if (any) {
            if (HK_TRACING(HK_T_THREAD))
                hk_trace(HK_T_THREAD, "help (an idle thread's remote frees applied)", "owner@",
                         (uintptr_t)o, NULL, 0, NULL, 0);
            hk_heap_free_lists(oh, lists);
            hk_batch_flush_all(oh); /* blocks passed on to other threads */
            HK_STAT_INC(inbox_helps);
#ifndef HK_HARDENED
            atomic_store_explicit(&o->helped, 1, memory_order_relaxed);
#endif
        }
#ifndef HK_HARDENED /* whose free's fast path frees onto the slab of the entry it read */
        /* An owner that others' frees reached and that has run no slow path for a while: its
         * partial slabs, which only it allocates from, go to the orphans for any thread to
         * adopt (hk_heap_idle). */
        if (hk_heap_idle(o, hk_now_ms())) {
            hk_heap_give_up_partial(oh, hk_now_ms());
            atomic_store_explicit(&o->helped, 0, memory_order_relaxed);
        }
#endif
    }
    errno = err;
    atomic_store_explicit(&oh->claimed, 0, memory_order_release);
    atomic_store_explicit(&o->claim, 0, memory_order_release);
}

/* The scan for idle owners (see above); h is the calling thread's heap. */
static void hk_heap_help_idle(struct hk_heap *h, uint64_t now) {
    uint64_t next = atomic_load_explicit(&hk_help_next, memory_order_relaxed);
    if (now < next || !atomic_compare_exchange_strong_explicit(&hk_help_next, &next,
                                                               now + HK_HELP_MS,
                                                               memory_order_relaxed,
                                                               memory_order_relaxed))
        return;
    for (struct hk_owner *o = hk_owner_first(); o; o = o->next_all) {
        uint64_t waiting = 0;
        for (unsigned l = 0; l < HK_LANES; l++) {
            void *in = atomic_load_explicit(&o->inbox[l], memory_order_relaxed);
            waiting |= in != NULL && in != HK_INBOX_CLOSED;
        }
        uint64_t now_seen = atomic_load_explicit(&o->takes, memory_order_relaxed) * 2 + waiting;
        uint64_t was = atomic_exchange_explicit(&o->seen, now_seen, memory_order_relaxed);
        /* Blocks wait now and waited at the last scan, and the inbox was not taken since:
         * the oldest of them has waited a whole scan period. */
        /* Or nothing waits, but the owner has been idle since a help brought its slabs free
         * blocks (one burst of frees, then none). */
        if (((waiting && was == now_seen) || (!waiting && hk_heap_idle(o, now))) &&
            o != h->owner && hk_membarrier_ok() && hk_owner_trylock()) {
            hk_heap_help(o);
            hk_owner_unlock();
        }
    }
}

/* --- heap lists ----------------------------------------------------------------------------- */

/* The current slab of class c, read only where the heap may hold slabs of c (slabbed). The
 * stash and the free by slab metadata, which run for every other thread's block a thread
 * frees, test take_ok first instead, which a heap without slabs does not have: the test of
 * slabbed there cost shared_swap (2 threads) 4-8%. */
static inline struct hk_slab *hk_heap_cur(const struct hk_heap *h, unsigned c) {
    HK_ASSERT(c < HK_NCLASS);
    return h->slabbed >> c & 1 ? h->cur[c] : NULL;
}

/* Notes that the heap holds a slab of class c now. */
static inline void hk_heap_holds(struct hk_heap *h, unsigned c) {
    uint64_t was = h->slabbed, bit = (uint64_t)1 << c;
    if (HK_LIKELY(was & bit)) return; /* a slab moving between the lists: no store */
    h->slabbed = was | bit;
    hk_heap_rest_written(h);
    if (!was) hk_heap_may_take(h); /* its first: the owner's own slow path */
}

/* Partial slabs queue up oldest first: a slab that just got its first free block back waits
 * at the tail and gathers more before it is picked, instead of being picked for one block. */
static void hk_partial_append(struct hk_heap *h, struct hk_slab *s) {
    unsigned c = s->cls;
    hk_heap_holds(h, c);
    s->list = HK_LIST_PARTIAL;
    s->next = NULL;
    s->prev = h->partial_tail[c];
    if (s->prev) s->prev->next = s;
    else h->partial[c] = s;
    h->partial_tail[c] = s;
}

static void hk_partial_unlink(struct hk_heap *h, struct hk_slab *s) {
    if (h->partial_tail[s->cls] == s) h->partial_tail[s->cls] = s->prev;
    hk_slab_list_unlink(&h->partial[s->cls], s);
}

/* Puts an owned, non-current slab on its heap list (PARTIAL or FULL). A small slab gets its
 * entry in the owned-slab table, full or not: free's fast path puts the block into the cache
 * and leaves the slab as it is (it becomes partial when the block goes home). The hardened
 * build's fast path frees a block of a slab that is not current onto the slab's list, which
 * for a full slab means a move to the partial list: there a full slab has no entry, and its
 * first free takes the slow path. */
static void hk_heap_list_add(struct hk_heap *h, struct hk_slab *s, uint8_t list) {
    if (list == HK_LIST_PARTIAL) {
        hk_partial_append(h, s);
        hk_owned_set(h, s);
    } else {
        s->list = list;
        hk_heap_holds(h, s->cls);
        hk_slab_list_push(&h->full[s->cls], s);
#ifdef HK_HARDENED
        hk_owned_clear(h, s);
#else
        hk_owned_set(h, s);
#endif
    }
}

/* Bytes of the empty slabs that thread heaps keep beyond the first of each class (their
 * retained lists): a thread keeps another only while all of them together keep no more than
 * the pool's budget (hk_heap_emptied). Soft caps are a thread's, and with 16 threads whose
 * own round trips raised the caps of the 5-16 KiB classes to 4 and 8 (shared_swap), each kept
 * up to that many of each. The pool takes what they do not keep, under its own budget, and
 * serves every thread from it. The first of a class stays out of the count, so that a thread
 * that keeps one span and takes it back again (a producer whose consumers free its blocks of
 * up to 256 KiB) writes no shared line for it: counted, that cost prod_cons_256k 9%. */
static _Atomic size_t hk_kept_bytes;

/* Takes an owned, non-current slab off its heap list (and out of the owned-slab table). */
static void hk_heap_list_remove(struct hk_heap *h, struct hk_slab *s) {
    unsigned c = s->cls;
    if (s->list == HK_LIST_PARTIAL) {
        hk_partial_unlink(h, s);
    } else if (s->list == HK_LIST_FULL) {
        hk_slab_list_unlink(&h->full[c], s);
    } else if (s->list == HK_LIST_RETAINED) {
        hk_slab_list_unlink(&h->retained[c], s);
        if (h->nretained[c] >= 2) /* a class's slabs are all as long (pool.c) */
            atomic_fetch_sub_explicit(&hk_kept_bytes, hk_slab_bytes(s), memory_order_relaxed);
        if (--h->nretained[c] == 0) h->retained_mask &= ~((uint64_t)1 << c);
        hk_owner_set_retained(h->owner, c, h->nretained[c]);
    }
    s->list = HK_LIST_NONE;
    hk_owned_clear(h, s);
}

/* Makes s (or nothing) the current slab of class c and keeps the owned-slab table in step: a
 * small slab gets its entry here, a mid span its entries only at the first free to it that
 * the slow path keeps (owned.h, hk_owned_set_span). */
static void hk_heap_set_current(struct hk_heap *h, unsigned c, struct hk_slab *s) {
    struct hk_slab *was = hk_heap_cur(h, c);
    if (was) hk_owned_clear(h, was);
    if (s) hk_heap_holds(h, c);
    if (s || was) h->cur[c] = s;
    if (s) hk_owned_set(h, s);
}

/* --- retention and the tick ----------------------------------------------------------------- */

/* Slab s, off the heap's lists, is no longer the heap's. */
static void hk_heap_disown(struct hk_slab *s) {
    __atomic_store_n(&s->nostash, 1, __ATOMIC_RELAXED);
    atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
    s->list = HK_LIST_NONE;
}

static void hk_heap_release(struct hk_slab *s, uint64_t idle_since) {
    hk_heap_disown(s);
    hk_pool_release(s, idle_since);
}

/* When heap h's last tick ran (0: none yet). */
static inline uint64_t hk_heap_last_tick(const struct hk_heap *h) {
    return h->next_tick > HK_TICK_MS ? h->next_tick - HK_TICK_MS : 0;
}

/* Gives back kept slabs of class c: those idle since before `older` and those beyond keep;
 * to the pool, or where idle is not NULL onto that list (linked by next) for the caller to
 * hand over to the pool proper (hk_pool_release_idle). */
static void hk_heap_unretain(struct hk_heap *h, unsigned c, unsigned keep, uint64_t older,
                             struct hk_slab **idle) {
    unsigned i = 0;
    struct hk_slab *s = h->retained[c];
    while (s) {
        struct hk_slab *next = s->next;
        if (i >= keep || s->idle_since < older) {
            hk_heap_list_remove(h, s);
            if (idle) {
                hk_heap_disown(s);
                s->next = *idle;
                *idle = s;
            } else {
                hk_heap_release(s, s->idle_since);
            }
        } else {
            i++;
        }
        s = next;
    }
}

/* Before heap h takes a slab of class c from the pool: the slabs it kept before its last tick
 * of classes it has not refilled since go to the pool proper first, where this acquisition
 * or the next takes their resident pages (stage 2) instead of memory never touched. Kept
 * until the purge delay, the slabs of a phase's classes sat out the next phases, whose
 * classes faulted in slabs of their own: lua running tests/lua/garbage.lua (trees, records,
 * strings, closures, arrays in turn, one thread) peaked at 34.9 MiB with a slab or two kept
 * of each of 30 classes, mimalloc at 31.5. Not to their classes' fronts, which hold them for
 * those classes alone. A class refilled within the tick keeps what it keeps. */
static void hk_heap_unretain_idle(struct hk_heap *h, unsigned c) {
    uint64_t last = hk_heap_last_tick(h); /* kept since then: see hk_heap_keep */
    struct hk_slab *idle = NULL;
    for (uint64_t m = h->retained_mask & ~h->refilled & ~((uint64_t)1 << c); m; m &= m - 1)
        hk_heap_unretain(h, (unsigned)__builtin_ctzll(m), UINT_MAX, last, &idle);
    hk_pool_release_idle(idle);
}

static void hk_heap_emptied(struct hk_heap *h, struct hk_slab *s);

/* Soft caps rise for round trips that keeping would have saved: a slab of a class that the
 * thread itself gave up past the cap (hk_heap_emptied) and took again from the pool within
 * HK_GAVE_UP_MS (two of ACE's windows). Counted for the whole process before, a slab that one
 * thread emptied and another took (the pool's fronts serve that) raised every thread's cap:
 * with 16 threads sharing blocks (shared_swap) each kept up to 8 slabs of the 10-16 KiB
 * classes. */
#define HK_GAVE_UP_MS 200
static HK_COLD void hk_heap_retaken(struct hk_heap *h, unsigned c) {
    h->gave_up &= ~((uint64_t)1 << c);
    if (hk_now_ms() - h->gave_up_at < HK_GAVE_UP_MS) hk_pool_retaken(c);
}

/* Empty slabs of class c heap h keeps when one empties: the soft cap; and for a mid class
 * whose cap is 0, one span that other threads' frees emptied while the thread applied its
 * inbox, until a tick finds it kept before the last one (10 to 20 ms: hk_heap_tick). A
 * producer whose consumers empty its spans takes them back from here, not through the
 * class's front, where with 16 threads and blocks up to 256 KiB that round trip came with
 * 60,000-70,000 pool acquisitions per 100,000 blocks. Spans a thread empties itself are not
 * kept: another class may reuse their slots (large_4m's peak RSS rose by 40% when they were). */
static inline unsigned hk_heap_keep(const struct hk_heap *h, unsigned c) {
    if (!(h->allocated >> c & 1)) return 0; /* slabs taken in by a thread that only frees */
    unsigned cap = hk_pol_soft_cap(c);
    return cap || c < HK_NSMALL || !h->draining ? cap : 1;
}

static void hk_free_home(struct hk_heap *h, struct hk_slab *s, void *p);

/* Frees the blocks of a list to their slabs, none kept in the stash. */
static void hk_heap_send_home(struct hk_heap *h, void *b) {
    while (b) {
        void *next = hk_link_get(b);
        hk_free_home(h, hk_slab_of((uintptr_t)b), b);
        b = next;
    }
}

#ifndef HK_HARDENED
/* Sends the blocks of transfer lists (a list, marked free) home, to their owners or orphans
 * (not back onto a list). */
static void hk_heap_xfer_home(struct hk_heap *h, void *b) {
    if (!b) return;
    uint8_t was = h->no_xfer;
    h->no_xfer = 1;
    hk_heap_send_home(h, b);
    h->no_xfer = was;
}

/* Sends class c's pending blocks (hk_xpend_add) to its transfer list, or home where the list
 * has no room for them or none is used now (trim). */
static void hk_xpend_flush(struct hk_heap *h, unsigned c) {
    unsigned i = c - HK_XFER_FIRST;
    void *head = h->xpend[i], *tail = head;
    uint32_t n = h->xpend_n[i];
    h->xpend[i] = NULL;
    h->xpend_n[i] = 0;
    h->xpend_mask &= ~((uint64_t)1 << c);
    if (!head) return;
    for (uint32_t k = 1; k < n; k++) tail = hk_link_get(tail);
    if (h->no_xfer || !hk_xfer_put(c, head, tail, n)) hk_heap_xfer_home(h, head);
}

/* Sends every class's pending blocks on, but those of the classes in keep. */
static void hk_xpend_flush_all(struct hk_heap *h, uint64_t keep) {
    for (uint64_t m = h->xpend_mask & ~keep; m; m &= m - 1)
        hk_xpend_flush(h, (unsigned)__builtin_ctzll(m));
}

/* Block p of small class c (HK_XFER_FIRST or above), another live thread's, that the calling
 * thread's stash has no room for, where the thread allocates the class: it joins the others
 * of its class on their way to the class's transfer list, which takes them with one lock at
 * HK_XFER_BATCH blocks or HK_BATCH_BYTES bytes, at the thread's next refill of another class,
 * its tick, a trim and its exit; its own next refill of c takes them back itself. Sent home
 * to their owners, such blocks waited on the owners' slabs until their current slabs ran out:
 * shared_swap with 16 threads on 2 cores, a class of 16 KiB blocks held 150 slabs in the
 * middle of a run for some 35 slabs' worth of live blocks. */
static void hk_xpend_add(struct hk_heap *h, unsigned c, void *p) {
    unsigned i = c - HK_XFER_FIRST;
    hk_heap_rest_written(h);
    hk_block_push(&h->xpend[i], p);
    h->xpend_mask |= (uint64_t)1 << c;
    uint32_t n = ++h->xpend_n[i];
    if (n >= HK_XFER_BATCH || n * hk_class_size[c] >= HK_BATCH_BYTES) hk_xpend_flush(h, c);
}
#endif

/* Slab s, owned and full, has got a block back: it goes to the partial list and gets its
 * table entry back. A helper leaves the table alone (free's fast path reads it without a
 * lock, heap.h): the owner's next free to the slab sets its entry. */
static HK_NOINLINE void hk_heap_unfull(struct hk_heap *h, struct hk_slab *s) {
    hk_slab_list_unlink(&h->full[s->cls], s);
    hk_partial_append(h, s);
    if (h == hk_tls.heap) hk_owned_set(h, s);
}

/* An owner no slab has: compared with, never followed. */
#define HK_NOBODY ((struct hk_owner *)(uintptr_t)1)

/* Slabs a walk of the cache may empty before it leaves the rest to hk_heap_send_home. */
#define HK_SEND_EMPTIED 16
/* Full slabs a walk's first step may free to (HK_LIST_FULL_FREED) before it leaves the
 * blocks of others to the second step. */
#define HK_WALK_FULL 32

/* A walk home of cached blocks (hk_heap_cache_send, hk_heap_torn_walk): the blocks of the
 * owner me's slabs go onto their slabs' lists at once, the slabs that empty or stop being
 * full are dealt with after the walk, and the rest (other threads', a mid span's) are
 * gathered in away.
 * A walk goes in two steps: the first takes the common blocks (hk_walk_fast) and sets the
 * others aside in rare, which the second takes one by one (hk_walk_mine). The first calls
 * nothing, so that its loop keeps its values in registers: with hk_walk_mine's calls in it
 * (hk_heap_unfull, hk_list_joins_new), gcc kept the owner, the tag and the next link on the
 * stack, and a block cost 47 instructions (phases under callgrind). */
struct hk_walk {
    struct hk_owner *me; /* HK_NOBODY: no block goes to its slab on the way */
    void *away;
    void *rare; /* blocks the first step left to the second */
    unsigned ne, nf;
    struct hk_slab *emptied[HK_SEND_EMPTIED];
    struct hk_slab *full[HK_WALK_FULL]; /* full slabs the first step freed to */
};

static inline void hk_walk_start(struct hk_walk *w, struct hk_owner *me) {
    w->me = me;
    w->away = NULL;
    w->rare = NULL;
    w->ne = 0;
    w->nf = 0;
}

#ifndef HK_HARDENED
/* A run of a walk's first step (hk_walk_fast): b, of small slab s, and the blocks after it on
 * its list that lie in s, up to kmax (at least 1) in all, onto s's list. Their bits are set
 * and the run, linked already, is spliced on. *took: the blocks taken; returns the block after
 * them. Out of line, so that the walk's loop keeps its own values in registers, and this
 * loop its own: inlined, gcc kept the class size's inverse on the stack. */
static HK_NOINLINE void *hk_walk_run(struct hk_slab *s, void *b, uint32_t kmax, uint32_t *took) {
    uint64_t *bits = hk_list_bits(b), inv = s->inv;
    uint32_t k = 0;
    void *x = b, *next;
    for (;;) {
        hk_list_bit_in(bits, inv, x);
        next = hk_link_get(x);
        if (++k == kmax || ((uintptr_t)next ^ (uintptr_t)x) >> HK_SLAB_SHIFT) break;
        x = next;
    }
    hk_link_set(x, s->free);
    s->free = b;
    s->used -= k;
    *took = k;
    return next;
}
#endif

/* The first step of a walk, from block b of a list: if b is of one of me's small slabs whose
 * list is of the tag's own frees (superslab.h, hk_list_key; tag is h->tag), b and the blocks
 * after it on the list that lie in the same slab, up to max in all and short of emptying the
 * slab, go onto the slab's list at once (hk_walk_run where there are several); a full slab
 * is noted, to go to the partial list at the walk's end (hk_walk_end), up to HK_WALK_FULL of
 * them; else b alone goes to away if another thread owns its slab, or is set aside for the
 * second step. *took: the blocks taken or set aside; returns the block after them.
 * A collector's sweep frees into slabs its program filled since the last one: lua5.4
 * (tests/lua/garbage.lua) set 2.5 M of its 13 M frees aside for the full slab alone, 0.2 G
 * instructions of its allocator's 1.55 G.
 * Where a program frees its objects in the order it made them (a collector's sweep, a
 * structure taken apart), 92-96% of the blocks a walk takes lie in the slab of the block
 * before them (phases, bench/sweep, lua5.4's trees and tables): a run's blocks are linked
 * already, so the run is spliced onto the slab's list, and its slab is tested once. */
static inline void *hk_walk_fast(struct hk_walk *w, void *b, uint32_t max, uint32_t *took,
                                 struct hk_owner *me, uint8_t tag) {
    void *next = hk_link_get(b);
#ifndef HK_HARDENED /* whose lists carry the tag alone: every block takes the second step */
    struct hk_slab *s = hk_slot_of((uintptr_t)b);
    __asm__("" : "+r"(s)); /* one register for s: gcc would derive it twice */
    /* The owner first: another thread's slab may be changing under its lock. */
    struct hk_owner *o = atomic_load_explicit(&s->owner, memory_order_relaxed);
    uint32_t used;
    if (HK_LIKELY(o == me && hk_list_key(s) == tag && (used = s->used) > 1)) {
        if (HK_UNLIKELY(s->list == HK_LIST_FULL)) { /* off the full list at the walk's end */
            if (w->nf == HK_WALK_FULL) goto aside;
            s->list = HK_LIST_FULL_FREED;
            w->full[w->nf++] = s;
        }
        if (!(((uintptr_t)next ^ (uintptr_t)b) >> HK_SLAB_SHIFT))
            return hk_walk_run(s, b, used - 1 < max ? used - 1 : max, took);
        hk_list_bit(s, b);
        hk_link_set(b, s->free);
        s->free = b;
        s->used = used - 1;
        *took = 1;
        return next;
    }
    if (o != me && me != HK_NOBODY) { /* another's block: hk_walk_mine would refuse it */
        hk_link_set(b, w->away);
        w->away = b;
        *took = 1;
        return next;
    }
aside:
#else
    (void)max, (void)me, (void)tag;
#endif
    hk_link_set(b, w->rare);
    w->rare = b;
    *took = 1;
    return next;
}

/* Block b of the walk w, of a small slab if its owner is w->me: onto that slab's list, and 1;
 * else 0, and nothing done. Only this thread makes a slab it owns another's (teardown), so a
 * slab whose owner is this thread stays its own throughout. tag is h->tag, which the caller
 * loads once: read here, it was loaded again for every block, since any store may change a
 * byte. */
static inline int hk_walk_mine(struct hk_heap *h, struct hk_walk *w, void *b, uint8_t tag) {
    struct hk_slab *s = hk_slot_of((uintptr_t)b);
    __asm__("" : "+r"(s)); /* one register for s: gcc would derive it twice */
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) != w->me) return 0;
    hk_list_joins(s, tag, b);
    hk_link_set(b, s->free);
    s->free = b;
    if (--s->used == 0) {
        /* A current slab stays current when it empties. */
        if (s->list != HK_LIST_CURRENT) w->emptied[w->ne++] = s;
        if (w->ne == HK_SEND_EMPTIED) w->me = HK_NOBODY; /* the rest as a mid class's */
    } else if (s->list == HK_LIST_FULL) {
        hk_heap_unfull(h, s);
    }
    return 1;
}

/* After walk w: the full slabs its first step freed to go to the partial list, then the
 * slabs that emptied and the blocks gathered in away go home. That may run the tick, which
 * may let a current slab go or send a cache home. */
static inline void hk_walk_end(struct hk_heap *h, struct hk_walk *w) {
    /* First, since one may have emptied since. HK_LIST_FULL_FREED is on the full list, which
     * hk_heap_unfull takes it off without reading s->list. */
    for (unsigned i = 0; i < w->nf; i++) hk_heap_unfull(h, w->full[i]);
    for (unsigned i = 0; i < w->ne; i++) hk_heap_emptied(h, w->emptied[i]);
    hk_heap_send_home(h, w->away);
}

/* Frees the first `limit` blocks of list *from, taken from the cache of class c, and leaves
 * *from at the rest before anything else: blocks of the current slab go back onto
 * its free list, those of the thread's other small slabs onto theirs, in the same walk, and
 * the rest (other threads', a mid span's) to their slabs. The cache's blocks were validated
 * when they were freed into it, and a small slab is its own slot's head, so the walk frees
 * them with no more than the slab's owner to look at: a thread that frees more than it
 * allocates (a data structure torn down) sends every block through here, and the walk was
 * 55 instructions a block, then 34, and 26 since the owner's test comes first and serves the
 * current slab too (the range test is left for a mid class, whose slots are not their
 * slabs' heads). Slabs that empty are dealt with after the walk: that may run the tick,
 * which may let the current slab go or send the cache home. */
static void hk_heap_cache_send(struct hk_heap *h, unsigned c, void **from, uint32_t limit) {
    struct hk_slab *cur = hk_heap_cur(h, c);
    struct hk_owner *me = h->owner;
    const uint8_t tag = h->tag;
    uintptr_t base = 0, span = 0;
    void *b = *from;
    uint32_t n = 0;
    if (cur) {
        base = (uintptr_t)hk_slab_base(cur);
        span = hk_slab_bytes(cur);
        /* The current slab's blocks at the top (often the whole list) go back as they are
         * linked. */
        void *tail = NULL;
        for (void *x = b; x && n < limit && (uintptr_t)x - base < span; x = hk_link_get(x)) {
            hk_list_joins(cur, tag, x);
            tail = x;
            n++;
        }
        if (tail) {
            void *rest = hk_link_get(tail);
            hk_link_set(tail, cur->free);
            cur->free = b;
            b = rest;
        }
    }
    limit -= n;
    /* Blocks in a cache carry the free mark already: they are relinked, not marked again. */
    struct hk_walk w; /* emptied[] is written before it is read */
    hk_walk_start(&w, c >= HK_NSMALL || !me ? HK_NOBODY : me);
    while (b && limit) {
        uint32_t k;
        b = hk_walk_fast(&w, b, limit, &k, w.me, tag);
        limit -= k;
    }
    for (void *x = w.rare, *next; x; x = next) {
        next = hk_link_get(x);
        if (hk_walk_mine(h, &w, x, tag)) {
            /* onto its slab's list */
        } else if ((uintptr_t)x - base < span) {
            hk_list_joins(cur, tag, x);
            hk_link_set(x, cur->free);
            cur->free = x;
            n++;
        } else {
            hk_link_set(x, w.away);
            w.away = x;
        }
    }
    *from = b;
    if (cur) cur->used -= n;
    hk_walk_end(h, &w);
}

#ifndef HK_HARDENED
/* Sends home the cache of class c, torn down (hk_heap_cache_full), and with it those of the
 * other classes torn down that malloc took nothing of since (h->torn), each of which then
 * starts a torn-down class's room again; the lists are walked a block of each in turn. A
 * walk of one list waits for each link to load before it reads the next, and where a thread
 * frees blocks of several classes in turn, a class's blocks were freed up to a few hundred
 * frees before, their lines in the second-level cache by then: the lists' loads are in
 * flight together here. teardown 500000 4 16 128 random 42 (8 classes): 30.2 ns a free
 * before, 28.0 now (mimalloc 24.5), 1.02-1.05 times as fast; blocks freed in the order
 * they were made, and phases 3 20 80 42, level (0.98-1.00); one class, as before (one list,
 * walked by hk_heap_cache_send). */
static void hk_heap_torn_walk(struct hk_heap *h, unsigned c) {
    void *at[HK_NSMALL];
    unsigned n = 0;
    for (uint64_t m = h->torn & ~((uint64_t)1 << c); m && h->owner; m &= m - 1) {
        unsigned t = (unsigned)__builtin_ctzll(m);
        if (!h->free[t] || h->taken[t] != 0) continue;
        h->beat_left -= (intptr_t)hk_room_used(h, t); /* the frees its room took */
        hk_room_set(h, t, hk_room_torn(h, t));
        at[n++] = h->free[t];
        h->free[t] = NULL;
    }
    if (n == 0) {
        hk_heap_cache_send(h, c, &h->free[c], UINT32_MAX);
        return;
    }
    if (h->free[c]) at[n++] = h->free[c];
    h->free[c] = NULL;
    struct hk_walk w;
    struct hk_owner *me = h->owner;
    const uint8_t tag = h->tag;
    hk_walk_start(&w, me);
    while (n) {
        unsigned left = 0; /* lists not done, kept in order at the front */
        for (unsigned i = 0; i < n; i++) {
            uint32_t k;
            void *next = hk_walk_fast(&w, at[i], UINT32_MAX, &k, me, tag);
            at[left] = next;
            left += next != NULL;
        }
        n = left;
    }
    for (void *b = w.rare, *next; b; b = next) {
        next = hk_link_get(b);
        if (!hk_walk_mine(h, &w, b, tag)) {
            hk_link_set(b, w.away);
            w.away = b;
        }
    }
    hk_walk_end(h, &w);
}
#endif

#ifndef HK_HARDENED
/* --- side lists ------------------------------------------------------------------------------
 * A class torn down (hk_heap_cache_full: a room's worth of frees and no malloc of it) is freed
 * one block at a time into the cache and walked home from there, about 45 instructions a
 * block (teardown, in random order) beside free's 19: the walk finds each block's slab again,
 * tests its owner, tag and list, and sets its bit. So the slabs of such a class get side
 * lists (side.h): their owned-slab entries lead free's fast path to a list of the slab's own,
 * and to the count of the blocks it has left live, which the push counts down; at 0 the slab
 * is empty, and goes as any slab that empties, to be carved afresh when taken again. A block
 * on a side list is free, marked as in the cache, and counted in its slab's used as a cached
 * block is: no slab empties under it, nor goes to another thread.
 * - Taken (hk_side_arm) for the class's slabs, current, partial and full, that hold their
 *   entry and HK_SIDE_MIN live blocks or more, as long as slots are free.
 * - Given back (hk_side_disarm) when the thread refills the class (malloc wants it again),
 *   when its cache goes (a trim, the tick, thread exit), and one by one as slabs empty. The
 *   list joins the slab's free list, its blocks' bits set where that is a list of the
 *   thread's own (so that malloc takes it in address order, hk_list_in_order), and a full
 *   slab goes partial.
 * - A helper (see "Idle owners") lets no slab with a slot go, and gives back the slot of a
 *   slab it empties: such a slab has no block on its side list, and no free of the owner's
 *   can push one (every block of it is free).
 * The thread's own frees of such a slab on a slow path (another slab held its table entry)
 * go onto the side list too (hk_side_free). Other frees of it (other threads', walks of the
 * cache) go to its free list and its used as before, and leave the side list's count as it
 * was, which then does not reach 0: the slab empties when its slot is given back. */
#define HK_SIDE_MIN 2

int hk_side_off;

/* A side list that joins a list of the thread's own: its blocks get their bits on the way. */
struct hk_side_walk {
    struct hk_slab *s;
    void *at, *head;
    uint64_t *bits;
    uint32_t inv, left;
};

/* Gives back slot i of the calling thread's heap h: the slab's entry leads to the class's
 * cache again, and the blocks on the side list join the slab's free list, or, where that is a
 * list of the thread's own, are left to the caller in *w to walk (hk_side_walk_step), so that
 * it may walk several lists together. Returns 0 if the side list was empty (the slab stays
 * as it was), 1 if it joined, 2 if it is left in *w; the slab may then have to change lists
 * (hk_side_settle). */
static int hk_side_drop(struct hk_heap *h, unsigned i, struct hk_side_walk *w) {
    struct hk_side *d = h->side;
    void **head = hk_side_head(d, i), *l = *head;
    struct hk_slab *s = d->slab[i];
    uint32_t pushed = d->armed[i] - (uint32_t)*hk_side_left(d, i);
    hk_side_give(d, i);
    HK_ASSERT(s->side == i + 1);
    s->side = 0;
    struct hk_owned *e = hk_owned_entry(h, s);
    if (*hk_owned_holder(h, e) == s && e->head == head) {
        /* Free's fast path tests the room for 0 only (hk_owned_set). */
        if (h->room[s->cls] <= 0) hk_room_set(h, s->cls, hk_room_full(h, s->cls));
        e->head = &h->free[s->cls];
    }
    if (!l) return 0;
    uint32_t onlist = s->carved - s->used; /* the blocks on its free list */
    HK_ASSERT(pushed >= 1 && pushed <= s->used);
    s->used -= pushed;
    if (s->used == 0 && s->list != HK_LIST_CURRENT) {
        /* Empty, and kept or given back: carved afresh when taken again, in address order,
         * as a formatted slab is (the lists' order is lost; no block of it is live, and no
         * entry admits it once it has emptied). */
        hk_slab_uncarve(s);
        return 1;
    }
    if (!s->free) hk_list_joins_new(s, h->tag); /* a new list of the thread's own */
    if (hk_list_key(s) == h->tag) {
        /* A list of the thread's own, bitmap and all: the side list's blocks get their bits,
         * as a walk home sets them, so that malloc takes the list in address order (a sweep
         * that frees half of its objects, bench/sweep, ran 0.62 times as fast with the lists
         * as they lay). */
        *w = (struct hk_side_walk){s, l, l, hk_list_bits(l), s->inv, pushed};
        return 2;
    }
    /* Another's list: the shorter of the two is walked to its tail, and the list is taken
     * as it lies. */
    if (!s->free) {
        s->free = l;
    } else if (pushed <= onlist) {
        void *t = l;
        for (uint32_t k = 1; k < pushed; k++) t = hk_link_get(t);
        HK_ASSERT(hk_link_get(t) == NULL);
        hk_link_set(t, s->free);
        s->free = l;
    } else {
        void *t = s->free;
        for (uint32_t k = 1; k < onlist; k++) t = hk_link_get(t);
        HK_ASSERT(hk_link_get(t) == NULL);
        hk_link_set(t, l);
    }
    s->list_tag = 0;
    return 1;
}

/* A step of walk w: the block at hand gets its bit; at the list's last, the list joins its
 * slab's and 1 is returned. */
static inline int hk_side_walk_step(struct hk_side_walk *w) {
    hk_list_bit_in(w->bits, w->inv, w->at);
    if (--w->left != 0) {
        w->at = hk_link_get(w->at);
        return 0;
    }
    HK_ASSERT(hk_link_get(w->at) == NULL);
    hk_link_set(w->at, w->s->free);
    w->s->free = w->head;
    return 1;
}

/* Slab s, whose side list has just joined its free list: an empty slab goes as any does, a
 * full one goes partial. A current slab stays current. */
static void hk_side_settle(struct hk_heap *h, struct hk_slab *s) {
    if (s->list == HK_LIST_CURRENT) return;
    if (s->used == 0) hk_heap_emptied(h, s);
    else if (s->list == HK_LIST_FULL) hk_heap_unfull(h, s);
}

/* Gives back the slots of class c's slabs (all with UINT32_MAX), HK_SIDE_BATCH at a time (a
 * batch's walks take 1.3 KiB of the stack, where a thread's may be 16 KiB in all).
 * The side lists that get bits are walked a block of each in turn, so that their loads are in
 * flight together: they were freed long before (a sweep's, all over the heap), and walked one
 * after the other, each link waits for the one before it (bench/sweep: a fifth of the run).
 * The slabs are settled after the walks; that may run the tick, which may give back slots
 * too, so each slot is looked at as it is reached. */
#define HK_SIDE_BATCH 32
/* Blocks of a batch's side lists below which they are walked one list at a time: lines freed
 * so few frees before are still in this core's caches, and a walk of several lists in turn
 * keeps its state in memory (lua5.4 tests/lua/garbage.lua: 1.197 G instructions of the
 * allocator's with every batch walked in turn, 1.135 G with this bound). */
#define HK_SIDE_TOGETHER 4096u
static void hk_side_disarm(struct hk_heap *h, unsigned c) {
    struct hk_side *d = h->side;
    if (c == UINT32_MAX) h->side_classes = 0;
    else h->side_classes &= ~((uint64_t)1 << c);
    for (unsigned i = 0; i < HK_SIDE_SLOTS;) {
        struct hk_side_walk w[HK_SIDE_BATCH];
        struct hk_slab *joined[HK_SIDE_BATCH];
        unsigned nw = 0, nj = 0;
        for (; i < HK_SIDE_SLOTS && nj + nw < HK_SIDE_BATCH; i++) {
            if (!d->taken[i >> 6]) {
                i |= 63;
                continue;
            }
            if (!hk_side_in_use(d, i) || (c != UINT32_MAX && d->cls[i] != c)) continue;
            int r = hk_side_drop(h, i, &w[nw]);
            if (r == 1) joined[nj++] = d->slab[i];
            nw += r == 2;
        }
        uint32_t blocks = 0;
        for (unsigned k = 0; k < nw; k++) blocks += w[k].left;
        while (nw > 1 && blocks >= HK_SIDE_TOGETHER) {
            for (unsigned k = 0; k < nw;) {
                if (hk_side_walk_step(&w[k])) {
                    joined[nj++] = w[k].s;
                    w[k] = w[--nw];
                } else {
                    k++;
                }
            }
        }
        for (unsigned k = 0; k < nw; k++) { /* one at a time: its loop keeps it in registers */
            struct hk_side_walk v = w[k];
            while (!hk_side_walk_step(&v)) {}
            joined[nj++] = v.s;
        }
        for (unsigned k = 0; k < nj; k++) hk_side_settle(h, joined[k]);
    }
}

/* Slab s has emptied with a slot (its side list is empty): the slot goes back. Also a
 * helper's, for the owner's heap h. */
static void hk_side_forget(struct hk_heap *h, struct hk_slab *s) {
    unsigned i = s->side - 1u;
    HK_ASSERT(h->side && hk_side_in_use(h->side, i) && h->side->slab[i] == s);
    HK_ASSERT(*hk_side_head(h->side, i) == NULL);
    hk_side_give(h->side, i);
    s->side = 0;
}

/* Takes a slot for slab s of class c, if it should have one: 0 when none is free. */
static int hk_side_arm_one(struct hk_heap *h, struct hk_slab *s, unsigned c) {
    if (s->side || s->used < HK_SIDE_MIN) return 1;
    struct hk_owned *e = hk_owned_entry(h, s);
    if (*hk_owned_holder(h, e) != s || e->head != &h->free[c]) return 1;
    struct hk_side *d = h->side;
    int i = hk_side_take(d);
    if (i < 0) return 0;
    d->slab[i] = s;
    d->armed[i] = s->used;
    d->cls[i] = (uint8_t)c;
    *hk_side_head(d, (unsigned)i) = NULL;
    *hk_side_left(d, (unsigned)i) = s->used;
    s->side = (uint16_t)(i + 1);
    e->head = hk_side_head(d, (unsigned)i);
    h->side_classes |= (uint64_t)1 << c;
    return 1;
}

/* Class c is torn down, its cache just walked home: its slabs get side lists. */
static void hk_side_arm(struct hk_heap *h, unsigned c) {
    if (h->free_any || hk_tls.ftab != h->otab || hk_side_off) return; /* no entry is read */
    if (!h->side && (h->side = hk_side_map()) == NULL) return;
    struct hk_slab *s = hk_heap_cur(h, c);
    if (s && !hk_side_arm_one(h, s, c)) return;
    for (s = h->partial[c]; s; s = s->next)
        if (!hk_side_arm_one(h, s, c)) return;
    for (s = h->full[c]; s; s = s->next)
        if (!hk_side_arm_one(h, s, c)) return;
}

/* Free's fast path has pushed the last live block of a slab onto its side list (head). */
static void hk_side_full(struct hk_heap *h, void **head) {
    int i = hk_side_slot(h->side, head);
    HK_ASSERT(i >= 0);
    struct hk_slab *s = h->side->slab[i];
    struct hk_side_walk w;
    if (hk_side_drop(h, (unsigned)i, &w) == 2) /* a current slab's */
        while (!hk_side_walk_step(&w)) {}
    HK_ASSERT(s->used == 0);
    hk_side_settle(h, s);
}

/* The thread's own free of block p of slab s, which has a side list, on a slow path: the
 * slab's table entry was held by another slab, or by none (the slab that held it emptied).
 * Onto the side list, as free's fast path would have pushed it, and the entry is the slab's
 * from now on, so that its next frees take the fast path. Sent to the slab's own list as
 * before, one block a slab left the list's count above 0 for good, and the slab, every other
 * block of it on the list, did not empty until the class was allocated again: phases (arrays
 * and then small objects, in turn) held 22 MiB of such slabs through each round of arrays. */
static void hk_side_free(struct hk_heap *h, struct hk_slab *s, void *p) {
    unsigned i = s->side - 1u;
    void **head = hk_side_head(h->side, i);
    if (*hk_owned_holder(h, hk_owned_entry(h, s)) != s) hk_owned_set(h, s);
    hk_block_push(head, p);
    if (--*hk_side_left(h->side, i) == 0) hk_side_full(h, head);
}
#endif

/* Empties the cache of class c. */
static void hk_heap_uncache(struct hk_heap *h, unsigned c) {
#ifndef HK_HARDENED
    if (h->side_classes >> c & 1) hk_side_disarm(h, c);
#endif
    void *b = h->free[c];
    h->free[c] = NULL;
#ifndef HK_HARDENED
    hk_room_set(h, c, hk_room_full(h, c));
    h->torn &= ~((uint64_t)1 << c);
#endif
    if (b) hk_heap_cache_send(h, c, &b, UINT32_MAX);
    h->mid_kept &= ~((uint64_t)1 << c); /* set again below while its span has entries */
    /* A current mid span whose blocks all came home (the thread's own block kept for a malloc
     * to come, hk_mid_keep) goes as it would have gone at that block's free (hk_local_free_by),
     * not with the quiet classes a purge delay later. */
    struct hk_slab *s = hk_heap_cur(h, c);
    if (c >= HK_NSMALL && s && s->used == 0) {
        hk_heap_set_current(h, c, NULL);
        hk_heap_emptied(h, s);
    } else if (c >= HK_NSMALL && s && s->entered) {
        h->mid_kept |= (uint64_t)1 << c; /* free's fast path keeps its blocks still */
    }
}

/* The classes whose cache may hold blocks: those the thread refilled (allocated) or holds
 * slabs of (slabbed). Frees push into a cache for the table's slabs and, stashed, while the
 * class has a current slab; every other way in is a refill. Walking these by bit, not all 64
 * classes, saved a new thread's first tick 320 instructions and its exit 300 (crowd). */
static inline uint64_t hk_heap_cache_classes(const struct hk_heap *h) {
    return h->allocated | h->slabbed;
}

/* Loads every block of every class's cache, the classes' lists a step each in turn, so that
 * the walks that send them home find them in this core's cache. A cache a refill filled
 * with a slab's whole free list holds blocks other threads freed long ago, and a walk of one
 * list waits for each link in turn: in larson with a new thread every 1,000 replacements, an
 * exiting thread's caches held 750 blocks (2 threads) to 1,230 (16 threads on 2 cores), and
 * their walk took 46% of the time with 16 threads. With the lists' loads in flight together
 * it took 15%, and the program ran 1.09x (2 threads) and 1.27x (16) as fast. */
static uint64_t hk_heap_caches_load(struct hk_heap *h) {
    void *at[HK_NCLASS];
    unsigned n = 0;
    uint64_t held = 0;
    for (uint64_t m = hk_heap_cache_classes(h); m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        if (h->free[c]) {
            at[n++] = h->free[c];
            held |= (uint64_t)1 << c;
        }
    }
    /* At most 8,192 blocks a list (a slab's whole free list is 4,096 at most): one that a
     * write to a freed block made into a loop must not hold the thread here; the walk after
     * this one goes on as it did before the loads. */
    for (uint32_t step = 0; n && step < 8192; step++) {
        for (unsigned i = 0; i < n;) {
            void *next = hk_link_get(at[i]);
            __asm__ volatile("" : : "r"(next)); /* a loop without effects may be dropped */
            if (next) at[i++] = next;
            else at[i] = at[--n]; /* that list is done */
        }
    }
    return held;
}

/* The mid classes but those of `keep` start over (hk_mid_keep): their current spans lose
 * their entries (owned.h, hk_owned_admits), and the thread keeps no block of them until it
 * shows reuse again. At a tick, a class kept is one refilled since the last tick or one that
 * may keep blocks (mid_kept: set with its span's entries, and cleared when its cache goes
 * home and its current span has none, or when it is found empty beside another class's keep:
 * kept then while the span has entries, the sends home before large requests lifted the
 * peak of waves 8 32 100 42 from 48.6 to 50.5 MiB, and lowered that of large 20000 64 4096
 * 4 42 from 32.2 to 31.0); at a trim or exit, none. */
static void hk_mid_reuse_keep(struct hk_heap *h, uint64_t keep) {
    uint64_t lost = h->mid_reuse & ~keep;
    h->mid_reuse &= keep;
    for (; lost; lost &= lost - 1) {
        struct hk_slab *s = hk_heap_cur(h, (unsigned)__builtin_ctzll(lost));
        if (s) hk_owned_clear(h, s);
    }
}

/* Empties every class's cache and sets its room back to the first one: the thread gives
 * everything back (trim, flush, exit). A class the thread never refilled, whose cache is empty
 * and whose room has not grown or been cut has nothing to give back: skipped. A thread that
 * took a few blocks of a few classes and exits (crowd: 1,000 threads of 8 blocks each) walked
 * all 64 classes at about 140 instructions each. */
static void hk_heap_uncache_all(struct hk_heap *h) {
    uint64_t m = h->allocated | hk_heap_caches_load(h);
#ifndef HK_HARDENED
    m |= h->room_sent;
    if (h->side_classes) hk_side_disarm(h, UINT32_MAX);
#endif
    for (; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        hk_room_reset(h, c);
        hk_heap_uncache(h, c);
    }
    h->mid_kept = h->mid_freed = 0;
    hk_mid_reuse_keep(h, 0);
}

#ifndef HK_HARDENED
/* The cache has taken a room's worth of frees since its room was last set. malloc's fast path
 * counts what it takes in taken[c], apart from the room: a count that free and malloc both
 * change would chain every free to the malloc before it through memory (tight 32 ran 9%
 * slower with one). Here those blocks are given back as room (at most the full room). If that
 * leaves none, malloc took nothing of the class meanwhile: the thread is freeing it, not
 * reusing it (a structure torn down). Then, for a class whose full room is HK_ROOM_SMALL
 * blocks or more (blocks of 512 bytes or less), the whole cache goes home in one walk, and the
 * room is an eighth of the full one, HK_ROOM_TORN blocks at most (heap.h), until malloc takes
 * blocks again (a refill sets it whole).
 * Each walk then takes blocks freed so recently that their lines are still in this core's
 * cache, and when the frees stop, few blocks wait in the cache, each keeping a slab from
 * emptying that would else be carved afresh, in address order: teardown 2000000 5, with the
 * newest half of a full room sent home instead, took 35 ns a malloc and 46 a free, now 24 and
 * 41. A class of bigger blocks has a room of a few blocks, whose eighth would be the whole:
 * there the newest half goes and the older half stays for the mallocs to come (scatter, which
 * frees and then allocates a hundred blocks of up to 16 KiB at a time, ran 5% slower when
 * those classes sent everything home too). */
#define HK_ROOM_SMALL 64u

/* The room of a class the thread has never allocated, after a walk: it frees slabs it took
 * over or took in (hk_heap_take_in) and never reuses a block of them, so the cache only
 * gathers blocks for the walk, and what it holds when the frees stop keeps their slabs from
 * emptying while other threads want the memory (teardown 500000 4 16 128 random 42 1, a new
 * thread a round: a peak of 56 MiB with an eighth of the full room, 48 with 16 blocks, 46
 * with 8, at the same speed; 44 when the blocks went through the orphans). */
#define HK_ROOM_FREER 8u

static void hk_heap_tick_if_due(struct hk_heap *h);

/* A class torn down (a walk above sent its cache home while malloc took nothing of it, and
 * left it a room of HK_ROOM_TORN blocks) that malloc takes blocks of again, where the
 * thread has gone from freeing to allocating: what its cache holds still are the teardown's
 * last blocks, each of another slab, and each one malloc hands out keeps its slab from
 * emptying for as long as it lives. malloc then takes those slabs' free lists, in the order
 * the teardown left them, a block anywhere in the slab each time (a miss each), where a slab
 * that empties is carved afresh, in address order. So at the next refill of any other class
 * (hk_heap_refill) the rest of such a cache goes home, and the slabs of those not yet handed
 * out empty. teardown 500000 8 16 128 random 42: 20.0 ns a malloc before, 18.1 now (mimalloc
 * 18.3); those of the refilled class itself are all handed out by then. A class still torn
 * down (malloc took nothing of it since) keeps its cache. */
static void hk_heap_torn_home(struct hk_heap *h, unsigned c) {
    h->torn &= ~((uint64_t)1 << c);
    for (uint64_t m = h->torn; m; m &= m - 1) {
        unsigned t = (unsigned)__builtin_ctzll(m);
        if (h->taken[t] == 0) continue; /* a room of HK_ROOM_TORN puts nothing aside there */
        h->torn &= ~((uint64_t)1 << t);
        if (h->free[t]) hk_heap_cache_send(h, t, &h->free[t], UINT32_MAX);
    }
}
_Static_assert(HK_ROOM_TORN <= HK_ROOM_BEAT, "a torn-down class's room is all on free's counter");

static void hk_mid_room_out(struct hk_heap *h, unsigned c, void **head);
static unsigned hk_mid_cached(void **head, unsigned c, unsigned full);

/* hk_heap_cache_full's whole way, with the heap entered. */
static HK_NOINLINE void hk_heap_cache_out(struct hk_heap *h, void **head) {
    hk_heap_enter(h);
    if (HK_UNLIKELY((uintptr_t)head - (uintptr_t)h->free >= sizeof h->free)) {
        hk_side_full(h, head); /* a side list's slab has emptied */
        hk_heap_leave(h);
        return;
    }
    unsigned c = (unsigned)(head - h->free);
    h->beat_left -= h->room_given[c]; /* the frees this room took */
    if (c >= HK_NSMALL) {
        hk_mid_room_out(h, c, head);
    } else if (hk_room_make_up(h, c) == 0) {
        unsigned full = hk_room_full(h, c);
        h->room_sent |= (uint64_t)1 << c; /* a refill of c before the next one grows the room */
        if (!(h->allocated >> c & 1)) {
            hk_room_set(h, c, full < HK_ROOM_FREER ? full : HK_ROOM_FREER);
            hk_heap_cache_send(h, c, head, UINT32_MAX);
        } else if (hk_room_max[c] >= HK_ROOM_SMALL) {
            hk_room_set(h, c, hk_room_torn(h, c));
            h->torn |= (uint64_t)1 << c;
            hk_heap_torn_walk(h, c);
            hk_side_arm(h, c);
        } else {
            hk_room_set(h, c, full / 2u);
            hk_heap_cache_send(h, c, head, full / 2u);
        }
    } else {
        h->torn &= ~((uint64_t)1 << c); /* malloc took blocks meanwhile: reused again */
    }
    HK_ASSERT(h->room[c] > 0);
    /* A thread whose mallocs and frees of a class balance takes no refill, no stash and no
     * batch: this may be its only slow path. So it looks at the clock once the rooms that ran
     * out here took HK_ROOM_BEAT frees since the last look (a vDSO read of about 5 ns; at
     * every call, a thread tearing down another's blocks, whose rooms are 8, ran 6% slower),
     * and memory kept idle goes back on time while the program lives on its cache. */
    if (h->beat_left <= 0 && h->owner && !h->exiting) {
        h->beat_left = HK_ROOM_BEAT;
        hk_heap_tick_if_due(h);
    }
    hk_heap_leave(h);
}

/* Most rooms that run out are only set again: malloc took blocks of the small class since
 * (hk_room_make_up), or the mid class's cache holds less than its full room and no other mid
 * class keeps blocks (hk_mid_room_out); and the clock is not due (HK_ROOM_BEAT). That is done
 * here, without hk_heap_cache_out's entry and frame (rooms and caches are the owner's alone,
 * heap.h); anything else goes the whole way, nothing changed. A thread whose mallocs and frees
 * of a 112 KiB block balance has a room of 3 and came to the whole way every third free, 96
 * instructions a time: 31 of a pair's 103 (tight 100000, callgrind). */
void hk_heap_cache_full(void **head) {
    struct hk_heap *h = hk_tls.heap; /* free's fast path: the thread has a record */
    uintptr_t off = (uintptr_t)head - (uintptr_t)h->free;
    if (HK_LIKELY(off < HK_NCLASS * sizeof(void *))) {
        unsigned c = (unsigned)(off / sizeof(void *));
        uint64_t bit = (uint64_t)1 << c;
        if (h->beat_left > (intptr_t)h->room_given[c]) {
            if (c < HK_NSMALL) {
                if (h->taken[c] != 0) {
                    h->beat_left -= h->room_given[c];
                    hk_room_make_up(h, c);
                    h->torn &= ~bit; /* malloc took blocks meanwhile: reused again */
                    return;
                }
            } else if (!(h->mid_kept & ~bit)) {
                unsigned full = hk_room_full(h, c), n = hk_mid_cached(head, c, full);
                if (n < full) {
                    h->beat_left -= h->room_given[c];
                    hk_room_set(h, c, full - n);
                    return;
                }
            }
        }
    }
    hk_heap_cache_out(h, head);
}
#endif

/* Class c's current slab stops being current: to the partial or full list, or, empty, kept
 * or released like any slab that empties. */
static void hk_heap_let_current_go(struct hk_heap *h, unsigned c) {
    hk_room_reset(h, c);
    hk_heap_uncache(h, c);
    struct hk_slab *s = h->cur[c]; /* a mid span the uncache emptied went already */
    if (!s) return;
    hk_heap_set_current(h, c, NULL);
    if (s->used == 0) hk_heap_emptied(h, s);
    else hk_heap_list_add(h, s,
                          s->free || s->carved < s->capacity ? HK_LIST_PARTIAL : HK_LIST_FULL);
}

/* Lets the current slab of each class go whose cache and slab have not changed since
 * `quiet` (the footprint rule in heap.h). */
static void hk_heap_quiet_classes(struct hk_heap *h, uint64_t now, uint64_t quiet) {
    for (uint64_t m = h->slabbed; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        struct hk_slab *s = h->cur[c];
        if (!s) continue;
        if (h->quiet_since[c] == 0 || h->free[c] != h->seen_head[c] ||
            s->used != h->seen_used[c]) {
            h->seen_head[c] = h->free[c];
            h->seen_used[c] = s->used;
            h->quiet_since[c] = now;
        } else if (h->quiet_since[c] < quiet) {
            hk_heap_let_current_go(h, c);
            h->quiet_since[c] = 0; /* not seen yet */
        }
    }
}

/* --- handover -------------------------------------------------------------------------------- */

/* A thread that exits hands its heap over: its slabs stay owned by its record, their lists
 * kept in the record, whose inbox stays open, and the next thread that sets up a heap takes
 * them all at once, as glibc gives an exited thread's arena to the next thread. Before, an exit
 * gave each slab with live blocks to the orphans, one list per class under its stripe, and
 * whoever then freed those blocks went through the orphans' batches (about 100 instructions a
 * free; larson with a new thread every 1,000 replacements). A record that no thread took within
 * HK_PARK_MS (as any thread's tick sees it), or at a flush or trim, is given up: its slabs go
 * to the pool or the orphans, and its inbox is applied, as at an exit before. */
#define HK_PARK_MS HK_CHAOS_FAST(20, 2)
#define HK_PARKED_PUSHES_MAX 4096
#define HK_PARKED_KIB_MAX 2048

/* Heap h, being set up with record o, takes o's parked slabs: the lists its last thread left,
 * whole (h has none yet: the slabs keep their links, list and owner), and gives each small
 * slab its table entry, full ones too but in the hardened build (see hk_heap_list_add). The
 * entries at once: with each slab entered at its first free by the new thread instead (a
 * slow free each, and slabs whose entry another took found only as their frees missed),
 * larson 2 0.5 8 1000 5000 1000 42 (a new thread every 1,000 steps) ran 0.96-0.98 times as
 * fast. */
static void hk_heap_take_over(struct hk_heap *h, struct hk_owner *o) {
    struct hk_owner_cold *k = o->cold;
    for (uint64_t m = o->park_mask; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        HK_ASSERT(!h->partial[c] && !h->full[c] && !h->cur[c]);
        h->partial[c] = k->park_partial[c];
        h->partial_tail[c] = k->park_partial_tail[c];
        h->full[c] = k->park_full[c];
        k->park_partial[c] = k->park_partial_tail[c] = k->park_full[c] = NULL;
        hk_heap_holds(h, c);
        for (struct hk_slab *s = h->partial[c]; s; s = s->next) hk_owned_set(h, s);
#ifndef HK_HARDENED
        for (struct hk_slab *s = h->full[c]; s; s = s->next) hk_owned_set(h, s);
#endif
    }
    o->park_mask = 0;
}

static void hk_heap_let_go(struct hk_slab *s, uint64_t now, struct hk_slab **orphans);

/* Heap h, set up long before, takes parked slab s (on list `list` of its record) in: s becomes
 * h's, as an adopted orphan does. seq_cst store: a pusher that still sees the parked record
 * pushes into its inbox, which hk_heap_give_up closes after this and h applies; one that finds
 * it closed reads the owner again and sees h's. */
static void hk_heap_take_in(struct hk_heap *h, struct hk_slab *s, uint8_t list, uint64_t now) {
    if (s->used == 0) {
        s->list = HK_LIST_NONE;
        hk_heap_release(s, now);
        return;
    }
    __atomic_store_n(&s->nostash, 1, __ATOMIC_RELAXED); /* other threads do not stash it */
    atomic_store(&s->owner, h->owner);
    HK_STAT_INC(slab_adopt);
    hk_heap_list_add(h, s, list);
}

/* Gives up parked record o (the calling thread's heap h applies what its inbox holds): its
 * slabs go to the pool or the orphans, or with `take`, to h (hk_heap_give_up_wanted). */
static void hk_heap_give_up(struct hk_heap *h, struct hk_owner *o, uint64_t now, int take) {
    if (take) HK_STAT_INC(heaps_taken_in);
    else HK_STAT_INC(heaps_given_up);
    if (HK_TRACING(HK_T_THREAD))
        hk_trace(HK_T_THREAD,
                 take ? "take in (an exited thread's heap this thread frees)"
                      : "give up (an exited thread's heap no thread took)",
                 "owner@", (uintptr_t)o, NULL, 0, NULL, 0);
    struct hk_owner_cold *k = o->cold;
    for (uint64_t m = o->park_mask; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        struct hk_slab *s, *next, *orphans = NULL;
        for (s = k->park_partial[c], k->park_partial[c] = NULL; s; s = next) {
            next = s->next;
            if (take) hk_heap_take_in(h, s, HK_LIST_PARTIAL, now);
            else hk_heap_let_go(s, now, &orphans);
        }
        for (s = k->park_full[c], k->park_full[c] = NULL; s; s = next) {
            next = s->next;
            if (take) hk_heap_take_in(h, s, HK_LIST_FULL, now);
            else hk_heap_let_go(s, now, &orphans);
        }
        hk_orphan_abandon(orphans);
    }
    o->park_mask = 0;
    void *lists[HK_LANES];
    hk_owner_close(o, lists);
    for (unsigned l = 0; l < HK_LANES; l++)
        if (lists[l] == HK_INBOX_CLOSED) lists[l] = NULL;
    hk_heap_free_lists(h, lists);
    hk_owner_retire(o);
}

/* Whether heap h's thread is the only one that brought parked record o blocks, so that taking
 * the heap in makes the rest of its frees there its own. The half that park_mine looks for is
 * counted over a run of frees to o alone: a thread that takes apart what several exited
 * threads left, freeing into their heaps by turns, never made one, and gave every heap up (a
 * pool's results freed at the end: teardown 500000 4 16 128 random 42 8, 17 of 32 given up,
 * 59,944 acquisitions of the orphans' stripes). */
static int hk_parked_alone(const struct hk_heap *h, struct hk_owner *o) {
    return h->owner && atomic_load_explicit(&o->parked_by, memory_order_relaxed) ==
                           hk_owner_tag(h->owner);
}

/* Where other threads have brought a parked record more than HK_PARKED_PUSHES_MAX blocks,
 * they are taking apart what an exited thread left (its result), and the thread that takes
 * the heap over would apply every one of them from its inbox, one by one and cold (teardown
 * with a new thread a round: 0.63x the speed with handover alone). Where they have brought it
 * more than HK_PARKED_KIB_MAX of them, that memory waits for a thread that may not come soon:
 * where threads come and go in waves, those that end first wait parked for the rest of their
 * wave, and with 16 threads sharing blocks of every size (mixed_churn), 13-35 MiB of mid
 * blocks lay in parked inboxes, their spans held from every thread. The thread whose free
 * crossed a bound (hk_parked_brought notes the record in give_up) gives it up when its free or
 * refill is done, and the rest of the blocks travel as orphans' blocks do, joined to their
 * slabs in runs; it takes the heap in if it brought half of it in a row, or all of it
 * (hk_parked_alone). A successor that frees what its predecessor left a block at a time
 * (larson) brings it far fewer: it stashes most of them for its own mallocs. */
static void hk_heap_give_up_wanted(struct hk_heap *h) {
    struct hk_owner *o = h->give_up;
    h->give_up = NULL;
    if (h->owner && h->hooked && !h->no_stash && hk_owner_unpark_this(o))
        hk_heap_give_up(h, o, hk_now_ms(),
                        hk_parked_alone(h, o) ||
                            (h->park_to == o && (h->park_mine >= HK_PARKED_PUSHES_MAX / 2 ||
                                                 h->park_mine_kib >= HK_PARKED_KIB_MAX / 2)));
}

/* Notes that this thread's free brought parked record o n blocks of `bytes` in all (see
 * hk_heap_give_up_wanted). */
static void hk_parked_brought(struct hk_heap *h, struct hk_owner *o, uint32_t n, size_t bytes) {
    uint32_t kib = (uint32_t)((bytes + 1023) >> 10);
    if (h->park_to != o) h->park_to = o, h->park_mine = h->park_mine_kib = 0;
    h->park_mine += n;
    h->park_mine_kib += kib;
    /* The first pusher claims the record; any other (or one without a record) makes it many. */
    uint32_t me = h->owner ? hk_owner_tag(h->owner) : HK_TAG_MANY;
    uint32_t by = atomic_load_explicit(&o->parked_by, memory_order_relaxed);
    if (by != me && by != HK_TAG_MANY &&
        (by || !atomic_compare_exchange_strong_explicit(&o->parked_by, &by, me,
                                                        memory_order_relaxed,
                                                        memory_order_relaxed)))
        atomic_store_explicit(&o->parked_by, HK_TAG_MANY, memory_order_relaxed);
    uint32_t all = atomic_fetch_add_explicit(&o->parked_pushes, n, memory_order_relaxed) + n;
    uint32_t all_kib = atomic_fetch_add_explicit(&o->parked_kib, kib, memory_order_relaxed) + kib;
    if ((all >= HK_PARKED_PUSHES_MAX || all_kib >= HK_PARKED_KIB_MAX) && !h->give_up)
        h->give_up = o;
}

/* Gives up the records parked before older (all of them with UINT64_MAX). */
static void hk_heap_give_up_parked(struct hk_heap *h, uint64_t older, uint64_t now) {
    struct hk_owner *o;
    while ((o = hk_owner_unpark(older)) != NULL) hk_heap_give_up(h, o, now, 0);
}

#ifndef HK_HARDENED
/* Frees counted before the thread chooses again how it frees, and the share of them that
 * miss the owned-slab table from which it frees by slab metadata, and back (heap.h, "Two ways
 * to free"). Freeing by the table, each miss costs a misprediction where the misses come at
 * random (about 20 cycles) besides the second try; freeing by slab metadata, each free to
 * the thread's own slabs costs the longer path (about 8 cycles more): level near 30% on
 * paper. In shared_swap's threads, a quarter did better than three eighths (one of the two
 * threads sees about 30% of misses: 4.5e7 steps/s against 4.2e7, 1,000 slots on one core). */
#define HK_FREE_CHOICE_MIN 4096
#define HK_FREE_ANY_IN 2  /* eighths of the frees, or more, to start */
#define HK_FREE_ANY_OUT 1 /* eighths of the frees, or fewer, to stop */
/* Blocks free's second try takes between two looks at the clock (hk_free_by_meta), on
 * average. */
#define HK_FCLOCK_TAKES 64

/* Makes free's fast path look at the owned-slab table (any 0) or at nothing (any 1). */
static void hk_heap_set_free_any(struct hk_heap *h, unsigned any) {
    h->free_any = (uint8_t)any;
    hk_free_view(h);
    if (HK_TRACING(HK_T_THREAD))
        hk_trace(HK_T_THREAD,
                 any ? "frees by slab metadata (most of its frees miss its table)"
                     : "frees by its owned-slab table again",
                 NULL, 0, NULL, 0, NULL, 0);
}

/* At a tick: chooses how the thread frees from its small frees since the last choice
 * (hk_small_frees). */
static void hk_heap_choose_free(struct hk_heap *h) {
    uint64_t used = hk_rooms_used(h);
    uint64_t all = hk_small_frees(h, used);
    if (all < HK_FREE_CHOICE_MIN) return;
    /* Freeing by the table, every free the second try saw missed the table; by slab
     * metadata, those of other threads' blocks would have. */
    uint64_t seen = h->ftaken - h->ftaken_seen + h->frefused;
    uint64_t missed = h->free_any ? seen - (h->fown < seen ? h->fown : seen) : seen;
    /* A heap whose caches may not take other threads' blocks (no exit hook: without pthread
     * keys) would send every free to the full path. */
    unsigned any = !h->take_ok              ? 0
                   : h->free_any ? missed * 8 > all * HK_FREE_ANY_OUT
                                 : missed * 8 >= all * HK_FREE_ANY_IN;
    h->fown = h->frefused = h->fpushed = h->fused = 0;
    h->fused_seen = used;
    h->ftaken_seen = h->ftaken;
    if (any != h->free_any) hk_heap_set_free_any(h, any);
}
#endif

/* Runs at most every HK_TICK_MS, from the thread's slow paths: kept slabs idle for the purge
 * delay (or beyond a cap that ACE lowered) go to the pool, and current slabs of classes quiet
 * for as long are let go; then the process-wide tick. */
static void hk_heap_tick(struct hk_heap *h, uint64_t now) {
    HK_ASSERT(h == hk_tls.heap); /* a helper never runs an owner's tick (hk_heap_emptied) */
    uint64_t last = hk_heap_last_tick(h);
    h->next_tick = now + HK_TICK_MS;
    if (h->owner) atomic_store_explicit(&h->owner->last_tick, now, memory_order_relaxed);
    uint64_t delay = hk_pol_purge_delay();
    uint64_t older = now > delay ? now - delay + 1 : 0;
#ifndef HK_HARDENED
    hk_xpend_flush_all(h, 0); /* blocks on their way to transfer lists wait a tick at most */
    h->borrow_score = 0;
#endif
    for (uint64_t m = h->retained_mask; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        unsigned cap = hk_pol_soft_cap(c);
        /* A span kept beyond a cap of 0 (hk_heap_keep) stays if it was kept since the last
         * tick: the refill whose inbox emptied it may run this tick before taking it. */
        if (cap == 0 && c >= HK_NSMALL)
            hk_heap_unretain(h, c, 1, older > last ? older : last, NULL);
        else hk_heap_unretain(h, c, cap, older, NULL);
    }
    hk_heap_quiet_classes(h, now, older);
    /* A class that has been idle since the last tick (not refilled, its cache and current
     * slab unchanged: hk_heap_quiet_classes above dates any change now; or without a current
     * slab) gives back the blocks of other slabs its cache may hold, so that their slabs can
     * empty. A busy class keeps its cache, which the room bounds. */
    for (uint64_t m = hk_heap_cache_classes(h); m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        if (h->free[c] && !(h->refilled >> c & 1) &&
            (!hk_heap_cur(h, c) || h->quiet_since[c] != now))
            hk_heap_uncache(h, c);
    }
    hk_mid_reuse_keep(h, h->refilled | h->mid_kept); /* a mid class idle for a tick starts over */
    h->refilled = 0;
#ifndef HK_HARDENED
    hk_heap_xfer_home(h, hk_xfer_take_idle(now, 0));
#endif
    hk_heap_help_idle(h, now);
    if (hk_owner_parked() && !hk_heap_holds_off(HK_HOLD_PARKED))
        hk_heap_give_up_parked(h, now > HK_PARK_MS ? now - HK_PARK_MS : 0, now);
    hk_decay_tick(now);
    /* What the thread left idle was due by now (and went back above, or at another thread's
     * tick): the rooms need not beat any more, and the next setting of each is whole. */
    if (h->beat_since && now - h->beat_since > delay + HK_TICK_MS) h->beat_since = 0;
    h->left_idle = 0;
#ifndef HK_HARDENED
    if (!hk_counting) hk_heap_choose_free(h);
#endif
    hk_owned_window(h); /* the table grows for misses within a tick (hk_owned_missed) */
}

/* Runs the tick if the clock says one is due. */
static void hk_heap_tick_if_due(struct hk_heap *h) {
    uint64_t now = hk_now_ms();
    if (now >= h->next_tick) hk_heap_tick(h, now);
}

/* Counts a slow-path event (a refill, or a free that sent a batch away) and runs the tick
 * when one is due: a thread that only frees (a consumer) ticks too, so that its stashes and
 * idle slabs go back in time. */
static void hk_heap_maybe_tick(struct hk_heap *h) {
    if (h->tick_countdown-- == 0) {
        h->tick_countdown = HK_TICK_REFILLS;
        hk_heap_tick_if_due(h);
    }
}

/* Slab s, owned and not current, has just lost its last live block. */
static void hk_heap_emptied(struct hk_heap *h, struct hk_slab *s) {
    /* One of the heap's slabs, on one of its lists: a slab emptied twice would go to the
     * pool twice, and be purged under the thread that took it next. */
    HK_ASSERT(atomic_load_explicit(&s->owner, memory_order_relaxed) == h->owner &&
              (s->list == HK_LIST_CURRENT || s->list == HK_LIST_PARTIAL ||
               s->list == HK_LIST_FULL || s->list == HK_LIST_FULL_FREED));
    unsigned c = s->cls;
#ifndef HK_HARDENED
    if (s->side) hk_side_forget(h, s);
#endif
    size_t bytes = hk_slab_bytes(s); /* read now: a released slab is the pool's, and its
                                      * metadata another thread's once it takes the slab */
    uint64_t now = hk_now_ms();
    hk_heap_list_remove(h, s);
    unsigned kept = h->nretained[c], under_cap = kept < hk_heap_keep(h, c);
    if (under_cap &&
        (kept == 0 || atomic_load_explicit(&hk_kept_bytes, memory_order_relaxed) + bytes <=
                          atomic_load_explicit(&hk_pol.pool_budget, memory_order_relaxed))) {
        s->list = HK_LIST_RETAINED;
        s->idle_since = now;
        hk_slab_list_push(&h->retained[c], s);
        if (kept) atomic_fetch_add_explicit(&hk_kept_bytes, bytes, memory_order_relaxed);
        h->nretained[c]++;
        hk_owner_set_retained(h->owner, c, h->nretained[c]);
        h->retained_mask |= (uint64_t)1 << c;
    } else {
        hk_heap_release(s, now);
        /* Given up for the cap: if this thread takes a slab of the class from the pool soon,
         * keeping it would have saved the round trip (hk_heap_retaken). Not for a helper, and
         * not where the threads' kept bytes stood in the way: a higher cap keeps no more.
         * Not for a mid class, whose cap stays 0 (ace.c, hk_ace_caps). */
        if (!under_cap && h == hk_tls.heap && c < HK_NSMALL && (h->allocated >> c & 1)) {
            if (now - h->gave_up_at >= HK_GAVE_UP_MS) h->gave_up = 0;
            h->gave_up |= (uint64_t)1 << c;
            h->gave_up_at = now;
        }
    }
    /* Only the heap's own thread runs its tick and sets its rooms: a helper applying an idle
     * owner's inbox (see "Idle owners") comes here for the owner's slabs, and the tick gives
     * back caches that the owner's malloc fast path pops without marking itself busy. */
    if (h != hk_tls.heap) return;
    hk_heap_beat(h, now, bytes);
    if (now >= h->next_tick) hk_heap_tick(h, now);
}

static void hk_heap_drain(struct hk_heap *h);

/* Applies the frees other threads made to this heap's slabs and sends every cached block and
 * batch home, so that every slab that can empty does. */
static void hk_heap_send_all_home(struct hk_heap *h) {
    h->no_stash = 1; /* what goes home now must not come back into the stash */
    hk_heap_may_take(h);
    if (h->owner) hk_heap_drain(h);
    hk_heap_uncache_all(h);
#ifndef HK_HARDENED
    hk_xpend_flush_all(h, 0);
#endif
    hk_batch_flush_all(h);
    h->no_stash = 0;
    hk_heap_may_take(h);
}

/* What a trim and a flush send home: the caches, the batches, the inbox's blocks and every
 * transfer list. */
static void hk_heap_everything_home(struct hk_heap *h) {
    if (h->owner) hk_heap_give_up_parked(h, UINT64_MAX, hk_now_ms());
    h->no_xfer = 1; /* what goes home now goes home */
#ifndef HK_HARDENED
    /* First, so that the small blocks of the lists, which go home in batches, are sent with
     * the rest. */
    hk_heap_xfer_home(h, hk_xfer_take_idle(0, 1));
#endif
    hk_heap_send_all_home(h);
    h->no_xfer = 0;
#ifndef HK_HARDENED
    hk_orphan_share_decay(hk_now_ms(), 1);
#endif
}

void hk_heap_flush(void) {
    struct hk_heap *h = hk_heap_self();
    if (!h) return;
    hk_heap_enter(h);
    hk_heap_everything_home(h);
    hk_heap_leave(h);
}

void hk_heap_trim(void) {
    struct hk_heap *h = hk_heap_self();
    if (!h) return;
    hk_heap_enter(h);
    hk_heap_everything_home(h);
    /* A current slab with no live block goes too: a trim gives back all it can. */
    for (uint64_t m = h->slabbed; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        if (h->cur[c] && h->cur[c]->used == 0) hk_heap_let_current_go(h, c);
    }
    for (uint64_t m = h->retained_mask; m; m &= m - 1)
        hk_heap_unretain(h, (unsigned)__builtin_ctzll(m), 0, 0, NULL);
    hk_heap_leave(h);
}

/* --- free ----------------------------------------------------------------------------------- */

/* Frees block p of slab s, which heap h owns, freed by the thread of tag t (superslab.h,
 * hk_list_joins). */
static inline void hk_local_free_by(struct hk_heap *h, struct hk_slab *s, void *p, uint8_t t) {
    if (HK_UNLIKELY(p == s->free || s->used == 0)) {
        hk_report("free", p, "double free");
        return;
    }
    hk_list_joins(s, t, p);
    hk_block_push(&s->free, p);
    if (--s->used == 0) {
        if (s->list == HK_LIST_CURRENT) {
            /* A small slab stays current: its blocks are reused next. A mid span is big
             * (its blocks are all free here: none sits in the cache) and goes like any other
             * empty slab, to be kept or given to the pool. */
            if (s->cls < HK_NSMALL) return;
            hk_heap_set_current(h, s->cls, NULL);
        }
        hk_heap_emptied(h, s);
    } else if (s->list == HK_LIST_FULL) {
        hk_heap_unfull(h, s);
    }
}

/* Frees block p of slab s, which heap h owns, freed by the calling thread: its own free if h
 * is its heap, else a helper's for h's thread. */
static inline void hk_local_free(struct hk_heap *h, struct hk_slab *s, void *p) {
    hk_local_free_by(h, s, p, h == hk_tls.heap ? h->tag : 0);
}

static void hk_free_dispatch(struct hk_heap *h, struct hk_slab *s, void *p);
static int hk_heap_init_from(struct hk_heap *h, struct hk_owner *want);
/* Sets heap h up: it takes over the oldest parked heap, if any (see "Handover"). */
static int hk_heap_init(struct hk_heap *h) { return hk_heap_init_from(h, NULL); }

/* Counts n blocks handed to other threads: by the thread where it has a record, not in a
 * shared atomic. */
static void hk_count_pushes(struct hk_heap *h, uint32_t n) {
    if (h->owner) {
        hk_tally_plus(&h->owner->remote_pushes, n);
    } else {
        HK_STAT_ADD(remote_free, n);
    }
}

/* Frees again, to whoever owns its slab now, each block of list l (linked, NULL-ended);
 * returns how many. */
static uint32_t hk_free_again(struct hk_heap *h, void *l) {
    uint32_t n = 0;
    while (l) {
        void *next = hk_link_get(l);
        hk_free_dispatch(h, hk_slab_of((uintptr_t)l), l);
        l = next;
        n++;
    }
    return n;
}

/* Hands batch entry b to its owner. If the owner has exited meanwhile (its inbox is closed),
 * each block is freed again, to whoever owns its slab now. */
static HK_NOINLINE void hk_batch_flush(struct hk_heap *h, struct hk_batch *b) {
    uint32_t n = b->n, back = 0;
    size_t bytes = b->bytes;
    h->flushed = 1;
    h->batch_mask &= ~(1u << (b - h->batch));
    b->n = b->bytes = 0;
    for (unsigned l = 0; l < HK_LANES; l++) {
        void *head = b->head[l], *tail = b->tail[l];
        if (!head) continue;
        b->head[l] = b->tail[l] = NULL;
        if (hk_owner_push_list(b->to, l, head, tail)) continue;
        hk_link_set(tail, NULL);
        back += hk_free_again(h, head);
    }
    if (n > back) hk_count_pushes(h, n - back);
    /* A parked owner: count what it is brought, by all and by this thread in a row (the
     * bytes of blocks that came back, if any, too: the record is given up no later). */
    if (HK_UNLIKELY(atomic_load_explicit(&b->to->parked, memory_order_relaxed)) && n > back)
        hk_parked_brought(h, b->to, n - back, bytes);
}

/* Frees every orphans' block waiting in h; those whose slab was adopted meanwhile go to their
 * new owner. */
static HK_NOINLINE void hk_orphan_batch_flush(struct hk_heap *h) {
    uint64_t mask = h->oclasses;
    h->oclasses = 0;
    h->orphan_n = h->orphan_bytes = 0;
    hk_free_again(h, hk_orphan_free_lists(h->olist, mask));
}

/* Adds block p (bsize bytes, marked free) of an orphan of small class c to h's batch. */
static inline void hk_orphan_push(struct hk_heap *h, unsigned c, void *p, uint32_t bsize) {
    hk_link_set(p, h->olist[c]);
    h->olist[c] = p;
    h->oclasses |= (uint64_t)1 << c;
    h->orphan_n++;
    h->orphan_bytes += bsize;
}

/* Hands every waiting batch over: the owners' and the orphans'. Each kind can refill the
 * other (a block of an orphan adopted meanwhile joins its new owner's batch; one of an owner
 * that exited meanwhile, the orphans'), so both are empty only at the end. */
static void hk_batch_flush_all(struct hk_heap *h) {
    do {
        if (h->orphan_n) hk_orphan_batch_flush(h);
        while (h->batch_mask) hk_batch_flush(h, &h->batch[__builtin_ctz(h->batch_mask)]);
    } while (h->orphan_n);
}

/* Adds block p of orphan s, a small slab, to h's orphan batch. */
static HK_NOINLINE void hk_orphan_batch_add(struct hk_heap *h, struct hk_slab *s, void *p) {
    hk_mark_free(p);
    hk_orphan_push(h, __atomic_load_n(&s->cls, __ATOMIC_RELAXED), p, s->bsize);
    if (h->orphan_n >= HK_ORPHAN_BATCH_BLOCKS || h->orphan_bytes >= HK_ORPHAN_BATCH_BYTES)
        hk_orphan_batch_flush(h);
}

static void hk_batch_add(struct hk_heap *h, struct hk_owner *o, void *p, uint32_t size);

/* Gives batch entry b to owner o (flushing what it held for another), then adds p. */
static HK_NOINLINE void hk_batch_retarget(struct hk_heap *h, struct hk_batch *b,
                                          struct hk_owner *o, void *p, uint32_t size) {
    if (b->n) hk_batch_flush(h, b);
    hk_heap_rest_written(h);
    b->to = o;
    hk_batch_add(h, o, p, size);
}

/* Adds block p (size bytes) for owner o to the thread's batches. The entry is chosen by a
 * hash of the record's address; one that holds another owner's blocks is flushed first. Its
 * calls are tail calls, so the common case needs no stack frame. */
static void hk_batch_add(struct hk_heap *h, struct hk_owner *o, void *p, uint32_t size) {
    unsigned i = (unsigned)(((uintptr_t)o * 0x9e3779b97f4a7c15u) >> 61);
    struct hk_batch *b = &h->batch[i];
    if (HK_UNLIKELY(b->to != o)) {
        hk_batch_retarget(h, b, o, p, size);
        return;
    }
    /* Blocks are dealt out to the lanes in turn, so that the owner's walks overlap. */
    unsigned l = b->n & (HK_LANES - 1);
    if (!b->head[l]) b->tail[l] = p;
    hk_block_push(&b->head[l], p);
    if (b->n++ == 0) h->batch_mask |= 1u << i;
    b->bytes += size;
    if (b->n >= HK_BATCH_BLOCKS || b->bytes >= HK_BATCH_BYTES) hk_batch_flush(h, b);
}

/* Whether s is, or was since it was formatted, its class's shared slab (orphan.h): its blocks
 * freed go home at once, not in the freeing thread's batch. A thread takes a few of them, and
 * one that frees them and then waits (a worker between jobs) would hold them in its batch,
 * where the next threads cannot have them: crowd 1000 8 16 4096 3 42 0 (a thousand threads
 * that free their blocks and wait) held 21.8 KiB a thread, 15.2 now (glibc 11.3). Read
 * racily, a hint: either way is exact. The hardened build has no shared slabs. */
static inline int hk_was_shared(const struct hk_slab *s) {
#ifdef HK_HARDENED
    (void)s;
    return 0;
#else
    return __atomic_load_n(&s->was_shared, __ATOMIC_RELAXED);
#endif
}

/* hk_free_home's cases other than an own slab and a small block of a live owner with a
 * batch at hand: an orphan's block, a thread without a heap yet, a mid block or a thread
 * without an exit hook (pushed alone); out of line, so that the common cases need no stack
 * frame. */
static HK_NOINLINE void hk_free_home_slow(struct hk_heap *h, struct hk_slab *s, void *p) {
    for (;;) {
        struct hk_owner *o = atomic_load_explicit(&s->owner, memory_order_acquire);
        if (o == NULL) {
            /* Small blocks of orphans travel in a batch too, applied with one acquisition of
             * each lock stripe they need. A thread that has not allocated yet (a consumer of
             * blocks from threads that are gone) sets its heap up for that; not one whose heap
             * is being or has been torn down (hooked is 0 then, and exiting 1 after): a heap
             * set up by a late destructor's free would outlive the thread's last teardown. */
            if (!h->owner && !h->exiting) hk_heap_init(h);
            if (h->hooked && s->cls < HK_NSMALL && !hk_was_shared(s)) {
                hk_orphan_batch_add(h, s, p);
                return;
            }
            if (hk_orphan_free(s, p)) return;
        } else if (o == h->owner) {
            hk_local_free(h, s, p);
            return;
        } else {
            /* Small blocks travel in batches. A thread that frees before it allocates (a
             * consumer) sets its heap up for that, as for orphans' blocks above, taking over
             * the heap of the block's owner if that thread exited (the successor of a thread
             * that takes apart what its predecessor left: larson's lanes): its frees of them
             * are its own then. A mid block (32 KiB and more) goes alone, and so does every
             * block of a thread whose exit would not flush its batches. */
            if (!h->owner && !h->exiting) {
                hk_heap_init_from(h, o);
                if (h->owner == o) continue;
            }
            if (s->cls < HK_NSMALL && h->hooked) {
                hk_batch_add(h, o, p, s->bsize);
                return;
            }
            hk_mark_free(p);
#ifndef HK_HARDENED
            /* A mid block of a class the thread allocates too (its stash had no room, or it
             * let the class go) waits for the next refill of the class by any thread, not for
             * its owner's (transfer.h). A thread that only frees the class (a consumer) sends
             * it home: its producer reuses it from its spans. */
            if (s->cls >= HK_NSMALL && !h->no_xfer && h->owner && (h->allocated >> s->cls & 1) &&
                hk_xfer_put(s->cls, p, p, 1))
                return;
#endif
            if (hk_owner_push_list(o, (unsigned)((uintptr_t)p >> 12) & (HK_LANES - 1), p, p)) {
                hk_count_pushes(h, 1);
                if (HK_UNLIKELY(atomic_load_explicit(&o->parked, memory_order_relaxed)))
                    hk_parked_brought(h, o, 1, s->bsize);
                return;
            }
        }
        /* The owner exited or the orphan was adopted meanwhile: look again. */
    }
}

/* Frees p of slab s on behalf of whichever thread owns s now. */
static inline void hk_free_home(struct hk_heap *h, struct hk_slab *s, void *p) {
    struct hk_owner *o = atomic_load_explicit(&s->owner, memory_order_acquire);
    if (o != NULL && o == h->owner) {
        hk_local_free(h, s, p);
    } else if (o != NULL && h->hooked && s->cls < HK_NSMALL) {
#ifndef HK_HARDENED
        /* A big block of a class the thread allocates too goes to the class's transfer list
         * (transfer.h); not one of a slab adopted from an exited thread, which goes home as it
         * would not be stashed (heap.h, "Reuse"), nor from a helper at work on an idle
         * owner's inbox, which batches, nor once the thread is tearing its heap down: its
         * pending blocks went to the lists already, and the flush of its batches that comes
         * after can free blocks again (those of orphans adopted meanwhile), which waited there
         * for ever, their slab never empty (stress, 48 threads: 1 run in 3). */
        unsigned c = s->cls;
        if (c >= HK_XFER_FIRST && !h->no_xfer && !h->no_stash && (h->allocated >> c & 1) &&
            h == hk_tls.heap && !__atomic_load_n(&s->nostash, __ATOMIC_RELAXED)) {
            hk_xpend_add(h, c, p);
            return;
        }
#endif
        hk_batch_add(h, o, p, s->bsize);
    } else {
        hk_free_home_slow(h, s, p);
    }
}

#ifndef HK_HARDENED
/* Whether the stash has taken what it may of mid class c's room (room.h, hk_stash_mid_max):
 * what frees put into the cache since the room was last made up counts. */
static inline int hk_stash_mid_full(const struct hk_heap *h, unsigned c) {
    return (intptr_t)hk_room_full(h, c) - h->room[c] >= (intptr_t)hk_stash_mid_max(c);
}

/* Puts block p of class c (its slab goes on counting it as live) onto the calling
 * thread's cache as part of its stash, if the thread allocates the class (it has a current slab
 * of it: a consumer that only frees sends every block home) and the class has room, made up
 * from what malloc took if it is down to its last (heap.h, "Reuse"; free's fast path tests
 * for 0 only, so the stash leaves at least 1). */
static inline int hk_stash_put(struct hk_heap *h, unsigned c, void *p) {
    if (!h->take_ok || h->cur[c] == NULL || /* not hk_heap_cur (see there) */
        (c >= HK_NSMALL && hk_stash_mid_full(h, c)) ||
        (h->room[c] <= 1 && hk_room_make_up(h, c) <= 1))
        return 0;
    hk_block_push(&h->free[c], p);
    h->room[c]--; /* at least 1 left: free's fast path tests for 0 only */
    h->fpushed++;
    h->flushed = 1; /* counts for the tick, which gives the stash back if the class idles */
    return 1;
}

/* Keeps mid block p of class c, of one of the thread's own spans and just freed, in the
 * class's cache, where the span goes on counting it as live: the thread's next malloc of the
 * class takes it back. A malloc and a free of the same mid block in turn (a buffer for each
 * request) took the span through emptying, the pool and a refill each time: about 730
 * instructions a pair. Only where the thread allocates the class (it has a current span) and
 * into an empty cache: a block a class. The blocks kept come to HK_MID_KEEP_BYTES at most,
 * or the one just freed: past that, those of the other classes go home (hk_mid_send_home).
 * Only once the thread has shown that it allocates the class again after freeing it (a free
 * of it went to its span, and a refill of the class came after: mid_reuse), until the class
 * idles for a tick: a block kept by a thread that then waits stays with it (no other thread
 * touches its caches), and a crowd of workers that each freed a buffer or two of 40 KB to
 * 1 MB before they blocked held 709 KiB a thread, 80 before (glibc 212, tcmalloc 165).
 * A block kept in every class, without a bound, held 5% more at the peak of mixed_churn with
 * 16 threads and of mid_churn; a block of one class at a time left a request that takes two
 * buffers (100 and 300 KB) at a quarter of the speed it has with a block of each (8.1e6
 * requests a second against 2.9e7; tcmalloc 1.8e7, glibc 2.2e7). A block of the current
 * span kept so gives the span entries in the owned-slab table, where its class's multiply is
 * exact (owned.h, hk_owned_set_span), and free's fast path keeps its blocks from then on as
 * the class's room allows (room.h, HK_MID_OWN_BYTES; hk_mid_room_out when it runs out): a
 * cache of a few blocks, not one, where the bound is weighed at the slow path's keeps and
 * when the room runs out. (Weighed at the refill that shows reuse too, it sent blocks home
 * that came back through spans emptied and taken again: waves 8 32 100 42 peaked at 51.5 MiB,
 * 48.6 without, 49.2 before the fast path.) */
#define HK_MID_KEEP_BYTES ((size_t)1 << 20)

static void hk_mid_send_home(struct hk_heap *h, uint64_t classes);

/* Whether a block of mid class c kept beside those of the other classes the thread keeps
 * comes to HK_MID_KEEP_BYTES at most; forgets the classes whose block malloc took back. */
static inline int hk_mid_within(struct hk_heap *h, unsigned c) {
    uint64_t others = h->mid_kept & ~((uint64_t)1 << c);
    if (others == 0) return 1;
    size_t kept = hk_class_size[c];
    for (uint64_t m = others; m; m &= m - 1) {
        unsigned k = (unsigned)__builtin_ctzll(m);
        if (h->free[k]) kept += hk_class_size[k];
        else h->mid_kept &= ~((uint64_t)1 << k); /* malloc took it back */
    }
    return kept <= HK_MID_KEEP_BYTES;
}

/* Whether the thread keeps a block of its own of mid class c now (see above): it has shown
 * reuse of the class, allocates it (a current span) and the class's cache is empty. */
static inline int hk_mid_keeps(const struct hk_heap *h, unsigned c) {
    return (h->mid_reuse >> c & 1) && h->take_ok && h->cur[c] != NULL && h->free[c] == NULL;
}

static inline int hk_mid_keep(struct hk_heap *h, struct hk_slab *s, unsigned c, void *p) {
    uint64_t bit = (uint64_t)1 << c;
    if (!(h->mid_reuse & bit)) h->mid_freed |= bit; /* a refill of c next shows reuse */
    if (!hk_mid_keeps(h, c)) return 0;
    hk_block_push(&h->free[c], p);
    h->flushed = 1; /* counts for the tick: a thread that takes its kept blocks back refills
                     * nothing, and its idle caches must go home all the same */
    if (!hk_mid_within(h, c)) hk_mid_send_home(h, h->mid_kept & ~bit);
    h->mid_kept |= bit;
    /* A block of its current span: the span gets its entries where it may (owned.h,
     * hk_owned_set_span), and the class's next frees to it take free's fast path. */
    if (s == h->cur[c] && !s->entered) hk_owned_set_span(h, s);
    return 1;
}

/* The blocks in mid class c's cache, up to its full room `full`; a link that fails its check
 * ends the count (malloc reports it when it gets there). */
static inline unsigned hk_mid_cached(void **head, unsigned c, unsigned full) {
    unsigned n = 0;
    for (void *b = *head; b != NULL && n < full; n++) {
        void *next = hk_link_get(b);
        if (!hk_link_ok(b, next, c)) break;
        b = next;
    }
    return n;
}

/* The room of mid class c ran out on free's fast path (hk_heap_cache_full), which keeps the
 * thread's own blocks of its current span once it has shown reuse (owned.h, hk_owned_admits).
 * The cache holds a few blocks at most (room.h, HK_MID_OWN_BYTES): counted, they leave the
 * rest of the full room to free. A cache that holds the full room has taken more frees than
 * malloc took blocks, and goes home. (What malloc took since the room was set, which a small
 * class's room makes up from, would keep a room that has come down to 1, say, at 1 while
 * the thread's mallocs and frees balance: the slow path at every free.) Past
 * HK_MID_KEEP_BYTES with the blocks of the other classes, those go home (hk_mid_within). */
static void hk_mid_room_out(struct hk_heap *h, unsigned c, void **head) {
    unsigned full = hk_room_full(h, c), n = hk_mid_cached(head, c, full);
    if (n >= full) {
        hk_heap_uncache(h, c);
        return;
    }
    hk_room_set(h, c, full - n);
    if ((h->mid_kept & ~((uint64_t)1 << c)) && !hk_mid_within(h, c))
        hk_mid_send_home(h, h->mid_kept & ~((uint64_t)1 << c));
}
#endif

/* Frees p of slab s on behalf of whichever thread owns s now; a small block of another live
 * thread's slab goes into the calling thread's stash while it has room (heap.h, "Reuse"). */
static void hk_free_dispatch(struct hk_heap *h, struct hk_slab *s, void *p) {
#ifndef HK_HARDENED
    struct hk_owner *o = atomic_load_explicit(&s->owner, memory_order_relaxed);
    /* Not a block of an adopted slab (heap.h, "Reuse"). */
    if (o != h->owner && o != NULL && h == hk_tls.heap &&
        !__atomic_load_n(&s->nostash, __ATOMIC_RELAXED) && hk_stash_put(h, s->cls, p))
        return;
#endif
    hk_free_home(h, s, p);
}

/* Frees the blocks of an inbox's lanes, a block of each in turn. A link that leads out of
 * every SuperSlab was overwritten (a write to a block after its free): reported, and the rest
 * of that lane is dropped. */
static void hk_heap_free_lists(struct hk_heap *h, void *lists[HK_LANES]) {
    for (;;) {
        unsigned live = 0;
        for (unsigned l = 0; l < HK_LANES; l++)
            if (lists[l]) {
                __builtin_prefetch(lists[l], 1); /* the lanes' next blocks, all in flight */
                live++;
            }
        if (!live) return;
        for (unsigned l = 0; l < HK_LANES; l++) {
            void *b = lists[l];
            if (!b) continue;
            if (HK_UNLIKELY(!hk_is_superslab((uintptr_t)b))) {
                hk_report("free", b, "corrupted free list (a freed block was written to)");
                lists[l] = NULL; /* the rest of this lane is lost */
                continue;
            }
            lists[l] = hk_link_get(b);
            /* Nearly always a block of this heap's own slab: freed here directly. */
            struct hk_slab *s = hk_slab_of((uintptr_t)b);
            if (HK_LIKELY(atomic_load_explicit(&s->owner, memory_order_relaxed) == h->owner))
                hk_local_free_by(h, s, b, 0); /* another thread's free */
            else hk_free_dispatch(h, s, b);
        }
    }
}

/* Applies the frees other threads queued for this heap. */
static void hk_heap_drain(struct hk_heap *h) {
    void *lists[HK_LANES];
    hk_owner_take(h->owner, lists);
    if (HK_UNLIKELY(atomic_load_explicit(&h->owner->helped, memory_order_relaxed)))
        atomic_store_explicit(&h->owner->helped, 0, memory_order_relaxed); /* not idle */
    h->draining = !h->no_stash; /* a trim keeps nothing */
    hk_heap_free_lists(h, lists);
    h->draining = 0;
}

#ifdef HK_HARDENED
void hk_heap_guard_fail(void *p, int what, const char *op) {
    static const char *const why[] = {
        [HK_GUARD_IS_FREE] = "double free",
        [HK_GUARD_BROKEN] = "heap overflow (the bytes after the block were overwritten)",
        [HK_GUARD_BEFORE] = "heap overflow or underflow (the bytes before the block were "
                            "overwritten)",
    };
    hk_report(op, p, why[what]);
}
#endif

/* The checks of a valid block start p of slab s before it is freed: not free already (the
 * mark, taken as proof: block.h), and in the hardened build intact guards. 0 after a
 * report. */
static int hk_heap_may_free(struct hk_slab *s, void *p, const char *op) {
    if (HK_UNLIKELY(hk_marked_free(p))) {
        hk_report(op, p, "double free");
        return 0;
    }
#ifdef HK_HARDENED
    return hk_heap_guard_free(p, s->bsize, (uintptr_t)p - (uintptr_t)hk_slab_base(s), op);
#else
    (void)s;
    return 1;
#endif
}

static void hk_heap_count_free(struct hk_heap *h, unsigned c, int remote);

/* free of block p of slab s (class c), one of the calling thread's (its class and owner
 * cannot change under it: the owner was read with the heap marked busy), validated, with the
 * heap marked busy. Programs whose live small blocks span more slabs than the table has
 * entries come here often: the block goes into the stash (heap.h, "Reuse"), or is freed here
 * at once. A full slab (one whose entry another slab took, or any in the hardened build) is
 * freed to at once and gets its entry back. A partial slab whose entry is free takes it (a
 * helper that made the slab partial left the table alone). */
static inline __attribute__((always_inline)) void hk_free_mine(struct hk_heap *h, struct hk_slab *s,
                                                               unsigned c, void *p) {
#ifndef HK_HARDENED
    if (HK_UNLIKELY(s->side)) {
        hk_side_free(h, s, p);
        return;
    }
#endif
    if (s->list != HK_LIST_FULL && c < HK_NSMALL) {
        struct hk_owned *e = hk_owned_entry(h, s);
        if (e->lim == 0) {
            if (s->list == HK_LIST_PARTIAL) hk_owned_set(h, s);
        } else if (*hk_owned_holder(h, e) != s) {
            hk_owned_missed(h, 1);
        }
    }
#ifndef HK_HARDENED
    if (c >= HK_NSMALL ? hk_mid_keep(h, s, c, p)
                       : s->list != HK_LIST_FULL && hk_stash_put(h, c, p))
        return;
#endif
    hk_local_free(h, s, p);
}

/* free of p, a pointer into slab s of a SuperSlab, validated in full. */
static void hk_heap_free_in_slab(struct hk_heap *h, struct hk_slab *s, void *p, const char *op) {
    uintptr_t a = (uintptr_t)p;
    unsigned c = __atomic_load_n(&s->cls, __ATOMIC_ACQUIRE);
    if (HK_UNLIKELY(c == HK_CLS_NONE || hk_slab_block_index(s, a) < 0)) {
        /* A block start of a slab that went back to the pool empty: freed already. */
        int twice = c == HK_CLS_NONE && hk_pool_has_free_slab(s) &&
                    hk_slab_block_index(s, a) >= 0;
        hk_report(op, p,
                  twice ? "double free" : "invalid pointer (not a block hakmem handed out)");
        return;
    }
    /* Here: another thread's slab, an orphan, a mid span, one of ours whose table entry
     * another slab took, or a block the fast path found marked free. */
    if (!hk_heap_may_free(s, p, op)) return;
    struct hk_owner *o = atomic_load_explicit(&s->owner, memory_order_relaxed);
    if (HK_UNLIKELY(hk_counting)) hk_heap_count_free(h, c, !h->owner || o != h->owner);
    /* Other threads' blocks: hk_free_dispatch, which stashes them too. */
    if (o != NULL && o == h->owner) hk_free_mine(h, s, c, p);
    else hk_free_dispatch(h, s, p);
}

#ifndef HK_HARDENED
/* The blocks the thread keeps (hk_mid_keep) of the given classes go home, with whatever else
 * their caches hold (hk_heap_uncache forgets each class's mid_kept bit). */
static void hk_mid_send_home(struct hk_heap *h, uint64_t classes) {
    for (; classes; classes &= classes - 1) hk_heap_uncache(h, (unsigned)__builtin_ctzll(classes));
}
#endif

void hk_heap_mid_home(void) {
#ifndef HK_HARDENED
    struct hk_heap *h = hk_tls.heap;
    /* With the classes whose caches hold blocks free's fast path kept (owned.h,
     * hk_owned_set_span), which mid_kept may have forgotten: large 20000 64 4096 4 42 peaked at
     * 32.2 MiB without them, 28.3 with them (27.2 before the fast path). */
    uint64_t m = h->mid_kept;
    for (uint64_t r = h->mid_reuse & ~m; r; r &= r - 1) {
        unsigned k = (unsigned)__builtin_ctzll(r);
        if (h->free[k]) m |= (uint64_t)1 << k;
    }
    if (HK_LIKELY(m == 0)) return;
    hk_heap_enter(h);
    hk_mid_send_home(h, m);
    hk_heap_leave(h);
#endif
}

void hk_heap_large_taken(void) {
    struct hk_heap *h = hk_tls.heap;
    if (h->owner) h->left_idle -= (intptr_t)HK_MID_MAX; /* at least that */
}

#ifndef HK_HARDENED
int hk_heap_may_borrow(unsigned c) {
    struct hk_heap *h = hk_tls.heap;
    HK_ASSERT(c >= HK_MID_ONE && c < HK_NCLASS);
    /* Not before the thread's heap is set up (the refill does that): until then it is the
     * read-only heap of no thread. */
    if (!h->owner) return 0;
    if (h->borrowed) { /* the block borrowed last outlived this request */
        h->borrowed = NULL;
        if (h->borrow_score) h->borrow_score--;
    }
    if (h->borrow_score >= HK_BORROW_STOP || h->free[c] || hk_xfer_any(c)) return 0;
    if (!(h->slabbed >> c & 1)) return 1;
    struct hk_slab *s = h->cur[c];
    if (s && (s->free || s->carved < s->capacity)) return 0;
    return !h->partial[c] && !h->retained[c];
}

void hk_heap_borrowed(void *p) { hk_tls.heap->borrowed = p; }
#endif

/* free of p, a pointer into no SuperSlab: NULL, a large block, or a misuse. */
static void hk_heap_free_outside(void *p, const char *op) {
    if (p == NULL) return;
    int r = hk_large_free(p);
    if (r > 0) {
        uint64_t now = hk_now_ms();
        if (HK_UNLIKELY(hk_counting)) hk_heap_count_large(0);
        struct hk_heap *h = hk_tls.heap;
#ifndef HK_HARDENED
        if (HK_UNLIKELY(p == h->borrowed)) { /* died young (heap.h) */
            h->borrowed = NULL;
            if (h->borrow_score < 2 * HK_BORROW_STOP) h->borrow_score += HK_BORROW_DIED;
        }
#endif
        if (h->owner) hk_heap_beat(h, now, HK_MID_MAX); /* at least that */
        hk_decay_tick(now);
        return;
    }
    hk_large_refused(op, p, r);
}

/* free of p by a thread that has no heap record and can get none (the OS refused the memory
 * for one): a large block goes back as always; a slab's block cannot travel without a heap,
 * and stays where it is, lost to the program as the memory it could not have. */
static HK_NOINLINE HK_COLD void hk_heap_free_bare(void *p, const char *op) {
    if (!hk_is_superslab((uintptr_t)p)) {
        hk_heap_free_outside(p, op);
        return;
    }
    if (HK_TRACING(HK_T_FAIL))
        hk_trace(HK_T_FAIL, "free left a block in place: no memory for the thread's heap", "addr@",
                 (uintptr_t)p, NULL, 0, NULL, 0);
}

#ifdef HK_HARDENED
void hk_heap_free_emptied(struct hk_slab *s) {
    hk_heap_emptied(hk_tls.heap, s);
    hk_heap_leave(hk_tls.heap);
}

void hk_heap_free_owned(struct hk_slab *s, void *p) {
    struct hk_heap *h = hk_tls.heap;
    hk_heap_enter(h);
    hk_local_free(h, s, p);
    hk_heap_leave(h);
}
#endif

#ifndef HK_HARDENED
/* Whether off, an offset into small slab s of class c (read from s's own slot), is the start
 * of a block it has carved: a multiple of the class size (HK_BLOCK_DIV) below the bytes
 * carved. The short paths of free's slow path test it on the slab's metadata alone. */
static inline int hk_carved_start(const struct hk_slab *s, size_t c, uint32_t off) {
    return HK_LIKELY((uint32_t)(off * hk_class_div[c]) <= HK_BLOCK_START_MAX) &&
           HK_LIKELY(off < __atomic_load_n(&s->lim, __ATOMIC_RELAXED));
}

/* free's slow path for a small block of class c of an orphan (a slab whose owner exited), the
 * common case of a thread that takes apart what exited threads left (thread_churn with its
 * main thread freeing 16 threads' leftovers, a worker's result freed by another): the checks
 * of hk_heap_free_in_slab (a carved block start, not marked free), then the block joins the
 * thread's orphan batch (heap.h), on the slab's metadata and the thread's own fields only
 * (the caller marks the heap busy: helpers flush an idle owner's batches).
 * 0, with nothing done, for anything else, a block marked free (the full path tells a double
 * free), a batch one block or its bytes short of its bound (the full path hands it over),
 * before the exit hook is set or while counting. A slab adopted meanwhile is no loss: the
 * batch sends its blocks to the new owner (hk_orphan_free_lists). teardown 500000 4 16 128
 * random 42 1 (every free an orphan's, in random order) ran 1.45 times as fast, 1.23 in
 * allocation order; about 155 instructions a free instead of 253 (about 110 since it has a
 * function of its own, hk_heap_free_orphan), and about 80 in allocation order since the batch
 * frees runs of a slab at once. */
static inline int hk_orphan_fast(struct hk_heap *h, struct hk_slab *s, unsigned c, void *p,
                                 int checked) {
    if (!h->hooked || h->orphan_n + 1 >= HK_ORPHAN_BATCH_BLOCKS || HK_UNLIKELY(hk_counting) ||
        hk_was_shared(s)) /* home at once: hk_free_home_slow */
        return 0;
    uint32_t off = (uint32_t)((uintptr_t)p & (HK_SLAB_SIZE - 1)); /* a small slab is one slot */
    uint32_t bsize = __atomic_load_n(&s->bsize, __ATOMIC_RELAXED);
    /* With `checked`, hk_free_by_meta found p a carved block start without the mark. */
    if ((!checked && !hk_carved_start(s, c, off)) ||
        h->orphan_bytes + bsize >= HK_ORPHAN_BATCH_BYTES)
        return 0;
    uintptr_t mark = hk_free_mark();
    if (!checked && HK_UNLIKELY(hk_marked_as(p, mark))) return 0;
    hk_mark_as(p, mark);
    hk_orphan_push(h, c, p, bsize);
    return 1;
}

/* Free by slab metadata (heap.h, "Two ways to free"): free's second try, and its first while
 * the thread frees by slab metadata. It takes the commonest of the blocks the table does not
 * admit: a valid small block of another live thread's slab (where threads free each other's
 * blocks), or of one of the thread's own slabs (whose table entry another slab holds, where
 * live blocks span more slabs than the table has entries; or any, while freeing by slab
 * metadata), into the cache (heap.h, "Reuse"). p lies in a SuperSlab, and hk_slot_of(p) is its
 * slab if p is a small block: a small slab is one slot, and the other slots of a span never
 * have a small class (superslab.h), so the slab's head need not be looked up (a load that the
 * rest waited for). It makes the checks of hk_heap_free_in_slab (a class of one slot, a carved
 * block start, not marked free) and hk_stash_put, in the order this case needs them, the
 * cheapest refusals first, on the slab's metadata and the thread's own fields only. It
 * leaves the heap unmarked, as free's fast path does: it changes the thread's cache, room and
 * counts alone, which helpers leave alone. Its answer (enum hk_meta) says what it did, or
 * which short path of hk_heap_free_slow's the block takes; HK_META_REFUSED leaves it to the
 * full path (shared_swap, 2 threads: about 140 instructions a remote free there, 60 here). */
enum hk_meta {
    HK_META_REFUSED,   /* nothing done: anything else (a room already spent among them), or
                        * the counters on */
    HK_META_TAKEN,     /* p is in the cache */
    HK_META_TICK,      /* so, and the clock is due (hk_heap_stash_tick) */
    HK_META_TICK_OWN,  /* the same, for a block of one of the thread's own slabs */
    HK_META_HOME,      /* another live thread's block that the class has no room for or that no
                        * cache of the thread takes (a consumer's): hk_heap_free_home */
    HK_META_LAST_ROOM, /* the class's room is at its last: hk_heap_free_last_room */
    HK_META_OWN,       /* a block of the thread's own slabs that no cache takes:
                        * hk_heap_free_own */
    HK_META_ORPHAN,    /* an orphan's block: hk_heap_free_orphan_checked */
    HK_META_MID,       /* no small slab's block: a mid block is kept on a short path of its
                        * own (hk_heap_free_mid), else as refused */
};
static inline enum hk_meta hk_free_by_meta(struct hk_heap *h, void *p) {
    const struct hk_slab *s = hk_slot_of((uintptr_t)p);
    /* One register for the slot from here on: gcc would keep the SuperSlab and the slot's
     * offset apart to address each field, and save four registers on entry for it (one
     * now: shared_swap 2 10000000 1000 0 on one core, 4.3e7 -> 4.4e7 steps/s). */
    __asm__("" : "+r"(s));
    size_t c = __atomic_load_n(&s->cls, __ATOMIC_ACQUIRE); /* an index: no widening later */
    /* A mid span, or no slab at all (HK_CLS_NONE). */
    if (c >= HK_NSMALL) return HK_META_MID;
    HK_ASSERT(hk_slab_of((uintptr_t)p) == s);
    uint32_t off = (uint32_t)((uintptr_t)p & (HK_SLAB_SIZE - 1)); /* a small slab is one slot */
    /* A carved block start, not marked free (else reported as a double free by the full
     * path); caches may take blocks (take_ok); the thread allocates the class (else, below,
     * the block goes home); and, further below, its cache has room left. Each test is a
     * branch almost never taken; none depends on whose block it is, which changes from one
     * free to the next while the thread frees by slab metadata. */
    if (HK_UNLIKELY(!hk_carved_start(s, c, off) || hk_marked_as(p, hk_free_mark())))
        goto refused;
    struct hk_owner *o = atomic_load_explicit(&s->owner, memory_order_relaxed), *me = h->owner;
    hk_chaos(); /* a helper may let the slab go now: what acts on o reads it again, busy */
    if (HK_UNLIKELY(!h->take_ok || h->cur[c] == NULL)) goto unstashed;
    /* Of a live thread's slab not adopted from an exited one (heap.h, "Reuse"; nostash says
     * both), unless its own; and one of its own that the full path hands its table entry,
     * while it frees by the table. Tested first: what seldom holds, whoever's block it is. */
    if (HK_UNLIKELY(__atomic_load_n(&s->nostash, __ATOMIC_RELAXED)) && o != me) goto orphan;
    if (HK_UNLIKELY(!h->free_any) && o == me &&
        (s->list == HK_LIST_FULL || (s->list == HK_LIST_PARTIAL && hk_owned_entry(h, s)->lim == 0)))
        goto mine;
    if (HK_UNLIKELY(h->room[c] <= 1)) goto roomless;
    hk_link_set(p, h->free[c]);
    hk_mark_as(p, hk_free_mark());
    h->free[c] = p;
    h->room[c]--;
    /* Every 32nd to 95th block taken looks at the clock (hk_heap_stash_tick): a thread that
     * lives on other threads' blocks takes no refill, and its tick must come all the same.
     * Not each 16th, as refills do: that cost 5% of shared_swap's time freeing by slab
     * metadata (2 threads, 1,000 slots). A countdown, one instruction and a branch; the takes
     * are counted a countdown at a time when the clock is looked at, and whose block that
     * one was stands for all of them (2 or 3). */
    if (HK_LIKELY(--h->fclock >= 0)) return HK_META_TAKEN;
    return o == me ? HK_META_TICK_OWN : HK_META_TICK;
roomless:
    /* At its last: the block takes it and the room is made up, or the cache goes home, as on
     * free's fast path (hk_heap_free_last_room), if malloc took blocks of the class since the
     * room was last made up or the block is the thread's own. Another live thread's block, of
     * a class malloc took nothing of meanwhile, goes home alone (the cache's walk would send
     * the thread's own blocks with it, which it may reuse). */
    if (h->room[c] == 1 && (h->taken[c] != 0 || o == me)) return HK_META_LAST_ROOM;
    if (o == me || h->taken[c] != 0) goto refused;
    h->frefused++;
    return HK_META_HOME;
unstashed:
    /* Another live thread's block that no cache of this thread takes: a consumer's, which
     * does not allocate the class (or holds no slab at all). It goes home as the full path
     * would send it, after the same checks (hk_free_dispatch's stash finds no current slab
     * either), where its exit hook flushes the batch and nothing is counted. An orphan's
     * takes its own short path (hk_heap_free_orphan). */
    if (o != me) {
        if (o != NULL && h->hooked && !hk_counting) {
            h->frefused++;
            return HK_META_HOME;
        }
        goto orphan;
    }
    if (o != NULL) goto mine;
refused:
    if (HK_UNLIKELY(h == &hk_heap_none)) return HK_META_REFUSED; /* never written */
    h->fown += atomic_load_explicit(&s->owner, memory_order_relaxed) == h->owner;
    h->frefused++;
    return HK_META_REFUSED;
mine:
    /* A block of one of the thread's own slabs that no cache of the thread takes: a thread
     * that frees what it took in from an exited one and allocates none of it
     * (teardown_handoff), or one that frees a class it no longer allocates, and a full slab's
     * block or one of a slab that takes its table entry back while the thread frees by the
     * table. It goes to its slab as the full path would send it (hk_heap_free_own), after the
     * same checks; counted as a refusal of the thread's own, as the full path's are. */
    if (HK_UNLIKELY(hk_counting)) goto refused;
    h->fown++;
    h->frefused++;
    return HK_META_OWN;
orphan:
    /* A block of an orphan (a slab whose owner exited): to the orphans' batch
     * (hk_heap_free_orphan), without this function's checks made again; a refusal of
     * another thread's block, as the full path's are. */
    if (o != NULL || !h->hooked || HK_UNLIKELY(hk_counting)) goto refused;
    h->frefused++;
    return HK_META_ORPHAN;
}

/* The clock is due at a free of hk_free_by_meta, of one of the thread's own slabs or not
 * (own): the takes of the countdown are counted, the block as a sample of whose they were,
 * and the tick runs if it is due, with the heap marked busy, as the full path would run it.
 * Out of line, so that the second try's hits keep no frame; before, each 16th stash took the
 * full path for it (about 6% of shared_swap's frees, a couple of hundred instructions each).
 * Each take counted whose it was before (hk_heap_choose_free reads it while the thread frees
 * by slab metadata): 5 instructions of the 59 a take costs (callgrind, shared_swap 2 2000000
 * 1000 0). The countdown's length is drawn at random, so that frees of a period dividing it
 * (own and other threads' blocks in turn) cannot make the sample always the same. */
static HK_NOINLINE void hk_heap_stash_tick(struct hk_heap *h, int own) {
    uint32_t period = h->fperiod;
    h->ftaken += period;
    if (own) h->fown += period;
    h->fperiod = HK_FCLOCK_TAKES / 2 + (uint32_t)(hk_heap_random(h) % HK_FCLOCK_TAKES);
    h->fclock = (int32_t)h->fperiod - 1;
    if (!h->owner || h->exiting) return;
    hk_heap_enter(h);
    /* Freeing by the table, the thread's own blocks taken here missed it: one in the sample
     * stands for the countdown's. */
    if (own && !h->free_any) hk_owned_missed(h, period);
    hk_heap_tick_if_due(h);
    hk_heap_leave(h);
}
#endif

/* The full path of free's slow path (s: p's slab, or NULL outside every SuperSlab), with the
 * heap marked busy; out of line, so that hk_free_by_meta's hits need no stack frame. */
/* Leaves a free's slow path: what a batch sent away asks for (a flooded parked record, the
 * tick), then the heap unmarked. */
static inline void hk_heap_free_leave(struct hk_heap *h) {
    if (HK_UNLIKELY(h->give_up != NULL)) hk_heap_give_up_wanted(h);
    if (HK_UNLIKELY(h->flushed) && h->owner && !h->exiting) {
        h->flushed = 0;
        hk_heap_maybe_tick(h);
    }
    hk_heap_leave(h);
}

static HK_NOINLINE void hk_heap_free_full(struct hk_heap *h, struct hk_slab *s, void *p,
                                          const char *op) {
    hk_heap_enter(h);
    if (HK_LIKELY(s != NULL)) hk_heap_free_in_slab(h, s, p, op);
    else hk_heap_free_outside(p, op);
    hk_heap_free_leave(h);
}

#ifndef HK_HARDENED
/* free's slow path for a block hk_free_by_meta has checked (a carved block start of another
 * live thread's small slab, not marked free) and found no room for: it goes home at once, as
 * the full path would send it after the same checks again (hk_free_dispatch, whose stash
 * would find no room either). Where a thread frees a burst of other threads' blocks of a
 * class before it allocates the class again (scatter), a fifth of its frees of blocks of 640
 * bytes and more come here. */
static HK_NOINLINE void hk_heap_free_home(struct hk_heap *h, void *p) {
    struct hk_slab *s = hk_slot_of((uintptr_t)p); /* a small slab is one slot */
    hk_heap_enter(h);
    hk_free_home(h, s, p);
    hk_heap_free_leave(h);
}
#endif

#ifndef HK_HARDENED
/* free's slow path for a block of an orphan (s has no owner): hk_orphan_fast with the heap
 * marked busy (a helper flushes the batches of an owner whose inbox waits, hk_heap_help, and a
 * thread that only frees exited threads' blocks never takes its inbox), else the full path.
 * A function of its own, reached by a tail call once hk_free_by_meta has refused, so that
 * neither the stash's hits (prod_cons's consumer paid 9 instructions a free with the test
 * inside hk_free_by_meta) nor the orphans' frees pay the full path's frame (18 instructions). */
static HK_NOINLINE void hk_heap_free_orphan(struct hk_heap *h, struct hk_slab *s, void *p,
                                            const char *op, int checked) {
    unsigned c = __atomic_load_n(&s->cls, __ATOMIC_ACQUIRE);
    if (c < HK_NSMALL) {
        /* hk_heap_enter, except that a heap a helper holds goes to the full path, which
         * waits: no call here, so no register to save (8 instructions a free). */
        hk_chaos();
        atomic_store_explicit(&h->busy, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        int done = !atomic_load_explicit(&h->claimed, memory_order_acquire) &&
                   hk_orphan_fast(h, s, c, p, checked);
        hk_heap_leave(h);
        if (done) return;
    }
    hk_heap_free_full(h, s, p, op);
}
#endif

#ifndef HK_HARDENED
/* free's slow path for a block hk_free_by_meta has checked and found its class's room at its
 * last (1): the block takes it, as on free's fast path, and the cache whose room ran out
 * makes it up or goes home (hk_heap_cache_full). That is the fast path's way for the thread's
 * own blocks and for blocks the thread will reuse (malloc took some of the class since the
 * room was last made up); before, these went the full path one by one (scatter, 2 threads,
 * freeing by slab metadata: about 155 instructions each, 12% of its frees). */
static HK_NOINLINE void hk_heap_free_last_room(struct hk_heap *h, void *p) {
    const struct hk_slab *s = hk_slot_of((uintptr_t)p); /* a small slab is one slot */
    unsigned c = __atomic_load_n(&s->cls, __ATOMIC_RELAXED);
    int own = atomic_load_explicit(&s->owner, memory_order_relaxed) == h->owner;
    hk_link_set(p, h->free[c]);
    hk_mark_as(p, hk_free_mark());
    h->free[c] = p;
    h->room[c] = 0;
    hk_heap_cache_full(&h->free[c]);
    if (--h->fclock < 0) hk_heap_stash_tick(h, own);
}
#endif

#ifndef HK_HARDENED
/* free's slow path for a block hk_free_by_meta has checked (a carved block start of one of the
 * thread's own small slabs, not marked free) and no cache of the thread takes: what the full
 * path does with it after the same checks again (hk_free_mine), with the heap marked busy.
 * teardown 200000 2 16 128 random 42 1 (every free of a block of the heap that the thread
 * took in from the exited one before it) sent 382 K of its 400 K frees through the full
 * path. */
static HK_NOINLINE void hk_heap_free_own(struct hk_heap *h, void *p) {
    struct hk_slab *s = hk_slot_of((uintptr_t)p); /* a small slab is one slot */
    hk_heap_enter(h);
    /* hk_free_by_meta read the owner before the heap was marked busy: a helper may have let
     * the slab go to the orphans since (hk_heap_give_up_partial), and freed as the thread's
     * own, its last block emptied it into the pool while it stayed on the orphans' list (the
     * next adoption took a slab of the pool: stress with HAKMEM_PURGE_DELAY_MS=0
     * HAKMEM_SOFT_CAP=0, about 1 run in 120). Read again now that no helper can change it. */
    if (HK_LIKELY(atomic_load_explicit(&s->owner, memory_order_relaxed) == h->owner))
        hk_free_mine(h, s, __atomic_load_n(&s->cls, __ATOMIC_RELAXED), p);
    else
        hk_free_dispatch(h, s, p);
    hk_heap_free_leave(h);
}
#endif

#ifndef HK_HARDENED
/* hk_heap_free_orphan for a block hk_free_by_meta has checked (a carved block start of an
 * orphan's small slab, not marked free). The slot is looked up here, not by the caller, so
 * that the second try's hits keep it in no register of their own. */
static HK_NOINLINE void hk_heap_free_orphan_checked(struct hk_heap *h, void *p) {
    hk_heap_free_orphan(h, hk_slot_of((uintptr_t)p), p, "free", 1);
}
#endif

/* free's slow path past its second try: p lies in a SuperSlab. */
static HK_NOINLINE void hk_heap_free_slab(struct hk_heap *h, void *p, const char *op) {
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
#ifndef HK_HARDENED
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) == NULL) {
        hk_heap_free_orphan(h, s, p, op, 0);
        return;
    }
#endif
    hk_heap_free_full(h, s, p, op);
}

/* free's slow path in a thread without a heap record: it takes one. Apart, so that the slow
 * path's common cases call nothing and need no stack frame. */
static HK_NOINLINE void hk_heap_free_first(void *p) {
    if (hk_heap_record_take() == NULL) {
        hk_heap_free_bare(p, "free");
        return;
    }
    hk_heap_free_slow(p); /* once: the record is the thread's now */
}

/* free's slow path past its second try for p in a SuperSlab, named op: in a thread without a
 * record yet, through hk_heap_free_first. */
static inline void hk_heap_free_past(struct hk_heap *h, void *p, const char *op) {
    if (HK_UNLIKELY(h == &hk_heap_none)) hk_heap_free_first(p);
    else hk_heap_free_slab(h, p, op);
}

#ifndef HK_HARDENED
/* Kept mid frees between two looks at the clock (hk_heap_free_mid): a thread that lives on its
 * kept blocks refills nothing, and its tick must come all the same. Counted as slow-path
 * events (every 17th), they sent 1 free in 17 through the full path, about 150 instructions
 * each: tight 100000 157.2 -> 153.5 instructions a pair with 64. */
#define HK_MID_KEPT_TICK 64

/* free's slow path for a pointer whose slot heads no small slab (hk_free_by_meta): a block of
 * one of the thread's own mid spans that hk_mid_keep would keep is kept here, after the full
 * path's checks (a carved block start, not marked free) and without its frame or the heap
 * marked busy, as the stash keeps a small block (a helper leaves the owner's caches alone).
 * Anything else, a free that would send other kept blocks home, and one where the clock is
 * due (the full path's free reads it) go on to the full path from here, as the caller would
 * send them: a tail call, which spares the caller's return through its frame. tight 100000:
 * 244 -> 210 instructions a pair (1.18 times the speed); the tail call and hk_slab_offset,
 * free 128 -> 110. */
static HK_NOINLINE void hk_heap_free_mid(struct hk_heap *h, void *p) {
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
    unsigned c = __atomic_load_n(&s->cls, __ATOMIC_ACQUIRE);
    if (HK_LIKELY(c >= HK_NSMALL && c < HK_NCLASS && hk_mid_keeps(h, c) &&
                  atomic_load_explicit(&s->owner, memory_order_relaxed) == h->owner &&
                  hk_span_block_start(s, c, (uintptr_t)p) && !hk_marked_free(p) &&
                  hk_mid_within(h, c))) {
        if (HK_LIKELY(h->mid_countdown != 0)) {
            hk_block_push(&h->free[c], p);
            h->mid_kept |= (uint64_t)1 << c;
            h->mid_countdown--;
            if (HK_UNLIKELY(s == h->cur[c] && !s->entered)) { /* as hk_mid_keep does */
                hk_heap_enter(h); /* the table changes: no helper at work meanwhile */
                hk_owned_set_span(h, s);
                hk_heap_leave(h);
            }
            return;
        }
        /* The clock is due: the full path's free reads it. Here only, in a heap that keeps
         * blocks: a thread without a record frees on hk_heap_none, which is never written. */
        h->mid_countdown = HK_MID_KEPT_TICK;
        h->tick_countdown = 0;
    }
    hk_heap_free_past(h, p, "free");
}
#endif

void hk_heap_free_slow(void *p) {
    static const char op[] = "free";
    /* First, before a record is taken (a thread may only ever free NULL), and as cheap as it
     * can be: programs free NULL often (random_mixed's empty slots: 568,000 of 1.28 M). */
    if (p == NULL) return;
    /* A thread without a record yet frees on hk_heap_none, on which hk_free_by_meta refuses
     * everything (its caches take nothing) without a write; it takes a record below. Tested
     * there, not here: 3 instructions fewer on the second try's hits. */
    struct hk_heap *h = hk_tls.heap;
    if (HK_LIKELY(hk_is_superslab((uintptr_t)p))) {
#ifndef HK_HARDENED
        enum hk_meta done = hk_free_by_meta(h, p);
        if (HK_LIKELY(done == HK_META_TAKEN)) return;
        switch (done) {
        case HK_META_TICK:
        case HK_META_TICK_OWN: hk_heap_stash_tick(h, done == HK_META_TICK_OWN); return;
        case HK_META_HOME: hk_heap_free_home(h, p); return;
        case HK_META_LAST_ROOM: hk_heap_free_last_room(h, p); return;
        case HK_META_OWN: hk_heap_free_own(h, p); return;
        case HK_META_ORPHAN: hk_heap_free_orphan_checked(h, p); return;
        case HK_META_MID: hk_heap_free_mid(h, p); return;
        case HK_META_TAKEN:
        case HK_META_REFUSED: break;
        }
#endif
        hk_heap_free_past(h, p, op);
        return;
    }
    if (HK_UNLIKELY(h == &hk_heap_none)) hk_heap_free_first(p);
    else hk_heap_free_full(h, NULL, p, op);
}

/* --- malloc's slow path ---------------------------------------------------------------------- */

#ifndef HK_HARDENED
/* Whether more than HK_SHARE_THREADS threads have heaps set up now (read racily: a hint). */
static int hk_heaps_many(void) {
    uint64_t started = atomic_load_explicit(&hk_ctr.threads_started, memory_order_relaxed);
    uint64_t exited = atomic_load_explicit(&hk_ctr.threads_exited, memory_order_relaxed);
    return started - exited > HK_SHARE_THREADS;
}
#endif

#ifndef HK_HARDENED
/* The free list l of small slab s (one slot) as malloc takes it (hk_heap_fill), in address
 * order where it is a list of this thread's own frees, so that malloc hands its blocks out as
 * they lie. A free list lies in the order its blocks were freed: a program that makes new
 * objects after freeing old ones all over its heap (a mark-and-sweep collector's sweep) got
 * them scattered over each slab, and its later walks of them in the order it made them missed
 * the cache at every step (lua5.4 making 100,000 tables a round and dropping half: 4.9 s,
 * 2.6 with this, jemalloc 2.9; of its allocations of one size, 13.6% lay just after the one
 * before, 99.6% with this, jemalloc's 97.6%).
 * The order comes from the slab's bitmap of free blocks, which such a list keeps as its
 * blocks join it (superslab.h, hk_list_joins): no walk of the list, whose every link would
 * be a miss where the blocks were freed long ago (sorting by a walk cost bench/sweep a
 * quarter of its time). The bitmap is read and cleared one word at a time as the list is
 * written; it holds as many bits as the list has blocks (carved - used), which is checked
 * first: where it does not, the list is taken as it lies.
 * A list that holds another thread's free, or that the thread before this one (whose heap
 * this one took over) made, is taken as it lies: no bitmap tells its order, and its blocks'
 * lines lie in other cores' caches (walking them to sort them cost prod_cons's producer a
 * fifth of its speed, larson with threads of 1,000 steps an eighth). */
static void *hk_list_in_order(const struct hk_heap *h, struct hk_slab *s, void *l) {
    uint64_t *bits = hk_slab_fbits(s);
    if (hk_list_key(s) != h->tag) { /* another's list, or a bitmap with bits of no list */
        s->bits_dirty = 1;
        return l;
    }
    unsigned top = (s->carved + 63) >> 6, have = 0; /* the words that can hold a bit */
    for (unsigned w = 0; w < top; w++) have += (unsigned)__builtin_popcountll(bits[w]);
    HK_ASSERT(have == s->carved - s->used); /* every block that joined the list set its bit */
    if (HK_UNLIKELY(have != s->carved - s->used)) {
        s->bits_dirty = 1;
        return l;
    }
    uintptr_t base = (uintptr_t)hk_slab_base(s);
    size_t bs = s->bsize;
    void *head = NULL, *prev = NULL;
    for (unsigned w = 0; w < top; w++) {
        for (uint64_t m = bits[w]; m; m &= m - 1) {
            void *b = (char *)base + ((size_t)w * 64 + (unsigned)__builtin_ctzll(m)) * bs;
            if (prev) hk_link_set(prev, b);
            else head = b;
            prev = b;
        }
        bits[w] = 0;
    }
    hk_link_set(prev, NULL);
    return head;
}
#endif

/* Makes free[c] non-empty: the current slab's frees, fresh carving, an owned partial slab, a
 * kept empty one, an adopted orphan, or a slab from the pool, in that order. */
static int hk_heap_fill(struct hk_heap *h, unsigned c) {
#ifndef HK_HARDENED
    if (c >= HK_XFER_FIRST && !h->no_xfer) {
        /* Other threads' blocks that their freeing threads could not keep (transfer.h): this
         * thread's own on their way to the list first, then the list's. */
        unsigned i = c - HK_XFER_FIRST;
        void *b;
        if (c < HK_NSMALL && (h->xpend_mask >> c & 1)) {
            b = h->xpend[i];
            h->xpend[i] = NULL;
            h->xpend_n[i] = 0;
            h->xpend_mask &= ~((uint64_t)1 << c);
        } else {
            /* A small class takes up to HK_XFER_TAKE_SMALL blocks, a mid class one (transfer.h). */
            b = hk_xfer_take(c, c < HK_NSMALL ? HK_XFER_TAKE_SMALL : 1);
        }
        if (b) {
            h->free[c] = b;
            return 1;
        }
    }
    /* A thread's first blocks of a small class of which it holds no slab, while more than
     * HK_SHARE_THREADS threads have heaps: from the class's shared slab, a cache line's worth a
     * refill (orphan.h). */
    if (c < HK_NSMALL && h->shared_n[c] < hk_cfg.shared_blocks &&
        (!(h->slabbed >> c & 1) ||
         (!h->cur[c] && !h->partial[c] && !h->retained[c] && !h->full[c])) &&
        hk_heaps_many()) {
        uint32_t n;
        void *b = hk_orphan_share(c, &n);
        if (b) {
            h->shared_n[c] = (uint8_t)(h->shared_n[c] + n);
            h->free[c] = b;
            return 1;
        }
    }
#endif
    for (;;) {
        struct hk_slab *s = h->cur[c];
        if (s) {
            if (s->free && c >= HK_NSMALL) {
                /* Mid classes take one block at a time: the cache never holds a span's free
                 * blocks (a block the thread keeps, hk_mid_keep, counts as live), so a span
                 * whose blocks are all free is empty, and goes. */
                h->free[c] = hk_slab_take_one(s);
                return 1;
            }
            if (s->free) {
#ifndef HK_HARDENED
                /* Taken in order, the list leaves its bitmap clear and keeps the thread's tag:
                 * an empty list is of the thread's own frees, and the next ones join it on
                 * the walks' first step. Taken as it lay, the bitmap is dirty (the key is not
                 * the tag either way). */
                h->free[c] = hk_list_in_order(h, s, s->free);
#else
                h->free[c] = s->free;
                s->list_tag = 0;
#endif
                s->free = NULL;
                s->used = s->carved;
                return 1;
            }
            if (s->carved < s->capacity) {
                hk_heap_carve(h, s, c);
                return 1;
            }
            hk_heap_set_current(h, c, NULL);
            hk_heap_list_add(h, s, HK_LIST_FULL);
        }
        if ((s = h->partial[c]) != NULL || (s = h->retained[c]) != NULL) {
            if (s->list == HK_LIST_RETAINED) h->left_idle -= (intptr_t)hk_slab_bytes(s);
            hk_heap_list_remove(h, s);
        } else {
#ifndef HK_HARDENED
            /* Its shared blocks were not enough (not: there were none, too few threads). */
            if (c < HK_NSMALL && h->shared_n[c] >= hk_cfg.shared_blocks)
                h->outgrew |= (uint64_t)1 << c;
#endif
            if ((s = hk_orphan_adopt(c, h->owner)) == NULL) {
                hk_heap_unretain_idle(h, c);
                if ((s = hk_pool_acquire(c)) == NULL) return 0;
                if (HK_UNLIKELY(h->gave_up >> c & 1)) hk_heap_retaken(h, c);
                h->left_idle -= (intptr_t)hk_slab_bytes(s);
                atomic_store_explicit(&s->owner, h->owner, memory_order_release);
            }
        }
        s->list = HK_LIST_CURRENT;
        hk_heap_set_current(h, c, s);
    }
}

static int hk_heap_init_from(struct hk_heap *h, struct hk_owner *want) {
    if (!hk_init()) return 0;
    /* Start-up may allocate (pthread_atfork, the background thread): that nested call has set
     * this heap up already, and its slabs belong to the record it made. */
    if (h->owner) return 1;
    struct hk_owner *parked = want && hk_owner_unpark_this(want) ? want : hk_owner_unpark(0);
    h->owner = parked ? parked : hk_owner_new();
    if (!h->owner) return 0;
    static _Atomic unsigned tags;
    h->tag = (uint8_t)(atomic_fetch_add_explicit(&tags, 1, memory_order_relaxed) % 255 + 1);
    atomic_store_explicit(&h->owner->helped, 0, memory_order_relaxed);
    atomic_store_explicit(&h->owner->last_tick, hk_now_ms(), memory_order_relaxed);
#ifndef HK_HARDENED
    /* A thread that takes over an exited thread's heap is one of threads that come and go:
     * of a class its predecessor outgrew the shared blocks of, it takes none. Threads that
     * each allocate many blocks (thread_churn 2 300 2000 16 3072 42 main: 0.91 times as fast
     * and 15% more peak RSS when every thread took shared blocks, whose lifetimes then mix in
     * one slab) go on with slabs of their own, and threads that each allocate a few (crowd)
     * go on sharing. */
    h->outgrew = parked ? parked->park_outgrew : 0;
    for (unsigned c = 0; c < HK_NSMALL; c++) h->shared_n[c] = h->outgrew >> c & 1 ? UINT8_MAX : 0;
#endif
    /* Its first table becomes the heap's with its first slab (hk_owned_set). */
    if (h->otab == &hk_owned_none && h->exiting) {
        /* Torn down before: its first table holds what it last held. */
        hk_heap_rest_written(h);
        memset(h->owned, 0, sizeof h->owned);
        memset(h->owned_slab, 0, sizeof h->owned_slab);
    }
    if (parked) {
        hk_heap_take_over(h, parked);
        HK_STAT_INC(heaps_taken_over);
        if (HK_TRACING(HK_T_THREAD))
            hk_trace(HK_T_THREAD, "take over (an exited thread's heap, whole)", "owner@",
                     (uintptr_t)parked, NULL, 0, NULL, 0);
    }
    atomic_store_explicit(&h->owner->heap, h, memory_order_release);
    hk_heap_watch_exit(h);
    HK_STAT_INC(threads_started);
    if (HK_TRACING(HK_T_THREAD))
        hk_trace(HK_T_THREAD, "start (a thread's heap is set up)", "owner@", (uintptr_t)h->owner,
                 NULL, 0, NULL, 0);
    return 1;
}

void *hk_heap_refill(unsigned c) {
    struct hk_heap *h = hk_heap_self();
    if (HK_UNLIKELY(h == NULL || (h->owner == NULL && !hk_heap_init(h)))) {
        errno = ENOMEM;
        return NULL;
    }
    hk_heap_enter(h);
    if (hk_owner_pending(h->owner)) hk_heap_drain(h);
    if (h->batch_mask || h->orphan_n) hk_batch_flush_all(h);
#ifndef HK_HARDENED
    if (h->xpend_mask & ~((uint64_t)1 << c)) hk_xpend_flush_all(h, (uint64_t)1 << c);
    if (h->torn) hk_heap_torn_home(h, c);
    if (h->side_classes >> c & 1) hk_side_disarm(h, c); /* malloc wants the class again */
#endif
    if (HK_UNLIKELY(h->give_up != NULL)) hk_heap_give_up_wanted(h);
    hk_heap_maybe_tick(h);
    h->refilled |= (uint64_t)1 << c;
    h->mid_reuse |= h->mid_freed & ((uint64_t)1 << c); /* freed, and allocated again */
    h->mid_freed &= ~((uint64_t)1 << c);
    h->allocated |= (uint64_t)1 << c;
#ifndef HK_HARDENED
    if (h->room_sent >> c & 1) hk_room_grow(h, c);
    hk_room_set(h, c, hk_room_full(h, c));
#endif
    void *p = NULL;
    if (h->free[c] || hk_heap_fill(h, c)) {
        p = hk_heap_alloc(c);
    } else {
        if (HK_TRACING(HK_T_FAIL))
            hk_trace(HK_T_FAIL, "malloc failed: MapFail (the OS refused memory)", "bytes",
                     hk_class_size[c], NULL, 0, NULL, 0);
        errno = ENOMEM;
    }
    hk_heap_leave(h);
    return p;
}

void *hk_heap_refill_size(size_t n) {
    unsigned c = hk_class_of(n);
    void *p = hk_heap_refill(c);
    if (HK_UNLIKELY(hk_counting) && p) hk_tally_bump(&hk_tls.heap->owner->cold->tally.allocs[c]);
    return p;
}

void hk_heap_count_alloc(unsigned c) {
    struct hk_owner *o = hk_tls.heap->owner;
    if (o) hk_tally_bump(&o->cold->tally.allocs[c]);
}

void hk_heap_count_large(int alloc) {
    struct hk_heap *h = hk_heap_self();
    if (!h || (!h->owner && !hk_heap_init(h))) return;
    struct hk_tally *t = &h->owner->cold->tally;
    hk_tally_bump(alloc ? &t->large_allocs : &t->large_frees);
}

/* Counts a free of a block of class c (remote: of a slab the calling thread does not own). */
static void hk_heap_count_free(struct hk_heap *h, unsigned c, int remote) {
    if (!h->owner && !hk_heap_init(h)) return;
    struct hk_tally *t = &h->owner->cold->tally;
    hk_tally_bump(&t->frees[c]);
    if (remote) hk_tally_bump(&t->remote_frees[c]);
}

void *hk_heap_corrupt(unsigned c, void *b) {
    hk_report("malloc", b, "corrupted free list (a freed block was written to)");
    /* The blocks left in the cache are lost: none of them can be trusted. */
    hk_tls.heap->free[c] = NULL; /* a block was popped: the thread has a record */
    return hk_heap_refill(c);
}

void *hk_heap_corrupt_size(size_t n, void *b) {
    return hk_heap_corrupt(hk_class_table[(n + 15) >> 4], b);
}

/* --- thread exit ---------------------------------------------------------------------------- */

/* Hands an owned slab that is no longer current back to the pool, or puts it on *orphans
 * (linked by next) to be abandoned. */
static void hk_heap_let_go(struct hk_slab *s, uint64_t now, struct hk_slab **orphans) {
    s->list = HK_LIST_NONE;
    if (s->used == 0) {
        hk_heap_release(s, now);
    } else {
        s->next = *orphans;
        *orphans = s;
    }
}

/* A helper holding idle heap oh (see "Idle owners") lets its partial slabs go: the free blocks
 * on them serve whichever thread adopts them, where before they waited for an owner that may
 * not allocate again (larson's main thread, blocked for the whole run, held 348 slabs of which
 * 98% was free, a fifth of the peak). Current and full slabs stay; so do the owner's cached
 * blocks, still live for their slabs, and a free of one later finds the slab's new owner. The
 * owner's free reads the table without marking the heap busy: the one store of each entry's
 * bound (hk_owned_clear) makes it admit nothing, and a free that read it before puts the block
 * into the owner's cache, which leaves the slab alone. */
#ifndef HK_HARDENED
static void hk_heap_give_up_partial(struct hk_heap *oh, uint64_t now) {
    int any = 0;
    for (uint64_t m = oh->slabbed; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        struct hk_slab *s, *next, *orphans = NULL;
        for (s = oh->partial[c]; s; s = next) {
            next = s->next;
            if (s->side) continue; /* its owner's free may push onto its side list */
            hk_partial_unlink(oh, s);
            hk_owned_clear(oh, s);
            s->let_go = 1; /* read under the orphans' stripe, which abandon takes */
            hk_heap_let_go(s, now, &orphans);
            any = 1;
        }
        hk_orphan_abandon(orphans);
    }
    if (any && HK_TRACING(HK_T_THREAD))
        hk_trace(HK_T_THREAD, "let go (an idle thread's partial slabs, to the orphans)", "owner@",
                 (uintptr_t)oh->owner, NULL, 0, NULL, 0);
}
#endif

void hk_heap_give_up_all(void) {
    struct hk_heap *h = hk_heap_self();
    if (!h || (!h->owner && !hk_heap_init(h))) return;
    hk_heap_enter(h);
    hk_heap_give_up_parked(h, UINT64_MAX, hk_now_ms());
    hk_heap_leave(h);
}

static void hk_heap_teardown(struct hk_heap *h) {
    struct hk_owner *o = h->owner;
    if (!o) return;
    hk_heap_enter(h);
    HK_STAT_INC(threads_exited);
    if (HK_TRACING(HK_T_THREAD))
        hk_trace(HK_T_THREAD, "exit (a thread's heap is handed over)", "owner@",
                 (uintptr_t)h->owner, NULL, 0, NULL, 0);
    uint64_t now = hk_now_ms();
    /* Stashes and caches first, while other threads' blocks still travel in batches; nothing
     * is stashed again from here on. */
    h->no_stash = 1;
    hk_heap_may_take(h);
    hk_heap_drain(h);
    hk_heap_uncache_all(h);
#ifndef HK_HARDENED
    hk_xpend_flush_all(h, 0); /* onto the lists, for other threads */
#endif
    hk_batch_flush_all(h);
    h->give_up = NULL; /* a record its batches flooded: given up by time instead */
    /* From here on, remote frees are not batched or stashed: nothing must be added to this
     * heap while it is being emptied. */
    h->hooked = 0;
    hk_heap_may_take(h);
    h->exiting = 1;
    /* The heap is handed over (see "Handover"): current slabs join the lists, empty ones and
     * the kept ones go to the pool, and the lists move into the record. Only the classes it
     * held slabs of are looked at, and written: a thread that owned none leaves the rest of
     * its record untouched (record.h), and a record's park lists are empty. */
    for (uint64_t m = h->slabbed; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        struct hk_slab *s = h->cur[c];
        if (s) {
            hk_heap_set_current(h, c, NULL);
            if (s->used == 0) hk_heap_release(s, now);
            else
                hk_heap_list_add(h, s, s->free || s->carved < s->capacity ? HK_LIST_PARTIAL
                                                                          : HK_LIST_FULL);
        }
        while ((s = h->retained[c]) != NULL) {
            uint64_t idle = s->idle_since;
            hk_heap_list_remove(h, s);
            hk_heap_release(s, idle);
        }
        if (h->partial[c] || h->full[c]) {
            o->cold->park_partial[c] = h->partial[c];
            o->cold->park_partial_tail[c] = h->partial_tail[c];
            o->cold->park_full[c] = h->full[c];
            o->park_mask |= (uint64_t)1 << c;
            h->partial[c] = h->partial_tail[c] = h->full[c] = NULL;
        }
    }
    h->slabbed = 0;
#ifndef HK_HARDENED
    o->park_outgrew = h->outgrew;
#endif
    /* Helpers: nothing to do. One that loaded the heap before this store holds the claim:
     * this thread's storage must outlive its flag on it (see "Idle owners"). */
    hk_chaos(); /* a helper may load the heap before it is unpublished */
    atomic_store_explicit(&o->heap, NULL, memory_order_seq_cst);
    while (atomic_load_explicit(&o->claim, memory_order_seq_cst)) sched_yield();
    /* The heap goes back to the table it started with, which admits nothing, and a table it
     * grew stays with the record as its spare (hk_owned_switch); one set up again later (by
     * a later destructor's malloc) clears its first table then (hk_heap_init). Clearing it
     * here cost every exiting thread 20 KiB of stores when the first table had 512 entries,
     * 16,000 instructions: 5% of all in larson with a new thread every 1,000 replacements. */
    h->free_any = 0; /* a heap set up again starts by its table */
    hk_owned_switch(h, (struct hk_owned *)&hk_owned_none, 1);
    h->oslab = hk_heap_none.oslab;
    h->omask = 0;
    hk_heap_leave(h);
    h->owner = NULL;
    hk_owner_park(o, now);
}

uint32_t hk_heap_slab_live(const struct hk_slab *s) {
    const struct hk_heap *h = hk_tls.heap;
    uint32_t live = s->used;
#ifndef HK_HARDENED
    if (s->side) { /* less the blocks on its side list */
        unsigned i = s->side - 1u;
        live -= h->side->armed[i] - (uint32_t)*hk_side_left(h->side, i);
    }
#endif
    if (s->cls < HK_NCLASS) {
        for (void *b = h->free[s->cls]; b; b = hk_link_get(b))
            if (hk_slab_of((uintptr_t)b) == s) live--;
    }
    return live;
}
