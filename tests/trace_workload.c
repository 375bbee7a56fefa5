/* A short scripted workload that gives every trace category something to report
 * (tests/trace.sh): small blocks (pool, os), large blocks freed and taken again (large),
 * slabs emptied and refilled over several 100 ms windows (ace), a thread that exits with a
 * live block whose slab another thread then adopts (thread), and a request no allocator can
 * serve (fail). Linked against plain libc; hakmem comes in by LD_PRELOAD. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *volatile sink;

static void *leave_a_block(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) sink = malloc(720); /* the last ones stay live */
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
    /* large: a block freed, then one of the same size: served from the cache */
    for (int i = 0; i < 3; i++) {
        char *p = malloc(3 << 20);
        memset(p, 1, 4096);
        sink = p;
        free(sink);
    }
    /* thread: an orphan with live blocks, adopted by the next refill of its class (the
     * thread hands its heap over as it exits; a trim gives that heap up, which makes its
     * slabs orphans) */
    pthread_t t;
    pthread_create(&t, NULL, leave_a_block, NULL);
    pthread_join(t, NULL);
    malloc_trim(0);
    for (int i = 0; i < 200; i++) sink = malloc(720);
    /* ace: whole slabs emptied and taken again, window after window: 8 slabs of 8 KiB blocks,
     * of which the thread's cache can hold one (64-byte blocks, 4 slabs of them, no longer
     * did: the cache and the kept slab absorbed every round) */
    static void *v[64];
    for (double end = now() + 0.35; now() < end;) {
        for (int i = 0; i < 64; i++) v[i] = malloc(8192);
        for (int i = 0; i < 64; i++) free(v[i]);
    }
    /* fail: more than any process may have */
    volatile size_t huge = SIZE_MAX / 2 + 1;
    sink = malloc(huge);
    puts(sink == NULL ? "done" : "unexpected");
    return 0;
}
