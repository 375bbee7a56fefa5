/* A mutex for sharded state (one per size class, say) that counts how often it was taken and
 * how often taking it had to wait. The counts live beside the mutex, not in the process-wide
 * counters (stats.h), so that threads working on different shards write no common cache line;
 * whoever reports sums them over the shards. Below it only the counters' leaf (stats.h). */
#ifndef HK_LOCK_H
#define HK_LOCK_H

#include <pthread.h>
#include <stdatomic.h>

#include "common.h"
#include "stats.h"

/* A line of its own: locks come in arrays of stripes, and two stripes on one line would make
 * the threads working on different shards pass that line between their cores all the same. */
struct hk_lock {
    pthread_mutex_t m;
    /* Written only by the holder (a load and a store, no read-modify-write); read by reports
     * at any time. */
    _Atomic uint64_t taken, waited;
} __attribute__((aligned(64)));

#define HK_LOCK_INIT {PTHREAD_MUTEX_INITIALIZER, 0, 0}

/* Per-class state is guarded by lock stripes, class c by stripe c % HK_LOCK_STRIPES: neighbour
 * classes, the busiest together, never share one, and fork's handlers can hold every stripe
 * of every module at once (ThreadSanitizer tracks at most 64 locks held by one thread). */
#define HK_LOCK_STRIPES 16
#define HK_LOCK_STRIPES_INIT {[0 ... HK_LOCK_STRIPES - 1] = HK_LOCK_INIT}

/* How many times a thread that finds a mutex taken retries before it sleeps. The sections
 * these mutexes guard are short (a list operation, a few table updates), so the holder is
 * usually about to leave; sleeping costs a futex call to wait and another for the holder to
 * wake the sleeper. Two threads swapping 1..4 MiB blocks through one table (large_swap), each
 * freeing the other's into that one's arena: 20% of the acquisitions found the lock taken,
 * and sleeping on them made the run 1.6 times as long (30% of its samples in the kernel's
 * futex wait and wake). A retry is a pause and a try: 64 of them, about a microsecond, stay
 * well below a sleep and its wake-up, and bound what a thread whose holder was preempted
 * wastes before it sleeps. */
#define HK_LOCK_SPINS 64

/* Tells the core that this thread is waiting on another (x86's pause, arm's yield). */
static inline void hk_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Takes m; 1 if it had to wait (another thread held it at the first try). */
static inline int hk_mutex_take(pthread_mutex_t *m) {
    if (pthread_mutex_trylock(m) == 0) return 0;
    for (int i = 0; i < HK_LOCK_SPINS; i++) {
        hk_cpu_relax();
        if (pthread_mutex_trylock(m) == 0) return 1;
    }
    pthread_mutex_lock(m);
    return 1;
}

/* Takes l, counting the acquisition and, if it had to wait, the contention. The counts are
 * written by the holder only, once it holds l: a load and a store, not a read-modify-write
 * that every thread on its way to the lock would make on a shared line. */
static inline void hk_lock(struct hk_lock *l) {
    int waited = hk_mutex_take(&l->m);
    hk_tally_bump(&l->taken);
    if (waited) hk_tally_bump(&l->waited);
}

/* Takes l if it is free, counting the acquisition: 1 if taken, 0 (nothing done) if not. */
static inline int hk_lock_try(struct hk_lock *l) {
    if (pthread_mutex_trylock(&l->m) != 0) return 0;
    hk_tally_bump(&l->taken);
    return 1;
}

static inline void hk_unlock(struct hk_lock *l) { pthread_mutex_unlock(&l->m); }

/* Adds l's counts to *taken and *waited. */
static inline void hk_lock_add(const struct hk_lock *l, size_t *taken, size_t *waited) {
    *taken += atomic_load_explicit(&l->taken, memory_order_relaxed);
    *waited += atomic_load_explicit(&l->waited, memory_order_relaxed);
}

#endif
