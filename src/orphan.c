#include "orphan.h"
#include "chaos.h"

#include <pthread.h>

#include "block.h"
#include "clock.h"
#include "lock.h"
#include "policy.h"
#include "pool.h"
#include "report.h"
#include "stats.h"
#include "trace.h"

/* The lists of class c are guarded by stripe c % HK_LOCK_STRIPES: threads that exit, adopt
 * and free into orphans of different classes do not wait for each other. */
static struct hk_lock hk_orphan_locks[HK_LOCK_STRIPES] = HK_LOCK_STRIPES_INIT;

static struct hk_lock *hk_orphan_lock(unsigned c) { return &hk_orphan_locks[c % HK_LOCK_STRIPES]; }
static struct hk_slab *hk_orphan_partial[HK_NCLASS]; /* orphans with free blocks */
static struct hk_slab *hk_orphan_full[HK_NCLASS];    /* orphans without */
/* Length of hk_orphan_partial[c], changed under the lock and read without it, so a refill
 * that has nothing to adopt does not take the lock. */
static _Atomic unsigned hk_orphan_avail[HK_NCLASS];
#ifndef HK_HARDENED
/* Each small class's shared slab (orphan.h), NULL when it has none; changed under the class's
 * stripe, read without it by hk_orphan_share_decay as a hint. */
static struct hk_slab *_Atomic hk_orphan_shared[HK_NSMALL];
/* Shared slabs of each small class that were carved to their end and have had every block
 * back, at most HK_SHARE_SPARES, linked by next, newest first (orphan.h); under the class's
 * stripe. */
static struct hk_slab *hk_orphan_spare[HK_NSMALL];
static _Atomic unsigned char hk_orphan_nspare[HK_NSMALL]; /* read without the lock: a hint */
#define HK_SHARE_SPARES 64
#endif

static void hk_orphan_partial_push(struct hk_slab *s) {
    s->list = HK_LIST_ORPHAN_PARTIAL;
    hk_slab_list_push(&hk_orphan_partial[s->cls], s);
    atomic_fetch_add_explicit(&hk_orphan_avail[s->cls], 1, memory_order_relaxed);
}

static void hk_orphan_partial_unlink(struct hk_slab *s) {
    hk_slab_list_unlink(&hk_orphan_partial[s->cls], s);
    atomic_fetch_sub_explicit(&hk_orphan_avail[s->cls], 1, memory_order_relaxed);
}

/* Under the lock: lists orphan s by whether it has free blocks (on its list, or to carve). */
static void hk_orphan_list(struct hk_slab *s) {
    if (s->free || s->carved < s->capacity) {
        hk_orphan_partial_push(s);
    } else {
        s->list = HK_LIST_ORPHAN_FULL;
        hk_slab_list_push(&hk_orphan_full[s->cls], s);
    }
}

void hk_orphan_abandon(struct hk_slab *l) {
    if (!l) return;
    unsigned c = l->cls;
    hk_lock(hk_orphan_lock(c));
    while (l) {
        struct hk_slab *s = l;
        l = s->next;
        HK_ASSERT(s->used > 0 && s->cls == c);
        HK_STAT_INC(slab_abandon);
        __atomic_store_n(&s->nostash, 1, __ATOMIC_RELAXED); /* its blocks go home, not stashed */
        /* seq_cst store: a remote pusher that still sees the old owner pushes into the
         * owner's inbox, which the exiting owner drains after this (see hk_heap_teardown). */
        atomic_store(&s->owner, NULL);
        hk_orphan_list(s);
    }
    hk_unlock(hk_orphan_lock(c));
}

struct hk_slab *hk_orphan_adopt(unsigned c, struct hk_owner *o) {
    struct hk_slab *s;
    /* A stale zero only means this refill takes a fresh slab instead. */
    if (atomic_load_explicit(&hk_orphan_avail[c], memory_order_relaxed) == 0) return NULL;
    hk_lock(hk_orphan_lock(c));
    if ((s = hk_orphan_partial[c]) != NULL) {
        hk_orphan_partial_unlink(s);
        s->list = HK_LIST_NONE;
        /* A slab an exited thread left: its blocks, freed once each by whoever inherited them,
         * go home (heap.h, "Reuse"). One an idle owner let go serves as the adopter's own. */
        __atomic_store_n(&s->nostash, !s->let_go, __ATOMIC_RELAXED);
        s->let_go = 0;
        atomic_store_explicit(&s->owner, o, memory_order_release);
        HK_STAT_INC(slab_adopt);
        if (HK_TRACING(HK_T_THREAD))
            hk_trace(HK_T_THREAD, "adopt (an exited thread's slab)", "class_size", s->bsize,
                     "live", s->used, NULL, 0);
    }
    hk_unlock(hk_orphan_lock(c));
    return s;
}

/* Under the lock: puts slab s, taken off its list, onto *emptied (linked by next) for
 * hk_pool_release after the lock. */
static inline void hk_orphan_emptied(struct hk_slab *s, struct hk_slab **emptied) {
    s->list = HK_LIST_NONE;
    s->next = *emptied;
    *emptied = s;
}

/* Under the lock: moves orphan s, to which blocks were just freed, to the lists its count
 * calls for: none and onto *emptied (linked by next) at 0, else the partial list. */
static inline void hk_orphan_freed(struct hk_slab *s, struct hk_slab **emptied) {
    if (s->list == HK_LIST_SHARED) return; /* serving: it stays, empty or not */
    if (s->used == 0) {
        if (s->list == HK_LIST_ORPHAN_FULL) hk_slab_list_unlink(&hk_orphan_full[s->cls], s);
        else hk_orphan_partial_unlink(s);
#ifndef HK_HARDENED
        if (s->was_shared &&
            atomic_load_explicit(&hk_orphan_nspare[s->cls], memory_order_relaxed) <
                HK_SHARE_SPARES) {
            /* Kept for the class's next shared slab (orphan.h, spares). */
            s->list = HK_LIST_SHARED_SPARE;
            s->idle_since = 0; /* stamped by the next decay */
            s->next = hk_orphan_spare[s->cls];
            hk_orphan_spare[s->cls] = s;
            atomic_fetch_add_explicit(&hk_orphan_nspare[s->cls], 1, memory_order_relaxed);
            return;
        }
#endif
        hk_orphan_emptied(s, emptied);
    } else if (s->list == HK_LIST_ORPHAN_FULL) {
        hk_slab_list_unlink(&hk_orphan_full[s->cls], s);
        hk_orphan_partial_push(s);
    }
}

/* Under the lock: frees block b of slab s if s is an orphan (1), else 0. A slab whose last
 * block this was goes onto *emptied (linked by next) for hk_pool_release after the lock.
 * Every block checks the slab's count; with `search`, one that carries the free mark is
 * looked for on the slab's free list too, to name a block freed twice past the marks
 * (hk_orphan_free_lists, when a run brings more blocks than the slab has live). */
static int hk_orphan_free_locked(struct hk_slab *s, void *b, struct hk_slab **emptied,
                                 int search) {
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) != NULL) return 0;
    if (HK_UNLIKELY(s->used == 0 ||
                    (search && hk_marked_free(b) && hk_list_has(s->free, b, s->capacity)))) {
        hk_report("free", b, "double free");
        return 1;
    }
    hk_list_joins(s, 0, b); /* no owner: any thread's free */
    hk_block_push(&s->free, b);
    s->used--;
    hk_orphan_freed(s, emptied);
    return 1;
}

static void hk_orphan_release(struct hk_slab *emptied) {
    uint64_t now = emptied ? hk_now_ms() : 0;
    while (emptied) {
        struct hk_slab *next = emptied->next;
        hk_pool_release(emptied, now);
        emptied = next;
    }
}

/* p is a block the program frees, which free's paths found without the free mark (they report
 * a marked one), or one that a cache or a list held, marked free by hakmem when it joined it:
 * the mark says nothing of it, and it is checked by the slab's count, as the runs of a batch
 * are (hk_orphan_free_lists). Searched for on the slab's free list, each took a walk of up to
 * the whole list: 260 instructions a block, on average, for the blocks of shared slabs that
 * exiting threads' caches held (crowd). */
int hk_orphan_free(struct hk_slab *s, void *p) {
    struct hk_slab *emptied = NULL;
    /* The class of a slab with a live block cannot change, so the stripe read here is the one
     * that guards s. A slab with no class (or another one by the time the stripe is held) went
     * back to the pool: the block was freed already. */
    unsigned c = __atomic_load_n(&s->cls, __ATOMIC_ACQUIRE);
    if (c != HK_CLS_NONE) {
        hk_chaos(); /* the slab may be adopted or emptied before the stripe is held */
        hk_lock(hk_orphan_lock(c));
        int done = __atomic_load_n(&s->cls, __ATOMIC_RELAXED) == c
                       ? hk_orphan_free_locked(s, p, &emptied, 0)
                       : -1;
        hk_unlock(hk_orphan_lock(c));
        hk_orphan_release(emptied);
        if (done >= 0) return done;
    }
    hk_report("free", p, "double free");
    return 1;
}

/* Whether block b of a list given to hk_orphan_free_lists still carries the free mark its
 * free gave it (the hardened build has no mark, and makes no such lists). */
static inline int hk_orphan_listed(const void *b) {
#ifdef HK_HARDENED
    (void)b;
    return 1;
#else
    return hk_marked_free(b);
#endif
}

void *hk_orphan_free_lists(void *lists[HK_NSMALL], uint64_t mask) {
    struct hk_slab *emptied = NULL;
    void *owned = NULL;
    _Static_assert(HK_NSMALL <= 3 * HK_LOCK_STRIPES, "three classes at most to a stripe");
    /* The stripes the classes in mask fall to (class c: stripe c % 16), visited in order. */
    uint32_t stripes = (uint32_t)((mask | mask >> HK_LOCK_STRIPES | mask >> 2 * HK_LOCK_STRIPES) &
                                  ((1u << HK_LOCK_STRIPES) - 1));
    for (; stripes; stripes &= stripes - 1) {
        unsigned st = (unsigned)__builtin_ctz(stripes);
        hk_lock(&hk_orphan_locks[st]);
        for (unsigned c = st; c < HK_NSMALL; c += HK_LOCK_STRIPES) {
            void *b = lists[c];
            lists[c] = NULL;
            while (b) {
                /* Every block here was marked free when it joined the list: one without its
                 * mark, or outside every SuperSlab, was written to after its free (its link
                 * with it), and the rest of the list is not followed. */
                if (HK_UNLIKELY(!hk_is_superslab((uintptr_t)b) || !hk_orphan_listed(b))) {
                    hk_report("free", b, "corrupted free list (a freed block was written to)");
                    break; /* the rest of the list is lost */
                }
                /* The blocks of one slab that follow each other: a run. A small slab is its
                 * own slot, so blocks of one slot are blocks of one slab. */
                uintptr_t slot = (uintptr_t)b >> HK_SLAB_SHIFT;
                struct hk_slab *s = hk_slot_of((uintptr_t)b);
                void *head = b, *tail = b, *nb = hk_link_get(b);
                uint32_t n = 1;
                while (nb && (uintptr_t)nb >> HK_SLAB_SHIFT == slot && hk_orphan_listed(nb)) {
                    tail = nb;
                    nb = hk_link_get(nb);
                    n++;
                }
                if (atomic_load_explicit(&s->owner, memory_order_relaxed) != NULL) {
                    hk_link_set(tail, owned); /* adopted meanwhile: to its new owner */
                    owned = head;
                } else if (HK_LIKELY(s->used >= n)) {
                    hk_list_joins(s, 0, head);
                    hk_link_set(tail, s->free); /* the run joins the free list whole */
                    s->free = head;
                    s->used -= n;
                    hk_orphan_freed(s, &emptied);
                } else {
                    /* More blocks than the slab has live: one was freed twice in a way the
                     * marks did not catch. Block by block, the full check names it. */
                    for (void *x = head, *nx;; x = nx) {
                        nx = hk_link_get(x);
                        int last = x == tail;
                        hk_orphan_free_locked(s, x, &emptied, 1);
                        if (last) break;
                    }
                }
                b = nb;
            }
        }
        hk_unlock(&hk_orphan_locks[st]);
    }
    hk_orphan_release(emptied);
    return owned;
}

#ifndef HK_HARDENED
/* Under the lock: the next run of shared slab s, linked, NULL when the slab is spent. A run is
 * the fewest blocks that fill whole cache lines (4 blocks of 48 bytes, 2 of 160, 1 of 64), so
 * that no two threads write to one line through blocks of their own (a thread's object it
 * updates all the time, beside another's, would bounce between their cores); from 1 KiB on
 * one block, which shares at most its first and last lines of dozens (blocks of 4,368 bytes,
 * a multiple of 16, would otherwise come 4 at a time, 13 KiB more than the thread asked for).
 * Runs are carved in order, and a slab whose blocks have all come back is carved again from
 * its start. Blocks freed back are handed out again one by one where a block is a run (its
 * lines are its own): else many threads that each take a few blocks, free them and then wait
 * would each leave their blocks' memory unused behind them (crowd ... 0, a thousand threads
 * that free their blocks and wait: 21.8 KiB a thread before, 15.2 now, glibc 11.3; their
 * frees come home at once, heap.c, hk_was_shared). Smaller ones are not, which would break
 * the lines up. */
static void *hk_orphan_share_run(struct hk_slab *s, uint32_t *n) {
    uint32_t bs = s->bsize, low = bs & (0u - bs), r = low >= 64 || bs >= 1024 ? 1 : 64 / low;
    if (s->used == 0 && s->carved) hk_slab_uncarve(s);
    if (r == 1 && s->free) {
        s->idle_since = 0;
        *n = 1;
        return hk_slab_take_one(s);
    }
    if (s->capacity - s->carved < r) return NULL;
    char *p = hk_slab_base(s) + (size_t)s->carved * bs;
    void *head = NULL;
    for (uint32_t i = r; i-- > 0;) hk_block_push(&head, p + (size_t)i * bs);
    __atomic_store_n(&s->carved, s->carved + r, __ATOMIC_RELAXED); /* read by free */
    __atomic_store_n(&s->lim, s->carved * bs, __ATOMIC_RELAXED);
    s->used += r;
    s->idle_since = 0;
    *n = r;
    return head;
}

void *hk_orphan_share(unsigned c, uint32_t *n) {
    struct hk_slab *fresh = NULL;
    void *b = NULL;
    HK_ASSERT(c < HK_NSMALL);
    hk_lock(hk_orphan_lock(c));
    for (;;) {
        struct hk_slab *s = atomic_load_explicit(&hk_orphan_shared[c], memory_order_relaxed);
        if (s && (b = hk_orphan_share_run(s, n)) != NULL) break;
        /* Spent: an orphan like any other from now on, adopted once it has free blocks
         * (blocks freed back, or the few past its last run). */
        if (s) hk_orphan_list(s);
        if (!fresh && (fresh = hk_orphan_spare[c]) != NULL) {
            /* A spare, its blocks all back: carved again from its start (hk_orphan_share_run),
             * over pages that are resident already. */
            hk_orphan_spare[c] = fresh->next;
            atomic_fetch_sub_explicit(&hk_orphan_nspare[c], 1, memory_order_relaxed);
        }
        atomic_store_explicit(&hk_orphan_shared[c], fresh, memory_order_relaxed);
        if (fresh) {
            fresh->list = HK_LIST_SHARED;
            __atomic_store_n(&fresh->was_shared, 1, __ATOMIC_RELAXED); /* read racily: heap.c */
            fresh = NULL;
            continue;
        }
        /* The pool's locks come after the orphans' (hk_fork_prepare), but a slab may take a
         * mapping: not with the stripe held. */
        hk_unlock(hk_orphan_lock(c));
        if ((fresh = hk_pool_acquire(c)) == NULL) return NULL;
        __atomic_store_n(&fresh->nostash, 1, __ATOMIC_RELAXED); /* its blocks come home */
        hk_lock(hk_orphan_lock(c));
        /* Another thread may have put one in meanwhile: the loop serves from it, and this one
         * goes back, unless that one is spent too. */
    }
    hk_unlock(hk_orphan_lock(c));
    if (fresh) hk_pool_release(fresh, hk_now_ms());
    return b;
}

/* Whether slab s, empty, has been idle for the purge delay (always with force); its idle
 * time starts at the first decay that sees it empty. */
static int hk_orphan_idle_due(struct hk_slab *s, uint64_t now, uint64_t delay, int force) {
    if (s->idle_since == 0) s->idle_since = now;
    return force || now - s->idle_since >= delay;
}

/* Under class c's stripe: moves the spares idle for the purge delay (all of them with force)
 * onto *emptied. */
static void hk_orphan_spares_decay(unsigned c, uint64_t now, uint64_t delay, int force,
                                   struct hk_slab **emptied) {
    for (struct hk_slab **at = &hk_orphan_spare[c], *s; (s = *at) != NULL;) {
        if (!hk_orphan_idle_due(s, now, delay, force)) {
            at = &s->next;
            continue;
        }
        *at = s->next;
        atomic_fetch_sub_explicit(&hk_orphan_nspare[c], 1, memory_order_relaxed);
        hk_orphan_emptied(s, emptied);
    }
}

void hk_orphan_share_decay(uint64_t now, int force) {
    struct hk_slab *emptied = NULL;
    uint64_t delay = hk_pol_purge_delay();
    for (unsigned c = 0; c < HK_NSMALL; c++) {
        struct hk_slab *s = atomic_load_explicit(&hk_orphan_shared[c], memory_order_relaxed);
        /* Racy: a stale view only puts the decision off to the next tick. */
        if ((!s || __atomic_load_n(&s->used, __ATOMIC_RELAXED) != 0) &&
            !atomic_load_explicit(&hk_orphan_nspare[c], memory_order_relaxed))
            continue;
        hk_lock(hk_orphan_lock(c));
        if ((s = atomic_load_explicit(&hk_orphan_shared[c], memory_order_relaxed)) != NULL &&
            s->used == 0 && hk_orphan_idle_due(s, now, delay, force)) {
            atomic_store_explicit(&hk_orphan_shared[c], NULL, memory_order_relaxed);
            hk_orphan_emptied(s, &emptied);
        }
        hk_orphan_spares_decay(c, now, delay, force, &emptied);
        hk_unlock(hk_orphan_lock(c));
    }
    while (emptied) {
        struct hk_slab *next = emptied->next;
        hk_pool_release(emptied, emptied->idle_since ? emptied->idle_since : now);
        emptied = next;
    }
}
#endif

void hk_orphan_locks_add(size_t *taken, size_t *waited) {
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) hk_lock_add(&hk_orphan_locks[i], taken, waited);
}

void hk_orphan_lock_all(void) {
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) pthread_mutex_lock(&hk_orphan_locks[i].m);
}
void hk_orphan_unlock_all(void) {
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) pthread_mutex_unlock(&hk_orphan_locks[i].m);
}
