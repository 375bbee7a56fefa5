#include "pool.h"

#include <pthread.h>

#include "../include/hakmem.h"
#include "chaos.h"
#include "clock.h"
#include "drawdown.h"
#include "lock.h"
#include "os.h"
#include "policy.h"
#include "stats.h"
#include "trace.h"

enum { HK_SSL_NONE = 0, HK_SSL_PARTIAL, HK_SSL_CACHE };

/* The pool's mutex, which counts its acquisitions and those that had to wait (lock.h). */
static struct hk_lock hk_pool_mutex = HK_LOCK_INIT;

static void hk_pool_lock(void) { hk_lock(&hk_pool_mutex); }
static void hk_pool_unlock(void) { hk_unlock(&hk_pool_mutex); }
/* EMPTY slabs by the class they served, newest first; [HK_CLS_NONE] holds the single slots
 * left over when part of an EMPTY span was taken by stage 2. */
static struct hk_slab *hk_empty[HK_NCLASS + 1];
static struct hk_slab *hk_age_head, *hk_age_tail; /* every EMPTY slab, oldest first */
/* SuperSlabs with ACTIVE and free slots, by the length of their longest run of free slots
 * (1 .. HK_SLABS - 1): every SuperSlab on the lists from k on has a run of k slots, so stage 2
 * looks at a few of them at most. A single list, walked until a run fitted, made a 1 GiB
 * program of mixed sizes look at 166 SuperSlab headers per acquisition. */
static struct hk_superslab *hk_partial[HK_SLABS];
static struct hk_superslab *hk_cache_head, *hk_cache_tail; /* no ACTIVE slot, newest first */
static size_t hk_ncache, hk_nss, hk_nactive_slots, hk_empty_bytes;
/* The most ACTIVE slots since ACE last read them, and the footprint at that moment: those
 * and the EMPTY slots the pool proper held then. The slots free at the peak were part of what
 * it needed (single slots between live slabs hold no span: the spans went beside them), and
 * the next peak may well lay its spans over them: budgeted as the ACTIVE peak alone, they
 * were the excess, released within the delay and faulted in again (bench/waves: 10,300 page
 * faults after the first round against 5,100, 0.8 times the speed, peak RSS 2.6% lower). A
 * window starts from the ACTIVE slots alone: started from the whole footprint, every EMPTY
 * slot that a window of the last 3.2 s began with was kept, and the budget trimmed nothing. */
static size_t hk_peak_active;
static size_t hk_peak_slots;
static _Atomic size_t hk_ncache_hint; /* hk_ncache, for readers without the lock */
static uint64_t hk_acquired[HK_NCLASS], hk_released[HK_NCLASS];
static _Atomic uint64_t hk_retaken[HK_NCLASS]; /* hk_pool_retaken */
static uint64_t hk_refault_bytes, hk_purged_bytes;
static struct hk_drawdown hk_drawn; /* of the EMPTY bytes (drawdown.h) */
/* Bytes of SuperSlabs unmapped lately, and when the last went: a SuperSlab mapped within two
 * purge delays of that stands for one of them, wanted again (hk_pool_remapped). */
static size_t hk_unmapped_recent;
static uint64_t hk_unmapped_at;

/* Under the lock: a new SuperSlab has just been mapped. If SuperSlabs were unmapped less than
 * two purge delays ago, it is one of them taken back: counted as a refault and as drawn from
 * the free stock, as a purged slot taken back is (hk_claim_run). Without this a program that
 * frees a big heap and builds it again, round after round, had most of its free SuperSlabs
 * unmapped beyond a small budget, mapped new ones, and showed ACE a drawdown no larger than
 * the little that was kept, so the budget grew by a fraction of the demand each round
 * (2 M small blocks, 170 MB, five rounds: 244 SuperSlabs unmapped and 181,000 page faults,
 * against tcmalloc's 44,000). */
static void hk_pool_remapped(uint64_t now) {
    if (hk_unmapped_recent == 0) return;
    if (now - hk_unmapped_at >= 2 * hk_pol_purge_delay()) {
        hk_unmapped_recent = 0;
        return;
    }
    hk_unmapped_recent -= HK_SS_SIZE;
    hk_refault_bytes += HK_SS_SIZE;
    hk_drawdown_take(&hk_drawn, HK_SS_SIZE);
}

/* --- intrusive lists --------------------------------------------------------------------- */

static void hk_ss_push(struct hk_superslab **head, struct hk_superslab *ss) {
    ss->prev = NULL;
    ss->next = *head;
    if (*head) (*head)->prev = ss;
    *head = ss;
}

static void hk_ss_unlink(struct hk_superslab **head, struct hk_superslab *ss) {
    if (ss->prev) ss->prev->next = ss->next;
    else *head = ss->next;
    if (ss->next) ss->next->prev = ss->prev;
    ss->next = ss->prev = NULL;
}

static void hk_cache_remove(struct hk_superslab *ss) {
    if (ss == hk_cache_tail) hk_cache_tail = ss->prev;
    hk_ss_unlink(&hk_cache_head, ss);
    ss->in_list = HK_SSL_NONE;
    hk_ncache--;
    atomic_store_explicit(&hk_ncache_hint, hk_ncache, memory_order_relaxed);
}

/* The length of the longest run of set bits in m. */
static unsigned hk_longest_run(uint32_t m) {
    unsigned n = 0;
    for (; m; n++) m &= m >> 1; /* each pass shortens every run by one */
    return n;
}

/* Puts ss on the list its slots call for: cache (no ACTIVE slot), partial (some free: the
 * list of its longest free run), none. Called whenever its slots change. */
static void hk_ss_relist(struct hk_superslab *ss, uint64_t now) {
    uint8_t want = ss->nactive == 0 ? HK_SSL_CACHE : ss->avail ? HK_SSL_PARTIAL : HK_SSL_NONE;
    unsigned run = want == HK_SSL_PARTIAL ? hk_longest_run(ss->avail) : 0;
    if (want == ss->in_list && run == ss->run) return;
    if (ss->in_list == HK_SSL_PARTIAL) hk_ss_unlink(&hk_partial[ss->run], ss);
    else if (ss->in_list == HK_SSL_CACHE) hk_cache_remove(ss);
    ss->in_list = want;
    ss->run = (uint8_t)run;
    if (want == HK_SSL_PARTIAL) {
        hk_ss_push(&hk_partial[run], ss);
    } else if (want == HK_SSL_CACHE) {
        hk_ss_push(&hk_cache_head, ss);
        if (!hk_cache_tail) hk_cache_tail = ss;
        ss->idle_since = now;
        hk_ncache++;
        atomic_store_explicit(&hk_ncache_hint, hk_ncache, memory_order_relaxed);
    }
}

/* Marks the k slots from index i as belonging to the slab headed by slot head, in state st. */
static void hk_mark(struct hk_superslab *ss, unsigned i, unsigned k, uint8_t st, unsigned head) {
    for (unsigned j = i; j < i + k; j++) {
        ss->slabs[j].state = st;
        __atomic_store_n(&ss->slabs[j].head, (uint8_t)(head == HK_SLABS ? j : head),
                         __ATOMIC_RELAXED);
    }
}

static inline uint32_t hk_run_mask(unsigned i, unsigned k) {
    return (uint32_t)((((uint64_t)1 << k) - 1) << i);
}

/* --- EMPTY slabs: per-class lists and the age list ---------------------------------------- */

/* Slabs of the age list an insertion looks at from either end, at most. */
#define HK_AGE_WALK 16

static void hk_empty_insert(struct hk_slab *s, uint64_t idle_since) {
    s->list = HK_LIST_POOL_EMPTY;
    hk_slab_list_push(&hk_empty[s->last_cls], s);
    /* The age list stays sorted. Slabs a thread kept for a while, and a front's that the tick
     * moves here once idle for the purge delay, come with an older time than the newest ones
     * already here: walk back from the tail, or forward from the head for one older than most,
     * a few slabs at most. Walked to its place (the whole list for a front's old slab), the
     * insertion took 12% of all samples with 16 threads on 2 cores (scatter), under the pool's
     * mutex. A slab whose place lies further in is listed as idle since the time of the slab
     * it stops at: it is purged a little later than its own time would say (the newest few
     * slabs are all the list has of younger ones, within a purge delay). */
    struct hk_slab *after = hk_age_tail;
    unsigned steps = 0;
    while (after && after->idle_since > idle_since && steps++ < HK_AGE_WALK) after = after->aprev;
    if (after && after->idle_since > idle_since) {
        struct hk_slab *before = hk_age_head; /* older than idle_since is listed after it */
        for (steps = 0; before && before->idle_since <= idle_since && steps < HK_AGE_WALK; steps++)
            before = before->anext;
        if (before && before->idle_since > idle_since) after = before->aprev;
        else idle_since = after->idle_since;
    }
    s->idle_since = idle_since;
    s->aprev = after;
    s->anext = after ? after->anext : hk_age_head;
    if (s->anext) s->anext->aprev = s;
    else hk_age_tail = s;
    if (after) after->anext = s;
    else hk_age_head = s;
    HK_ASSERT((!s->aprev || s->aprev->idle_since <= s->idle_since) &&
              (!s->anext || s->anext->idle_since >= s->idle_since));
    hk_empty_bytes += hk_slab_bytes(s);
}

static void hk_empty_remove(struct hk_slab *s) {
    hk_slab_list_unlink(&hk_empty[s->last_cls], s);
    if (s->aprev) s->aprev->anext = s->anext;
    else hk_age_head = s->anext;
    if (s->anext) s->anext->aprev = s->aprev;
    else hk_age_tail = s->aprev;
    s->anext = s->aprev = NULL;
    s->list = HK_LIST_NONE;
    hk_empty_bytes -= hk_slab_bytes(s);
}

/* --- the front: EMPTY slabs per class, under the class's lock stripe ---------------------- */

/* A slab given back while its SuperSlab keeps other ACTIVE slots waits first in the front of
 * its class: a short list under the class's lock stripe (lock.h), so that threads giving back
 * and taking slabs (waves of one class, a producer's spans emptied by consumers) do not all
 * meet on the pool's mutex. Its slots stay ACTIVE, so its SuperSlab is neither cached nor
 * unmapped under it and stage 2 of other classes does not see it; the reports and the budget
 * count it as EMPTY. The tick moves the slabs idle for the purge delay into the pool proper,
 * where they are purged (all of them while the EMPTY bytes exceed the budget), and an acquire
 * about to reach stage 3 moves them all first: no SuperSlab is mapped while free slots wait in
 * a front. A full front hands its oldest half to the pool proper (hk_front_put), and an
 * acquire that found it empty fills half of it from there (hk_empty_to_front): bursts cross
 * the pool's mutex in batches. */
struct hk_front {
    struct hk_slab *head, *tail; /* newest first, linked by next/prev */
    _Atomic uint32_t n;          /* slabs listed; read without the lock as a hint */
    _Atomic uint64_t hits, puts; /* slabs taken from and given to the front (under the lock) */
} __attribute__((aligned(64)));

static struct hk_front hk_front[HK_NCLASS];
static struct hk_lock hk_front_locks[HK_LOCK_STRIPES] = HK_LOCK_STRIPES_INIT;

static struct hk_lock *hk_front_lock(unsigned c) { return &hk_front_locks[c % HK_LOCK_STRIPES]; }

/* Slots in the fronts of each stripe's classes, changed under the stripe (a plain update, no
 * atomic operation: only the stripe's holder writes) and read without it, so that a release
 * weighs the budget in 16 loads: summing the 60 fronts took about 1,000 instructions a
 * release, a sixth of the main thread's in thread_churn ... main. One count per stripe, not one
 * for all: a single count would be a line every thread that puts or takes a slab writes. */
static struct {
    _Atomic size_t slots;
} __attribute__((aligned(64))) hk_front_stripe[HK_LOCK_STRIPES];

/* Under class c's stripe: its fronts hold `delta` slots more (or fewer, wrapping). */
static void hk_front_count(unsigned c, size_t delta) {
    _Atomic size_t *n = &hk_front_stripe[c % HK_LOCK_STRIPES].slots;
    atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

/* Slabs a front may hold: a 64th of the pool's budget, at most 1 MiB, at least one slab
 * (a mid span is up to 1 MiB; without the floor the mid classes, whose spans empty and come
 * back the most, had no front: prod_cons with blocks up to 256 KiB took the pool mutex 458,271
 * times in 400,000 blocks, and 44,688 with it), where the budget holds 16 such slabs: a small
 * budget (a burst given back, cgroup pressure) keeps them out. What the fronts hold counts
 * against the budget, and the pool drains them when over it. A 16th and 4 MiB took the pool
 * mutex 129,374 times instead of 216,124 in thread_churn 16 300 2000 16 3072 42 main, with no
 * gain in time on 16 cores, and held 2 MiB more in large 20000 64 4096 4 42 (34 MiB, the
 * most of any allocator there): not kept. */
static uint32_t hk_front_cap(unsigned c) {
    size_t budget = atomic_load_explicit(&hk_pol.pool_budget, memory_order_relaxed);
    size_t bytes = budget / 64, slab = (size_t)hk_class_slots[c] << HK_SLAB_SHIFT;
    if (bytes > ((size_t)1 << 20)) bytes = (size_t)1 << 20;
    if (bytes >= slab) return (uint32_t)(bytes / slab);
    return budget >= 16 * slab; /* the floor, where the budget holds 16 such slabs */
}

/* Under class c's stripe: takes out of its front, oldest first, at most max slabs idle since
 * before `older` (any with older 0), and adds them to *out, linked by next. Returns how many. */
static unsigned hk_front_unlink_old(unsigned c, uint64_t older, unsigned max,
                                    struct hk_slab **out) {
    struct hk_front *f = &hk_front[c];
    unsigned k = 0;
    struct hk_slab *s;
    while (k < max && (s = f->tail) != NULL && (older == 0 || s->idle_since < older)) {
        f->tail = s->prev;
        hk_slab_list_unlink(&f->head, s);
        s->next = *out;
        *out = s;
        k++;
    }
    atomic_store_explicit(&f->n, atomic_load_explicit(&f->n, memory_order_relaxed) - k,
                          memory_order_relaxed);
    if (k) hk_front_count(c, -((size_t)k * hk_class_slots[c]));
    return k;
}

/* Lists slab s (no live block, no owner) in its class's front: 1, or 0 when s is the last
 * ACTIVE slab of its SuperSlab (which the pool proper caches whole) or the front holds one
 * slab at most and has it. A full front makes room by handing its oldest half to *spill
 * (linked by next), for the caller to move into the pool proper under one hold of the pool's
 * mutex: a burst of releases takes it once per half a front, not once a slab (scatter with 4
 * threads on 2 cores, whose slabs empty by the hundred when a thread's backlog comes home). */
static int hk_front_put(struct hk_slab *s, uint64_t idle_since, struct hk_slab **spill) {
    unsigned c = s->cls;
    struct hk_front *f = &hk_front[c];
    uint32_t cap = hk_front_cap(c);
    if ((cap < 2 && atomic_load_explicit(&f->n, memory_order_relaxed) >= cap) ||
        __atomic_load_n(&hk_ss_of((uintptr_t)s)->nactive, __ATOMIC_RELAXED) <= s->nslots)
        return 0;
    hk_lock(hk_front_lock(c));
    uint32_t n = atomic_load_explicit(&f->n, memory_order_relaxed);
    if (n >= cap) {
        if (cap < 2) {
            hk_unlock(hk_front_lock(c));
            return 0;
        }
        n -= hk_front_unlink_old(c, 0, cap / 2, spill);
    }
    __atomic_store_n(&s->cls, HK_CLS_NONE, __ATOMIC_RELEASE);
    s->free = NULL;
    s->list = HK_LIST_POOL_FRONT;
    s->idle_since = idle_since;
    hk_slab_list_push(&f->head, s);
    if (!f->tail) f->tail = s;
    atomic_store_explicit(&f->n, n + 1, memory_order_relaxed);
    hk_front_count(c, hk_class_slots[c]);
    hk_tally_bump(&f->puts);
    hk_unlock(hk_front_lock(c));
    return 1;
}

/* The newest slab of class c's front, formatted for c; NULL when the front is empty. */
static struct hk_slab *hk_front_take(unsigned c) {
    struct hk_front *f = &hk_front[c];
    if (atomic_load_explicit(&f->n, memory_order_relaxed) == 0) return NULL;
    hk_lock(hk_front_lock(c));
    struct hk_slab *s = f->head;
    if (s) {
        if (f->tail == s) f->tail = NULL;
        hk_slab_list_unlink(&f->head, s);
        atomic_store_explicit(&f->n, atomic_load_explicit(&f->n, memory_order_relaxed) - 1,
                              memory_order_relaxed);
        hk_front_count(c, -(size_t)hk_class_slots[c]);
        hk_tally_bump(&f->hits);
    }
    hk_unlock(hk_front_lock(c));
    if (!s) return NULL;
    s->list = HK_LIST_NONE;
    if (c >= HK_NSMALL) hk_span_check_freed(s); /* its blocks as they went to the front */
    hk_slab_format(s, c);
    return s;
}

/* Takes out of class c's front, oldest first, the slabs idle since before `older` (all of them
 * with older 0), and adds them to *out, linked by next. Returns how many. */
static unsigned hk_front_detach(unsigned c, uint64_t older, struct hk_slab **out) {
    if (atomic_load_explicit(&hk_front[c].n, memory_order_relaxed) == 0) return 0;
    hk_lock(hk_front_lock(c));
    unsigned k = hk_front_unlink_old(c, older, UINT32_MAX, out);
    hk_unlock(hk_front_lock(c));
    return k;
}

/* Slots in all fronts now (a snapshot: each stripe's count read on its own). */
static size_t hk_front_slots(void) {
    size_t slots = 0;
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++)
        slots += atomic_load_explicit(&hk_front_stripe[i].slots, memory_order_relaxed);
    return slots;
}

/* --- acquire -------------------------------------------------------------------------------- */

/* The EMPTY slots of ss, as a mask like avail. */
static uint32_t hk_empty_mask(const struct hk_superslab *ss) {
    uint32_t m = 0;
    for (uint32_t a = ss->avail; a; a &= a - 1) {
        unsigned j = (unsigned)__builtin_ctz(a);
        if (ss->slabs[j].state == HK_SLOT_EMPTY) m |= (uint32_t)1 << j;
    }
    return m;
}

/* SuperSlabs stage 2 looks into for a run of EMPTY slots before it takes the best fit. */
#define HK_STAGE2_LOOK 8

/* Lowest index i such that slots i..i+k-1 are all set in avail, or -1. */
static int hk_find_run(uint32_t avail, unsigned k) {
    uint32_t m = avail;
    for (unsigned j = 1; j < k && m; j++) m &= avail >> j;
    return m ? __builtin_ctz(m) : -1;
}

/* Takes the free slots i..i+k-1 of ss for a new slab. EMPTY slabs they belong to leave the
 * lists; what such a slab had outside the run stays EMPTY as single slots. */
static void hk_claim_run(struct hk_superslab *ss, unsigned i, unsigned k, uint64_t now) {
    uint64_t delay2 = 2 * hk_pol_purge_delay();
    for (unsigned j = i; j < i + k; j++) {
        struct hk_slab *t = &ss->slabs[j];
        if (t->state == HK_SLOT_UNUSED) {
            /* Pages released not long ago and wanted again: ACE lengthens the delay, and
             * counts them as taken back, which a budget too small to keep them would
             * otherwise never see (they were released before they could be reused). */
            if (t->idle_since && now - t->idle_since < delay2) {
                hk_refault_bytes += HK_SLAB_SIZE;
                hk_drawdown_take(&hk_drawn, HK_SLAB_SIZE);
            }
            t->idle_since = 0;
            continue;
        }
        HK_ASSERT(t->state == HK_SLOT_EMPTY);
        struct hk_slab *h = &ss->slabs[t->head];
        unsigned hi = t->head, hk = h->nslots;
        uint64_t idle = h->idle_since;
        hk_empty_remove(h);
        for (unsigned x = hi; x < hi + hk; x++) {
            struct hk_slab *u = &ss->slabs[x];
            if (x >= i && x < i + k) {
                /* Part of the run: seen as UNUSED by the rest of this loop, ACTIVE soon. */
                u->state = HK_SLOT_UNUSED;
                u->idle_since = 0;
                hk_drawdown_take(&hk_drawn, HK_SLAB_SIZE);
                continue;
            }
            u->nslots = 1;
            u->last_cls = HK_CLS_NONE;
            __atomic_store_n(&u->head, (uint8_t)x, __ATOMIC_RELAXED);
            hk_empty_insert(u, idle);
        }
    }
}

/* Makes slots i..i+k-1 of ss (already claimed) the ACTIVE slots of one slab, not yet formatted
 * (a slab in a front is one). */
static struct hk_slab *hk_occupy(struct hk_superslab *ss, unsigned i, unsigned k, uint64_t now) {
    struct hk_slab *s = &ss->slabs[i];
    hk_mark(ss, i, k, HK_SLOT_ACTIVE, i);
    for (unsigned j = i; j < i + k; j++) ss->slabs[j].clean = 0;
    ss->avail &= ~hk_run_mask(i, k);
    __atomic_store_n(&ss->nactive, ss->nactive + k, __ATOMIC_RELAXED);
    hk_nactive_slots += k;
    if (hk_nactive_slots > hk_peak_active) {
        hk_peak_active = hk_nactive_slots;
        hk_peak_slots = hk_nactive_slots + hk_empty_bytes / HK_SLAB_SIZE;
    }
    s->nslots = (uint8_t)k;
    s->list = HK_LIST_NONE;
    hk_ss_relist(ss, now);
    return s;
}

/* Makes slots i..i+k-1 of ss (already claimed) an ACTIVE slab of class c. */
static struct hk_slab *hk_activate(struct hk_superslab *ss, unsigned i, unsigned k, unsigned c,
                                   uint64_t now) {
    int fresh = 1;
    for (unsigned j = i; j < i + k; j++) fresh &= ss->slabs[j].clean;
    struct hk_slab *s = hk_occupy(ss, i, k, now);
    hk_slab_format(s, c);
    s->fresh = (uint8_t)fresh;
    hk_acquired[c]++;
    return s;
}

/* Traces an acquisition (HAKMEM_TRACE=pool) and returns its slab. */
static struct hk_slab *hk_pool_traced(struct hk_slab *s, unsigned c, const char *stage) {
    if (HK_TRACING(HK_T_POOL) && s)
        hk_trace(HK_T_POOL, stage, "class_size", hk_class_size[c], "slots", hk_class_slots[c],
                 "slab@", (uintptr_t)hk_slab_base(s));
    return s;
}

/* Under the lock: makes the free slots i..i+k-1 of ss a slab of class c, counts the stage
 * (3 for a cached SuperSlab: the memory came from the cache, else 2) and unlocks. */
static struct hk_slab *hk_take_run(struct hk_superslab *ss, unsigned i, unsigned k, unsigned c,
                                   uint64_t now) {
    int cached = ss->in_list == HK_SSL_CACHE;
    HK_ASSERT(i + k <= HK_SLABS); /* a list promised a run that is not there */
    hk_claim_run(ss, i, k, now);
    if (cached) HK_STAT_INC(acquire_stage3_cache);
    else HK_STAT_INC(acquire_stage2);
    struct hk_slab *s = hk_activate(ss, i, k, c, now);
    hk_pool_unlock();
    return hk_pool_traced(s, c, cached ? "acquire stage 3 (a cached SuperSlab)"
                                       : "acquire stage 2 (free slots of a SuperSlab in use)");
}

/* Moves every front's slabs into the pool proper; returns how many. */
static unsigned hk_front_drain_all(uint64_t now);
static int hk_pool_take_list(struct hk_slab *l, uint64_t now, int from_front);

/* Under the lock, once an acquire of class c found its front empty and took a slab of the
 * pool proper: takes up to half a front more of the class's EMPTY slabs, their slots ACTIVE
 * again as a front's are, for the caller to list in the front (hk_front_fill), so that the
 * burst of acquires that follows a burst of releases takes the pool's mutex once per half a
 * front, not once a slab. Not a slab that would be its SuperSlab's only ACTIVE one: the front
 * would keep that SuperSlab from the cache. Linked by next, newest first. */
static struct hk_slab *hk_empty_to_front(unsigned c, uint64_t now) {
    unsigned want = hk_front_cap(c) / 2, looked = 0;
    struct hk_slab *out = NULL, **end = &out, *t = hk_empty[c];
    for (; t && want && looked < 4 * want; looked++) {
        struct hk_slab *next = t->next;
        struct hk_superslab *ss = hk_ss_of((uintptr_t)t);
        if (ss->nactive > 0) {
            hk_empty_remove(t);
            hk_drawdown_take(&hk_drawn, hk_slab_bytes(t));
            hk_occupy(ss, hk_slab_index(t), t->nslots, now);
            t->next = NULL;
            *end = t;
            end = &t->next;
            want--;
        }
        t = next;
    }
    return out;
}

/* Lists the slabs of l (hk_empty_to_front's) at the old end of class c's front as far as its
 * cap allows; the rest go back to the pool proper (other releases filled it meanwhile). They
 * were counted as released when they first left their thread: not again. */
static void hk_front_fill(unsigned c, struct hk_slab *l, uint64_t now) {
    struct hk_front *f = &hk_front[c];
    uint32_t cap = hk_front_cap(c);
    hk_lock(hk_front_lock(c));
    uint32_t n = atomic_load_explicit(&f->n, memory_order_relaxed), k = 0;
    while (l && n + k < cap) {
        struct hk_slab *s = l;
        l = s->next;
        s->list = HK_LIST_POOL_FRONT;
        s->next = NULL;
        s->prev = f->tail;
        if (f->tail) f->tail->next = s;
        else f->head = s;
        f->tail = s;
        k++;
    }
    atomic_store_explicit(&f->n, n + k, memory_order_relaxed);
    if (k) hk_front_count(c, (size_t)k * hk_class_slots[c]);
    hk_unlock(hk_front_lock(c));
    if (l) hk_pool_take_list(l, now, 1);
}

struct hk_slab *hk_pool_acquire(unsigned c) {
    unsigned k = hk_class_slots[c];
    uint64_t now = hk_now_ms();
    struct hk_slab *s;
    struct hk_superslab *ss;
    int i, drained = 0;
    if ((s = hk_front_take(c)) != NULL)
        return hk_pool_traced(s, c, "acquire stage 1 (an EMPTY slab of the class, its front)");
again:
    hk_pool_lock();
    if ((s = hk_empty[c]) != NULL) {
        HK_ASSERT(s->nslots == k);
        ss = hk_ss_of((uintptr_t)s);
        hk_empty_remove(s);
        hk_drawdown_take(&hk_drawn, hk_slab_bytes(s));
        HK_STAT_INC(acquire_stage1);
        if (c >= HK_NSMALL) hk_span_check_freed(s); /* as it went, as a front's (above) */
        s = hk_activate(ss, hk_slab_index(s), k, c, now);
        struct hk_slab *more = hk_empty_to_front(c, now);
        hk_pool_unlock();
        if (more) hk_front_fill(c, more, now);
        return hk_pool_traced(s, c, "acquire stage 1 (an EMPTY slab of the class)");
    }
    /* Stage 2: a run of EMPTY slots (resident pages: no fault) in one of the first few
     * SuperSlabs in use that fit, else the one whose longest free run fits most tightly. Taking
     * EMPTY slabs of other classes from anywhere first, cached SuperSlabs included, was tried:
     * large_4m's peak RSS rose from 32 to 38 MiB. */
    struct hk_superslab *fit = NULL;
    unsigned looked = 0;
    for (unsigned r = k; r < HK_SLABS && looked < HK_STAGE2_LOOK; r++)
        for (ss = hk_partial[r]; ss && looked < HK_STAGE2_LOOK; ss = ss->next, looked++) {
            if ((i = hk_find_run(hk_empty_mask(ss), k)) >= 0)
                return hk_take_run(ss, (unsigned)i, k, c, now);
            if (!fit) fit = ss;
        }
    if (fit) return hk_take_run(fit, (unsigned)hk_find_run(fit->avail, k), k, c, now);
    /* Free slots wait in fronts: the pool proper takes them before it reaches stage 3. */
    if (!drained) {
        hk_pool_unlock();
        drained = 1;
        if (hk_front_drain_all(now)) goto again;
        hk_pool_lock();
    }
    /* Stage 3: a SuperSlab with no ACTIVE slot (one still purging some may lack the run). */
    for (ss = hk_cache_head; ss; ss = ss->next)
        if ((i = hk_find_run(ss->avail, k)) >= 0) return hk_take_run(ss, (unsigned)i, k, c, now);
    hk_pool_unlock();
    /* A new SuperSlab, mapped without the lock: it is nobody's until it is listed. */
    hk_chaos();
    int fresh;
    if ((ss = hk_ss_map(&fresh)) == NULL) return NULL;
    hk_pool_lock();
    hk_nss++;
    HK_STAT_INC(acquire_stage3_mmap);
    if (fresh) hk_pool_remapped(now);
    s = hk_activate(ss, 1, k, c, now);
    hk_pool_unlock();
    return hk_pool_traced(s, c, "acquire stage 3 (a new SuperSlab)");
}

/* --- release and decay ---------------------------------------------------------------------- */

/* EMPTY bytes kept regardless of age: the policy's budget, or with ACE what demand calls for
 * now: a multiple of the ACTIVE bytes, the drawdown of the EMPTY bytes in this window so far,
 * and (without cgroup pressure) what brings the ACTIVE bytes back to their recent peak, with
 * the slots that were free at that peak (hk_peak_slots): a program working in waves finds the
 * last wave's memory resident, whichever slots the next wave's spans fall on, and a burst that
 * is over goes back when idle for the purge delay. fslots: the slots the fronts hold, as the
 * caller read them (hk_front_slots: a line per stripe, which a release read twice). */
static size_t hk_pool_budget(size_t fslots) {
    size_t budget = atomic_load_explicit(&hk_pol.pool_budget, memory_order_relaxed);
    if (!atomic_load_explicit(&hk_pol.demand, memory_order_relaxed)) return budget;
    unsigned share = atomic_load_explicit(&hk_pol.pool_share, memory_order_relaxed);
    size_t active = (hk_nactive_slots - fslots) * HK_SLAB_SIZE;
    size_t drawn = hk_drawn.max;
    if (share && active * share > budget) budget = active * share;
    if (share >= HK_POOL_SHARE) {
        size_t peak = atomic_load_explicit(&hk_pol.pool_peak, memory_order_relaxed);
        size_t now_peak = hk_peak_slots * HK_SLAB_SIZE;
        if (now_peak > peak) peak = now_peak;
        if (peak > active && peak - active > budget) budget = peak - active;
    }
    return share && drawn > budget ? drawn : budget;
}

/* Free SuperSlabs kept mapped: the policy's count, or with ACE as many as the budget holds. */
static size_t hk_cache_max(size_t budget) {
    size_t n = atomic_load_explicit(&hk_pol.ss_cache, memory_order_relaxed);
    if (n && atomic_load_explicit(&hk_pol.demand, memory_order_relaxed) &&
        budget / HK_SS_SIZE > n)
        n = budget / HK_SS_SIZE;
    return n;
}

/* Whether a release should release memory right away: beyond the budget and a quarter. Up
 * to that, the next tick (within 10 ms) trims to the budget, by when reuse in the same window
 * has had a chance to raise it. */
static int hk_pool_over(void) {
    size_t fslots = hk_front_slots(), budget = hk_pool_budget(fslots);
    budget += budget / 4;
    return hk_empty_bytes + (fslots << HK_SLAB_SHIFT) > budget ||
           hk_ncache > hk_cache_max(budget);
}

/* Under the lock: makes slab s (no live block, no owner, not in a front) EMPTY, idle since
 * idle_since. A slab from a front was counted as released when it went there. */
static void hk_pool_release_locked(struct hk_slab *s, uint64_t idle_since, uint64_t now,
                                   int from_front) {
    struct hk_superslab *ss = hk_ss_of((uintptr_t)s);
    unsigned i = hk_slab_index(s), k = s->nslots;
    __atomic_store_n(&s->cls, HK_CLS_NONE, __ATOMIC_RELEASE);
    s->free = NULL;
    if (!from_front) hk_released[s->last_cls]++;
    hk_mark(ss, i, k, HK_SLOT_EMPTY, i);
    ss->avail |= hk_run_mask(i, k);
    __atomic_store_n(&ss->nactive, ss->nactive - k, __ATOMIC_RELAXED);
    hk_nactive_slots -= k;
    hk_empty_insert(s, idle_since < now ? idle_since : now);
    hk_drawdown_give(&hk_drawn, hk_slab_bytes(s));
    hk_ss_relist(ss, now);
}

void hk_pool_release(struct hk_slab *s, uint64_t idle_since) {
    uint64_t now = hk_now_ms();
    HK_ASSERT(s->state == HK_SLOT_ACTIVE && s->used == 0);
    if (HK_TRACING(HK_T_POOL))
        hk_trace(HK_T_POOL, "release (an empty slab goes to the pool)", "class_size", s->bsize,
                 "slots", s->nslots, "slab@", (uintptr_t)hk_slab_base(s));
    /* The front counts its own releases: no process-wide counter on that path. */
    struct hk_slab *spill = NULL;
    if (hk_front_put(s, idle_since < now ? idle_since : now, &spill)) {
        if (spill && hk_pool_take_list(spill, now, 1)) hk_pool_decay(now, 0);
        return;
    }
    HK_STAT_INC(slab_release);
    hk_pool_lock();
    hk_pool_release_locked(s, idle_since, now, 0);
    int over = hk_pool_over();
    hk_pool_unlock();
    if (over) hk_pool_decay(now, 0);
}

/* Moves the slabs of list l (linked by next, each empty since its idle_since) into the pool
 * proper under one hold of its mutex; from_front: taken out of fronts, which counted them as
 * released. Returns whether the EMPTY bytes now call for a release at once (hk_pool_over). */
static int hk_pool_take_list(struct hk_slab *l, uint64_t now, int from_front) {
    if (!l) return 0;
    hk_pool_lock();
    while (l) {
        struct hk_slab *next = l->next;
        if (!from_front) HK_STAT_INC(slab_release);
        hk_pool_release_locked(l, l->idle_since, now, from_front);
        l = next;
    }
    int over = hk_pool_over();
    hk_pool_unlock();
    return over;
}

void hk_pool_release_idle(struct hk_slab *l) {
    uint64_t now = hk_now_ms();
    if (hk_pool_take_list(l, now, 0)) hk_pool_decay(now, 0);
}

static unsigned hk_front_drain_all(uint64_t now) {
    struct hk_slab *l = NULL;
    unsigned n = 0;
    for (unsigned c = 0; c < HK_NCLASS; c++) n += hk_front_detach(c, 0, &l);
    hk_pool_take_list(l, now, 1);
    return n;
}

#define HK_DECAY_BATCH 32

/* Moves front slabs into the pool proper: all of them with force or while the EMPTY bytes
 * (fronts included) exceed the budget, else those idle for the purge delay. */
static void hk_front_decay(uint64_t now, int force) {
    size_t slots = hk_front_slots();
    if (slots == 0) return;
    uint64_t delay = hk_pol_purge_delay();
    hk_pool_lock();
    int over = hk_empty_bytes + (slots << HK_SLAB_SHIFT) > hk_pool_budget(slots);
    hk_pool_unlock();
    uint64_t older = force || over ? 0 : now > delay ? now - delay + 1 : 1;
    struct hk_slab *l = NULL;
    for (unsigned c = 0; c < HK_NCLASS; c++) hk_front_detach(c, older, &l);
    hk_pool_take_list(l, now, 1);
}

/* Under the lock: takes cached SuperSlab ss (none of its slots purging) out of the pool, to
 * go back to the page heap (hk_ss_unmap) once the lock is released. */
static void hk_cache_evict(struct hk_superslab *ss, uint64_t now) {
    hk_cache_remove(ss);
    for (unsigned j = 1; j < HK_SLABS; j++) {
        struct hk_slab *t = &ss->slabs[j];
        if (t->state == HK_SLOT_EMPTY && t->head == j) hk_empty_remove(t);
    }
    hk_nss--;
    hk_unmapped_recent += HK_SS_SIZE;
    hk_unmapped_at = now;
}

/* hk_pool_decay; or, with cache_only, every cached SuperSlab back to the page heap and
 * nothing else. */
static size_t hk_pool_decay_in(uint64_t now, int force, int cache_only) {
    size_t released = 0;
    if (!cache_only) hk_front_decay(now, force);
    for (;;) {
        struct hk_slab *purge[HK_DECAY_BATCH];
        struct hk_superslab *unmap[HK_DECAY_BATCH];
        unsigned np = 0, nu = 0;
        hk_pool_lock();
        uint64_t delay = hk_pol_purge_delay(), udelay = hk_pol_unmap_delay();
        size_t budget = hk_pool_budget(hk_front_slots()), ncache_max = hk_cache_max(budget);
        /* Cached SuperSlabs first: unmapping one also drops its EMPTY slabs, with no madvise. */
        struct hk_superslab *ss = hk_cache_tail;
        while (ss && nu < HK_DECAY_BATCH) {
            struct hk_superslab *prev = ss->prev;
            if (!force && !cache_only && hk_ncache <= ncache_max &&
                now - ss->idle_since < udelay)
                break;
            if (ss->npurging == 0) {
                hk_cache_evict(ss, now);
                unmap[nu++] = ss;
            }
            ss = prev;
        }
        while (!cache_only && hk_age_head && np < HK_DECAY_BATCH &&
               (force || now - hk_age_head->idle_since >= delay || hk_empty_bytes > budget)) {
            struct hk_slab *s = hk_age_head;
            struct hk_superslab *sss = hk_ss_of((uintptr_t)s);
            unsigned i = hk_slab_index(s), k = s->nslots;
            hk_empty_remove(s);
            hk_mark(sss, i, k, HK_SLOT_PURGING, i);
            sss->avail &= ~hk_run_mask(i, k);
            sss->npurging += k;
            hk_ss_relist(sss, now);
            purge[np++] = s;
        }
        hk_pool_unlock();
        if (np == 0 && nu == 0) break;

        for (unsigned x = 0; x < nu; x++) {
            if (HK_TRACING(HK_T_POOL))
                hk_trace(HK_T_POOL, "evict (a free SuperSlab goes back to the page heap)",
                         "superslab@", (uintptr_t)unmap[x], "bytes", HK_SS_SIZE, NULL, 0);
            hk_ss_unmap(unmap[x]); /* its memory stays resident there: not released here */
            HK_STAT_INC(ss_unmapped);
        }
        for (unsigned x = 0; x < np; x++) {
            if (HK_TRACING(HK_T_POOL))
                hk_trace(HK_T_POOL, "purge (an EMPTY slab's pages go: idle, or over budget)",
                         "slab@", (uintptr_t)hk_slab_base(purge[x]), "bytes",
                         hk_slab_bytes(purge[x]), NULL, 0);
            hk_os_release(hk_slab_base(purge[x]), hk_slab_bytes(purge[x]));
            released += hk_slab_bytes(purge[x]);
        }
        if (np) {
            hk_pool_lock();
            for (unsigned x = 0; x < np; x++) {
                struct hk_slab *s = purge[x];
                struct hk_superslab *sss = hk_ss_of((uintptr_t)s);
                unsigned i = hk_slab_index(s), k = s->nslots;
                hk_mark(sss, i, k, HK_SLOT_UNUSED, HK_SLABS);
                for (unsigned j = i; j < i + k; j++) {
                    sss->slabs[j].nslots = 1;
                    sss->slabs[j].last_cls = HK_CLS_NONE;
                    sss->slabs[j].idle_since = now; /* when its pages went: refault detection */
                    sss->slabs[j].clean = 1;
                }
                sss->avail |= hk_run_mask(i, k);
                sss->npurging -= k;
                hk_purged_bytes += (size_t)k << HK_SLAB_SHIFT;
                hk_ss_relist(sss, now);
            }
            hk_pool_unlock();
        }
        if (np < HK_DECAY_BATCH && nu < HK_DECAY_BATCH) break;
    }
    return released;
}

size_t hk_pool_decay(uint64_t now, int force) { return hk_pool_decay_in(now, force, 0); }

void hk_pool_give_cache(void) {
    if (atomic_load_explicit(&hk_ncache_hint, memory_order_relaxed))
        hk_pool_decay_in(hk_now_ms(), 0, 1);
}

int hk_pool_has_cache(void) {
    return atomic_load_explicit(&hk_ncache_hint, memory_order_relaxed) != 0;
}

/* --- reports -------------------------------------------------------------------------------- */

/* Under the lock: slabs of class c acquired and released so far, fronts included. */
static void hk_class_counts(unsigned c, uint64_t *acquired, uint64_t *released) {
    const struct hk_front *f = &hk_front[c];
    *acquired = hk_acquired[c] + atomic_load_explicit(&f->hits, memory_order_relaxed);
    *released = hk_released[c] + atomic_load_explicit(&f->puts, memory_order_relaxed);
}

void hk_pool_demand(struct hk_pool_demand *out) {
    hk_pool_lock();
    for (unsigned c = 0; c < HK_NCLASS; c++)
        out->retaken[c] = atomic_load_explicit(&hk_retaken[c], memory_order_relaxed);
    out->drawn_bytes = hk_drawdown_read(&hk_drawn);
    out->peak_bytes = hk_peak_slots * HK_SLAB_SIZE;
    hk_peak_active = hk_peak_slots = hk_nactive_slots;
    out->refault_bytes = hk_refault_bytes;
    hk_pool_unlock();
}

void hk_pool_retaken(unsigned c) {
    atomic_fetch_add_explicit(&hk_retaken[c], 1, memory_order_relaxed);
}

void hk_pool_stats(struct hak_stats *out) {
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        out->acquire_stage1 += atomic_load_explicit(&hk_front[c].hits, memory_order_relaxed);
        out->slab_release += atomic_load_explicit(&hk_front[c].puts, memory_order_relaxed);
    }
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++)
        hk_lock_add(&hk_front_locks[i], &out->pool_class_lock, &out->pool_class_lock_waited);
    hk_lock_add(&hk_pool_mutex, &out->pool_lock, &out->pool_lock_waited);
    hk_pool_lock();
    size_t fslots = hk_front_slots();
    out->superslabs_now = hk_nss;
    out->superslabs_cached_now = hk_ncache;
    out->slabs_active_now = hk_nactive_slots - fslots;
    out->pool_empty_bytes_now = hk_empty_bytes + (fslots << HK_SLAB_SHIFT);
    out->pool_purged_bytes = hk_purged_bytes;
    for (unsigned c = 0; c < HK_NCLASS && c < HAK_STATS_NCLASS; c++) {
        size_t n = atomic_load_explicit(&hk_front[c].n, memory_order_relaxed);
        for (struct hk_slab *s = hk_empty[c]; s; s = s->next) n++;
        out->class_slabs_empty[c] = n;
        uint64_t acquired, released;
        hk_class_counts(c, &acquired, &released);
        out->class_slabs_acquired[c] = acquired;
        out->class_slabs_held[c] = acquired - released;
    }
    hk_pool_unlock();
}

/* No path holds a front's lock and the pool's together, so any order will do. */
void hk_pool_lock_all(void) {
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) pthread_mutex_lock(&hk_front_locks[i].m);
    pthread_mutex_lock(&hk_pool_mutex.m);
}
void hk_pool_unlock_all(void) {
    pthread_mutex_unlock(&hk_pool_mutex.m);
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) pthread_mutex_unlock(&hk_front_locks[i].m);
}
