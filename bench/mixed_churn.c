/*
 * mixed_churn THREADS WAVES OPS SLOTS MAX_KB SEED [MIX]
 *
 * A stress with everything at once: threads that come and go, blocks of
 * every size, and blocks freed by threads other than the one that
 * allocated them.  SLOTS shared slots hold live blocks.  Each wave starts
 * THREADS threads; each does OPS steps and exits, and the next wave starts.
 * A step picks a random slot, puts a new block there (atomic exchange) and
 * frees the block it displaced, usually one another thread (maybe one that
 * has exited) allocated, after checking its contents.  Sizes: 80% 8..256
 * bytes, 15% up to 64 KiB, 4% up to 1 MiB, 1% up to MAX_KB (default
 * 4 MiB), log-uniform within each range; MIX ("80,15,4,1") sets the four
 * weights (0,0,0,1: big blocks only, which with THREADS=1 is a program
 * whose threads come and go one at a time, each replacing big blocks the
 * ones before it made).  Reports steps per second.
 */
#include "common.h"
#include <stdatomic.h>

struct blk {
    size_t size;
    uint64_t tag;
};

static _Atomic(struct blk *) *g_slots;
static uint64_t g_nslots, g_ops, g_seed, g_max;
static unsigned g_mix[4] = {80, 15, 4, 1}; /* weights of the four ranges */

static size_t pick_size(rng_t *r)
{
    uint64_t u = rng_below(r, g_mix[0] + g_mix[1] + g_mix[2] + g_mix[3]);
    if (u < g_mix[0])
        return (size_t)rng_log_range(r, 8, 256);
    if ((u -= g_mix[0]) < g_mix[1])
        return (size_t)rng_log_range(r, 257, 65536);
    if ((u -= g_mix[1]) < g_mix[2])
        return (size_t)rng_log_range(r, 65537, 1 << 20);
    return (size_t)rng_log_range(r, (1 << 20) + 1, g_max);
}

/* A block records its size and a tag at the start; the tag is repeated in
 * its last 8 bytes (when it has room for both). */
static struct blk *make(rng_t *r)
{
    size_t sz = pick_size(r);
    if (sz < sizeof(struct blk))
        sz = sizeof(struct blk);
    struct blk *b = xmalloc(sz);
    b->size = sz;
    b->tag = rng_next(r) | 1;
    touch_pages((char *)b + sizeof *b, sz - sizeof *b, (unsigned char)b->tag);
    if (sz >= sizeof(struct blk) + 8)
        memcpy((char *)b + sz - 8, &b->tag, 8);
    return b;
}

static void check_and_free(struct blk *b)
{
    if (b == NULL)
        return;
    uint64_t t;
    if (b->size >= sizeof(struct blk) + 8) {
        memcpy(&t, (char *)b + b->size - 8, 8);
        if (t != b->tag)
            die("block %p of %zu bytes was corrupted", (void *)b, b->size);
    }
    free(b);
}

struct worker {
    uint64_t stream;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    rng_t r;
    rng_seed(&r, g_seed, w->stream);
    for (uint64_t i = 0; i < g_ops; i++) {
        struct blk *b = make(&r);
        uint64_t k = rng_below(&r, g_nslots);
        check_and_free(atomic_exchange_explicit(&g_slots[k], b, memory_order_acq_rel));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "mixed_churn",
               "[THREADS=2] [WAVES=200] [OPS=5000] [SLOTS=4096] [MAX_KB=4096] [SEED=42] [MIX=80,15,4,1]",
               7);
    uint64_t nthreads = arg_threads(argc, argv, 1);
    uint64_t waves = arg_u64(argc, argv, 2, "WAVES", 200, 1, 1ULL << 30);
    g_ops = arg_u64(argc, argv, 3, "OPS", 5000, 1, 1ULL << 40);
    g_nslots = arg_u64(argc, argv, 4, "SLOTS", 4096, 1, 1ULL << 26);
    g_max = arg_u64(argc, argv, 5, "MAX_KB", 4096, 1025, 1ULL << 24) * 1024;
    g_seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    if (argc > 7) {
        char end;
        if (sscanf(argv[7], "%u,%u,%u,%u%c", &g_mix[0], &g_mix[1], &g_mix[2], &g_mix[3],
                   &end) != 4 || g_mix[0] > 1000 || g_mix[1] > 1000 || g_mix[2] > 1000 ||
            g_mix[3] > 1000 || g_mix[0] + g_mix[1] + g_mix[2] + g_mix[3] == 0)
            usage_exit(2, "MIX: not four weights 0..1000 with a sum above 0: '%s'", argv[7]);
    }

    print_params("threads=%" PRIu64 " waves=%" PRIu64 " ops=%" PRIu64 " slots=%" PRIu64
                 " max_kb=%" PRIu64 " seed=%" PRIu64 " mix=%u,%u,%u,%u",
                 nthreads, waves, g_ops, g_nslots, g_max / 1024, g_seed, g_mix[0], g_mix[1],
                 g_mix[2], g_mix[3]);

    g_slots = xcalloc((size_t)g_nslots, sizeof *g_slots);
    pthread_t *tid = xcalloc((size_t)nthreads, sizeof *tid);
    struct worker *w = xcalloc((size_t)nthreads, sizeof *w);

    double t0 = now_sec();
    for (uint64_t v = 0; v < waves; v++) {
        for (uint64_t t = 0; t < nthreads; t++) {
            w[t].stream = v * nthreads + t + 1;
            xpthread_create(&tid[t], run, &w[t]);
        }
        xpthread_join_all(tid, nthreads);
    }
    double t1 = now_sec();

    for (uint64_t k = 0; k < g_nslots; k++)
        check_and_free(atomic_load(&g_slots[k]));
    free(g_slots);
    free(tid);
    free(w);

    print_result((double)(waves * nthreads * g_ops), t1 - t0,
                 " threads_created=%" PRIu64, waves * nthreads);
    return 0;
}
