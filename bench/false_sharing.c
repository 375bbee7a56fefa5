/*
 * cache_thrash  THREADS ITERATIONS OBJSIZE REPETITIONS
 * cache_scratch THREADS ITERATIONS OBJSIZE REPETITIONS
 *
 * One benchmark in two modes: bench/Makefile builds this file twice, with
 * -DFALSE_SHARING_SCRATCH=0 into cache_thrash and with
 * -DFALSE_SHARING_SCRATCH=1 into cache_scratch.
 *
 * cache_thrash: active false sharing.  Each thread, ITERATIONS times:
 * malloc(OBJSIZE), write every byte of the block REPETITIONS/THREADS times,
 * free it (the total work does not depend on THREADS).  The threads run
 * simultaneously, so an allocator that hands out neighbouring small blocks
 * (same cache line) to different threads makes the cores fight over that
 * line and the run gets much slower.  Reports wall time in seconds.
 *
 * cache_scratch: passive false sharing.  The main thread allocates one
 * OBJSIZE block per worker, back to back (so they are likely to share a
 * cache line), and hands block i to worker i.  Each worker frees the block
 * it was given, then ITERATIONS times: malloc(OBJSIZE), write every byte
 * REPETITIONS/THREADS times, free.  An allocator that gives the freed
 * neighbour-of-a-neighbour block back to the worker (e.g. by caching remote
 * frees in the freeing thread) makes the workers share cache lines.  Reports
 * wall time in seconds.
 */
#include "common.h"

#if !defined(FALSE_SHARING_SCRATCH)
#error "build with -DFALSE_SHARING_SCRATCH=0 (cache_thrash) or =1 (cache_scratch)"
#endif

#if FALSE_SHARING_SCRATCH
#define PROG_NAME "cache_scratch"
#else
#define PROG_NAME "cache_thrash"
#endif

static uint64_t g_iter, g_objsize, g_reps; /* g_reps: per thread */
static pthread_barrier_t g_start;

/* arg: cache_scratch: the block main allocated for this worker;
 *      cache_thrash: NULL */
static void *worker(void *arg)
{
    pthread_barrier_wait(&g_start);
    if (FALSE_SHARING_SCRATCH)
        free(arg); /* remote free of a block allocated by main */
    unsigned acc = 0;
    for (uint64_t i = 0; i < g_iter; i++) {
        volatile unsigned char *p = xmalloc((size_t)g_objsize);
        for (uint64_t r = 0; r < g_reps; r++) {
            for (uint64_t k = 0; k < g_objsize; k++) {
                p[k] = (unsigned char)(r + k); /* write ... */
                acc += p[k];                   /* ... and read it back */
            }
        }
        free((void *)p);
    }
    __asm__ volatile("" : : "r"(acc)); /* keep the reads */
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, PROG_NAME,
               "[THREADS=2] [ITERATIONS=1000] [OBJSIZE=8] [REPETITIONS=100000]", 4);
    uint64_t nthreads = arg_threads(argc, argv, 1);
    g_iter = arg_u64(argc, argv, 2, "ITERATIONS", 1000, 1, UINT64_MAX / 2);
    g_objsize = arg_u64(argc, argv, 3, "OBJSIZE", 8, 1, 1ULL << 20);
    uint64_t reps = arg_u64(argc, argv, 4, "REPETITIONS", 100000, 1, UINT64_MAX / 2);
    /* the total work is fixed: each thread does REPETITIONS / THREADS */
    g_reps = reps / nthreads ? reps / nthreads : 1;

    print_params("threads=%" PRIu64 " iterations=%" PRIu64 " objsize=%" PRIu64
                 " repetitions=%" PRIu64 " per_thread=%" PRIu64,
                 nthreads, g_iter, g_objsize, reps, g_reps);

    pthread_t *tid = xcalloc((size_t)nthreads, sizeof *tid);
    void **given = NULL; /* cache_scratch: the blocks handed to the workers */
    if (FALSE_SHARING_SCRATCH) {
        given = xcalloc((size_t)nthreads, sizeof *given);
        for (uint64_t t = 0; t < nthreads; t++) {
            given[t] = xmalloc((size_t)g_objsize);
            memset(given[t], 0x5a, (size_t)g_objsize);
        }
    }
    if (pthread_barrier_init(&g_start, NULL, (unsigned)nthreads + 1) != 0)
        die("pthread_barrier_init failed");
    for (uint64_t t = 0; t < nthreads; t++)
        xpthread_create(&tid[t], worker, given != NULL ? given[t] : NULL);
    pthread_barrier_wait(&g_start);
    double t0 = now_sec();
    xpthread_join_all(tid, nthreads);
    double t1 = now_sec();
    pthread_barrier_destroy(&g_start);
    if (FALSE_SHARING_SCRATCH)
        free(given);
    free(tid);

    print_result(NO_OPS, t1 - t0, NULL);
    return 0;
}
