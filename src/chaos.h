/* chaos.h - random delays at the points where a thread acts on shared state, for the chaos
 * build only (make chaos, HK_CHAOS); nothing in every other build.
 *
 * An owner reads its slabs' state without marking itself busy on its fast paths, and helpers,
 * adopters and exiting threads change that state under it (heap.c, "Idle owners"). A fault of
 * that kind opens a window of a few instructions: the one fixed in 3164de7 (free's own-block
 * path acted on an owner read before the heap was marked busy) stopped tests/stress about once
 * in 175 runs of 10 seconds. The chaos build yields the processor or sleeps at random where a
 * thread enters or leaves its heap's slow paths, after free's second try reads a slab's owner,
 * before and while a helper works in another thread's heap, before an exiting thread
 * unpublishes its heap, before an orphan's free takes its stripe, before the compare-and-swaps
 * of the inboxes and the large tier's queued frees, and before a SuperSlab is mapped without
 * the pool's lock; and it runs the threads' ticks, helps and hand-overs of exited threads'
 * heaps 5 to 20 times as often (HK_CHAOS_FAST). So each such window is crossed while other
 * threads run, thousands of times a second. With 3164de7 undone, tests/stress stopped in 10
 * runs of 5 seconds out of 10 (32 threads; docs/RELIABILITY.md, "Stress"); tests/run.sh runs
 * it. */
#ifndef HK_CHAOS_H
#define HK_CHAOS_H

#ifdef HK_CHAOS
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

/* Of 1,024 passes, 64 yield, 16 sleep for 20 us and 4 for 3 ms, longer than HK_IDLE_MS here,
 * so that a thread stopped in such a window can be taken for idle and helped (a thread-local
 * xorshift, seeded by the variable's address, which differs from thread to thread). */
static inline void hk_chaos(void) {
    static __thread uint64_t x;
    if (x == 0) x = (uint64_t)(uintptr_t)&x | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    unsigned r = (unsigned)(x >> 54);
    if (r < 64) {
        sched_yield();
    } else if (r < 84) {
        int err = errno; /* no call of the malloc family may change errno where it succeeds */
        struct timespec t = {0, r < 80 ? 20000 : 3000000};
        nanosleep(&t, NULL);
        errno = err;
    }
}
/* A period (milliseconds, or refills), shorter in the chaos build. */
#define HK_CHAOS_FAST(normal, fast) (fast)
#else
#define hk_chaos() ((void)0)
#define HK_CHAOS_FAST(normal, fast) (normal)
#endif

#endif
