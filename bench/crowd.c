/*
 * crowd THREADS BLOCKS MIN MAX ROUNDS SEED [HOLD]
 *
 * Many threads alive at once, each holding a few blocks: a server with a
 * thread per connection, or a pool of workers most of which wait.  Each
 * round starts THREADS threads; each allocates BLOCKS blocks of MIN..MAX
 * bytes (log-uniform, so that they spread over the size classes), writes
 * them, and waits until every thread holds its blocks; the main thread
 * reads the resident set size then, and lets them go: each frees its blocks
 * and exits.  What an allocator keeps per thread (its per-thread state, a
 * slab or a cache per class used, pages touched for blocks carved ahead)
 * is multiplied by the number of threads.  With HOLD 0 (default 1), each
 * thread frees its blocks before it waits: a pool of workers that did some
 * work and now block, whose allocator cannot take back what their caches
 * hold (only the thread itself runs its allocator's code).  Reports threads
 * started per second, and the RSS with every thread waiting (crowd_rss_kb,
 * the largest over the rounds) and per thread (per_thread_kb).
 */
#include "common.h"

static uint64_t g_blocks, g_seed, g_hold;
static size_t g_min, g_max;
static pthread_barrier_t g_held, g_go;

struct member {
    uint64_t index, round;
};

/* Checks and frees a member's blocks. */
static void free_all(void **b, uint64_t index)
{
    for (uint64_t i = 0; i < g_blocks; i++) {
        if (((unsigned char *)b[i])[0] != (unsigned char)(i | 1))
            die("block %" PRIu64 " of thread %" PRIu64 " lost its contents", i, index);
        free(b[i]);
    }
}

static void *member(void *arg)
{
    struct member *m = arg;
    rng_t r;
    rng_seed(&r, g_seed, m->round * 1048576 + m->index + 1);
    void *b[64];
    size_t n[64];
    for (uint64_t i = 0; i < g_blocks; i++) {
        n[i] = (size_t)rng_log_range(&r, g_min, g_max);
        b[i] = xmalloc(n[i]);
        touch_lines(b[i], n[i], (unsigned char)i);
    }
    if (!g_hold)
        free_all(b, m->index);
    pthread_barrier_wait(&g_held); /* every thread holds its blocks, or has freed them */
    pthread_barrier_wait(&g_go);   /* the main thread has read the RSS */
    if (g_hold)
        free_all(b, m->index);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "crowd",
               "[THREADS=1000] [BLOCKS=8] [MIN=16] [MAX=4096] [ROUNDS=3] [SEED=42] [HOLD=1]", 7);
    uint64_t nthreads = arg_u64(argc, argv, 1, "THREADS", 1000, 1, 4096);
    g_blocks = arg_u64(argc, argv, 2, "BLOCKS", 8, 1, 64);
    g_min = (size_t)arg_u64(argc, argv, 3, "MIN", 16, 1, 1ULL << 30);
    g_max = (size_t)arg_u64(argc, argv, 4, "MAX", 4096, 1, 1ULL << 30);
    uint64_t rounds = arg_u64(argc, argv, 5, "ROUNDS", 3, 1, 1ULL << 20);
    g_seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    g_hold = arg_u64(argc, argv, 7, "HOLD", 1, 0, 1);
    check_min_max("MIN", g_min, "MAX", g_max);
    print_params("threads=%" PRIu64 " blocks=%" PRIu64 " min=%zu max=%zu rounds=%" PRIu64
                 " seed=%" PRIu64 " hold=%" PRIu64,
                 nthreads, g_blocks, g_min, g_max, rounds, g_seed, g_hold);

    /* Small stacks, as servers with many threads give them: the stacks' own pages stay few
     * whatever the allocator, and a thousand threads fit any address-space limit. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    pthread_t *tid = xcalloc((size_t)nthreads, sizeof *tid);
    struct member *m = xcalloc((size_t)nthreads, sizeof *m);
    long rss_base = current_rss_kb(), crowd = 0;
    double t0 = now_sec();
    for (uint64_t round = 0; round < rounds; round++) {
        pthread_barrier_init(&g_held, NULL, (unsigned)nthreads + 1);
        pthread_barrier_init(&g_go, NULL, (unsigned)nthreads + 1);
        for (uint64_t t = 0; t < nthreads; t++) {
            m[t] = (struct member){.index = t, .round = round};
            int rc = pthread_create(&tid[t], &attr, member, &m[t]);
            if (rc != 0)
                die("pthread_create: %s", strerror(rc));
        }
        pthread_barrier_wait(&g_held);
        long rss = current_rss_kb();
        if (rss > crowd)
            crowd = rss;
        pthread_barrier_wait(&g_go);
        xpthread_join_all(tid, nthreads);
        pthread_barrier_destroy(&g_held);
        pthread_barrier_destroy(&g_go);
    }
    double t1 = now_sec();
    pthread_attr_destroy(&attr);
    free(tid);
    free(m);
    print_result((double)(rounds * nthreads), t1 - t0,
                 " crowd_rss_kb=%ld per_thread_kb=%.1f", crowd,
                 (double)(crowd - rss_base) / (double)nthreads);
    return 0;
}
