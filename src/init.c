#define _GNU_SOURCE
#include "init.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "config.h"
#include "heap.h"
#include "large.h"
#include "orphan.h"
#include "owner.h"
#include "pool.h"
#include "report.h"
#include "stats.h"

enum { HK_UNINIT = 0, HK_INITIALISING, HK_READY };

static _Atomic int hk_state = HK_UNINIT;
static pthread_key_t hk_exit_key;
static int hk_exit_key_ok; /* 0 if the program had used up its pthread keys */

static void hk_thread_exit(void *heap) { hk_heap_teardown(heap); }

/* fork: hold every lock so the child inherits consistent structures, then release them on
 * both sides. Threads other than the forking one do not exist in the child; slabs they owned
 * stay owned by their records and are simply never reused there. */
static void hk_fork_prepare(void) {
    hk_owner_lock_all();
    hk_orphan_lock_all();
    hk_pool_lock_all();
    hk_large_lock_all();
}

static void hk_fork_release(void) {
    hk_large_unlock_all();
    hk_pool_unlock_all();
    hk_orphan_unlock_all();
    hk_owner_unlock_all();
}

static void hk_atexit_stats(void) {
    if (hk_cfg.stats) hk_stats_dump();
}

int hk_init(void) {
    int st = atomic_load_explicit(&hk_state, memory_order_acquire);
    if (HK_LIKELY(st == HK_READY)) return 1;
    st = HK_UNINIT;
    if (!atomic_compare_exchange_strong(&hk_state, &st, HK_INITIALISING)) {
        while (atomic_load_explicit(&hk_state, memory_order_acquire) != HK_READY) sched_yield();
        return 1;
    }
    hk_config_load();
    /* Without a key (all PTHREAD_KEYS_MAX taken) hakmem still works, but the heaps of exiting
     * threads are not handed over: their slabs stay with them. */
    hk_exit_key_ok = pthread_key_create(&hk_exit_key, hk_thread_exit) == 0;
    atomic_store_explicit(&hk_state, HK_READY, memory_order_release);
    /* These may allocate: the allocator is ready by now. */
    pthread_atfork(hk_fork_prepare, hk_fork_release, hk_fork_release);
    return 1;
}

void hk_init_thread(void *heap) {
    /* glibc runs key destructors for every thread but the main one, and again if a destructor
     * leaves a value set: a heap rebuilt by a later destructor's malloc is torn down too. */
    if (hk_exit_key_ok) pthread_setspecific(hk_exit_key, heap);
}

/* Runs at exit when the library is loaded; prints the counters if HAKMEM_STATS=1. */
__attribute__((destructor)) static void hk_fini(void) { hk_atexit_stats(); }
