/*
 * thread_churn THREADS ROUNDS BLOCKS MIN MAX SEED HANDOFF
 *
 * Short-lived threads.  Each round creates THREADS threads and joins them.
 * Thread i of a round allocates BLOCKS blocks of MIN..MAX bytes, frees
 * every other one itself and leaves the rest behind.  With HANDOFF=next
 * (the default) it frees each block's predecessor as it goes, and thread i
 * of the next round frees the rest first thing; with HANDOFF=main it
 * allocates all of them before freeing every other one, and the main
 * thread frees the rest right after the join.  Either way
 * the blocks are freed after their owner exited.  Stresses per-thread heap
 * set-up / tear-down, the memory of threads that have exited, and how soon
 * an allocator gives pages back that the next round wants again.  Reports allocations per second (thread
 * creation included) and the resident set size after the first round and
 * after the last round (both taken with the same number of live blocks, so
 * growth between them is memory the allocator kept from dead threads).
 */
#include "common.h"

struct slot {
    void **left;     /* blocks left by the previous thread of this slot */
    size_t nleft;
    uint64_t round;
    uint64_t index;
};

static uint64_t g_blocks, g_seed;
static size_t g_min, g_max;
static int g_main_frees; /* HANDOFF=main */

static void free_left(struct slot *S)
{
    for (size_t i = 0; i < S->nleft; i++)
        free(S->left[i]);
    S->nleft = 0;
}

static void *worker(void *arg)
{
    struct slot *S = arg;
    free_left(S);

    rng_t r;
    rng_seed(&r, g_seed, S->round * 65536 + S->index + 1);
    if (g_main_frees) {
        /* Allocate them all, then free every other one: the survivors are
         * spread over every slab the thread used. */
        for (uint64_t b = 0; b < g_blocks; b++) {
            size_t sz = (size_t)rng_range(&r, g_min, g_max);
            S->left[b] = xmalloc(sz);
            touch_lines(S->left[b], sz, (unsigned char)b);
        }
        for (uint64_t b = 0; b < g_blocks; b += 2)
            free(S->left[b]);
        for (uint64_t b = 1; b < g_blocks; b += 2)
            S->left[S->nleft++] = S->left[b];
        return NULL;
    }
    void *prev = NULL;
    for (uint64_t b = 0; b < g_blocks; b++) {
        size_t sz = (size_t)rng_range(&r, g_min, g_max);
        void *p = xmalloc(sz);
        touch_lines(p, sz, (unsigned char)b);
        if (b & 1) {
            free(prev);              /* freed by its own thread */
            S->left[S->nleft++] = p; /* left for the next round */
        } else {
            prev = p;
        }
    }
    if (g_blocks & 1)
        free(prev);              /* last block had no partner */
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "thread_churn",
               "[THREADS=2] [ROUNDS=2000] [BLOCKS=2000] [MIN=16] [MAX=512] [SEED=42]"
               " [HANDOFF=next|main]", 7);
    uint64_t nthreads = arg_threads(argc, argv, 1);
    uint64_t rounds = arg_u64(argc, argv, 2, "ROUNDS", 2000, 1, 1ULL << 40);
    g_blocks = arg_u64(argc, argv, 3, "BLOCKS", 2000, 1, 1ULL << 30);
    g_min = (size_t)arg_u64(argc, argv, 4, "MIN", 16, 1, 1ULL << 30);
    g_max = (size_t)arg_u64(argc, argv, 5, "MAX", 512, 1, 1ULL << 30);
    g_seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN", g_min, "MAX", g_max);
    if (argc > 7) {
        if (strcmp(argv[7], "main") == 0)
            g_main_frees = 1;
        else if (strcmp(argv[7], "next") != 0)
            usage_exit(2, "HANDOFF must be next or main, not '%s'", argv[7]);
    }

    print_params("threads=%" PRIu64 " rounds=%" PRIu64 " blocks=%" PRIu64
                 " min=%zu max=%zu seed=%" PRIu64 " handoff=%s",
                 nthreads, rounds, g_blocks, g_min, g_max, g_seed,
                 g_main_frees ? "main" : "next");

    struct slot *slots = xcalloc((size_t)nthreads, sizeof *slots);
    pthread_t *tid = xcalloc((size_t)nthreads, sizeof *tid);
    for (uint64_t t = 0; t < nthreads; t++) {
        slots[t].left = xcalloc((size_t)g_blocks, sizeof(void *));
        slots[t].index = t;
    }

    long rss_first = 0;
    double t0 = now_sec();
    for (uint64_t round = 0; round < rounds; round++) {
        for (uint64_t t = 0; t < nthreads; t++) {
            slots[t].round = round;
            xpthread_create(&tid[t], worker, &slots[t]);
        }
        xpthread_join_all(tid, nthreads);
        if (g_main_frees)
            for (uint64_t t = 0; t < nthreads; t++)
                free_left(&slots[t]);
        if (round == 0)
            rss_first = current_rss_kb();
    }
    double t1 = now_sec();
    long rss_end = current_rss_kb();

    for (uint64_t t = 0; t < nthreads; t++) {
        free_left(&slots[t]);
        free(slots[t].left);
    }
    free(slots);
    free(tid);

    uint64_t allocs = rounds * nthreads * g_blocks;
    print_result((double)allocs, t1 - t0,
                 " threads_created=%" PRIu64 " rss_first_kb=%ld rss_end_kb=%ld",
                 rounds * nthreads, rss_first, rss_end);
    return 0;
}
