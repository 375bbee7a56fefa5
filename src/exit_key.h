/* A thread-exit hook made on first use: a pthread key whose destructor runs when a thread that
 * set it exits. Made lazily, from inside malloc's slow paths, by whichever thread gets there
 * first; the others wait the few instructions it takes. glibc runs key destructors for every
 * thread but the main one, and runs them again if a destructor leaves a value set. Without a
 * key to be had (all PTHREAD_KEYS_MAX taken) the hook is never armed, which each user
 * tolerates. */
#ifndef HK_EXIT_KEY_H
#define HK_EXIT_KEY_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

struct hk_exit_key {
    pthread_key_t key;
    _Atomic int state; /* 0 not made, 1 being made, 2 made, 3 none to be had */
};

/* Arms k for the calling thread with value v (not NULL): 1 if its destructor will run at the
 * thread's exit, 0 if there is no key. */
static inline int hk_exit_key_arm(struct hk_exit_key *k, void (*dtor)(void *), void *v) {
    int st = atomic_load_explicit(&k->state, memory_order_acquire);
    if (st < 2) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&k->state, &expect, 1)) {
            st = pthread_key_create(&k->key, dtor) == 0 ? 2 : 3;
            atomic_store_explicit(&k->state, st, memory_order_release);
        } else {
            while ((st = atomic_load_explicit(&k->state, memory_order_acquire)) == 1)
                sched_yield();
        }
    }
    return st == 2 && pthread_setspecific(k->key, v) == 0;
}

#endif
