#define _GNU_SOURCE
#include "init.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "ace.h"
#include "block.h"
#include "config.h"
#include "decay.h"
#include "large.h"
#include "orphan.h"
#include "owner.h"
#include "policy.h"
#include "pool.h"
#include "stats.h"
#include "trace.h"
#include "transfer.h"

enum { HK_UNINIT = 0, HK_INITIALISING, HK_READY };

static _Atomic int hk_state = HK_UNINIT;

/* fork: hold every lock so the child inherits consistent structures, then release them on
 * both sides. Threads other than the forking one do not exist in the child; slabs they owned
 * stay owned by their records and are simply never reused there. */
static void hk_fork_prepare(void) {
    hk_decay_lock_all();
    hk_owner_lock_all();
    hk_orphan_lock_all();
    hk_xfer_lock_all();
    hk_pool_lock_all();
    hk_large_lock_all();
}

static void hk_fork_parent(void) {
    hk_large_unlock_all();
    hk_pool_unlock_all();
    hk_xfer_unlock_all();
    hk_orphan_unlock_all();
    hk_owner_unlock_all();
    hk_decay_unlock_all();
}

static void hk_fork_child(void) {
    hk_fork_parent();
    hk_decay_forked_child();
    hk_large_forked_child();
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
    hk_counting = hk_cfg.stats != 0;
    if (hk_counting) hk_malloc_class_off();
    hk_trace_init();
    hk_block_init();
    hk_policy_init();
    hk_large_init(hk_cfg.large_arenas);
    hk_ace_init();
    atomic_store_explicit(&hk_state, HK_READY, memory_order_release);
    /* These may allocate: the allocator is ready by now. */
    pthread_atfork(hk_fork_prepare, hk_fork_parent, hk_fork_child);
    hk_decay_start();
    return 1;
}
