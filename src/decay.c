#include "decay.h"

#include <pthread.h>
#include <stdatomic.h>

#include "ace.h"
#include "clock.h"
#include "config.h"
#include "large.h"
#include "orphan.h"
#include "policy.h"
#include "pool.h"

static pthread_mutex_t hk_tick_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t hk_next_tick;
static _Atomic int hk_bg_running;

void hk_decay_tick(uint64_t now) {
    if (now < atomic_load_explicit(&hk_next_tick, memory_order_relaxed)) return;
    if (pthread_mutex_trylock(&hk_tick_mutex) != 0) return; /* someone else is ticking */
    if (now >= atomic_load_explicit(&hk_next_tick, memory_order_relaxed)) {
        atomic_store_explicit(&hk_next_tick, now + HK_DECAY_TICK_MS, memory_order_relaxed);
        hk_ace_update(now);
#ifndef HK_HARDENED
        hk_orphan_share_decay(now, 0); /* before the pool's: a slab it gives back may go too */
#endif
        hk_pool_decay(now, 0);
        hk_large_decay(now, 0);
    }
    pthread_mutex_unlock(&hk_tick_mutex);
    if (hk_cfg.bg_thread && !atomic_load_explicit(&hk_bg_running, memory_order_relaxed))
        hk_decay_start();
}

static void *hk_bg_main(void *arg) {
    (void)arg;
    for (;;) {
        /* A quarter of the delay: memory goes back at most 25% later than it is due. */
        uint64_t ms = hk_pol_purge_delay() / 4;
        if (ms < HK_DECAY_TICK_MS) ms = HK_DECAY_TICK_MS;
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        hk_decay_tick(hk_now_ms());
    }
    return NULL;
}

void hk_decay_start(void) {
    if (!hk_cfg.bg_thread) return;
    int expect = 0;
    if (!atomic_compare_exchange_strong(&hk_bg_running, &expect, 1)) return;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&t, &attr, hk_bg_main, NULL) != 0) {
        /* No thread to be had: the slow paths keep ticking; do not try on every tick. */
        hk_cfg.bg_thread = 0;
        atomic_store(&hk_bg_running, 0);
    }
    pthread_attr_destroy(&attr);
}

void hk_decay_lock_all(void) { pthread_mutex_lock(&hk_tick_mutex); }
void hk_decay_unlock_all(void) { pthread_mutex_unlock(&hk_tick_mutex); }
void hk_decay_forked_child(void) { atomic_store(&hk_bg_running, 0); }
