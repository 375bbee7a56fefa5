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

struct hk_lock {
    pthread_mutex_t m;
    /* Written only by the holder (a load and a store, no read-modify-write); read by reports
     * at any time. */
    _Atomic uint64_t taken, waited;
};

#define HK_LOCK_INIT {PTHREAD_MUTEX_INITIALIZER, 0, 0}

/* Per-class state is guarded by lock stripes, class c by stripe c % HK_LOCK_STRIPES: neighbour
 * classes, the busiest together, never share one, and fork's handlers can hold every stripe
 * of every module at once (ThreadSanitizer tracks at most 64 locks held by one thread). */
#define HK_LOCK_STRIPES 16
#define HK_LOCK_STRIPES_INIT {[0 ... HK_LOCK_STRIPES - 1] = HK_LOCK_INIT}

static inline void hk_lock(struct hk_lock *l) {
    int waited = 0;
    if (pthread_mutex_trylock(&l->m) != 0) {
        pthread_mutex_lock(&l->m);
        waited = 1;
    }
    hk_tally_bump(&l->taken);
    if (waited) hk_tally_bump(&l->waited);
}

static inline void hk_unlock(struct hk_lock *l) { pthread_mutex_unlock(&l->m); }

/* Adds l's counts to *taken and *waited. */
static inline void hk_lock_add(const struct hk_lock *l, size_t *taken, size_t *waited) {
    *taken += atomic_load_explicit(&l->taken, memory_order_relaxed);
    *waited += atomic_load_explicit(&l->waited, memory_order_relaxed);
}

#endif
