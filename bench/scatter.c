/*
 * scatter THREADS LOOPS BLOCKS OPS CROSS MIN MAX SEED
 *
 * Threads that each keep a private array of BLOCKS slots and, LOOPS times,
 * free the blocks of OPS slots picked at random, then allocate blocks into
 * OPS slots picked at random (freeing whatever a slot still holds), writing
 * the first and last byte of each.  Sizes run from MIN to MAX bytes with a
 * linear falloff (small ones most likely), as in a program whose records
 * are mostly small and sometimes large.  Every CROSS-th loop (0: never) a
 * thread also allocates OPS blocks and hands them, as one list, to the next
 * thread, which frees them at the start of its next loop: the share of
 * frees that are remote is about 1 / (CROSS + 1); a thread whose loops are
 * over is handed nothing more.  Every free checks the block's first byte.  Reports mallocs plus frees per second.
 */
#include "common.h"
#include <stdatomic.h>

struct handed {
    struct handed *next; /* the next block of the batch */
    size_t size;
    unsigned char tag;
};

struct worker {
    _Alignas(64) _Atomic(struct handed *) inbox; /* batches handed to this thread */
    atomic_int done;                             /* its loops are over: hand it nothing */
    uint64_t index;
    uint64_t ops;                                /* mallocs and frees made */
};

static struct worker *g_w;
static uint64_t g_threads, g_loops, g_blocks, g_ops, g_cross, g_min, g_max, g_seed;

/* Linear falloff over [g_min, g_max]: the smaller of two uniform draws. */
static size_t pick_size(rng_t *r)
{
    uint64_t span = g_max - g_min + 1, a = rng_below(r, span), b = rng_below(r, span);
    return (size_t)(g_min + (a < b ? a : b));
}

static unsigned char tag_of(const void *p)
{
    return (unsigned char)((uintptr_t)p >> 4);
}

static void *fill(size_t n)
{
    unsigned char *p = xmalloc(n);
    p[0] = tag_of(p);
    p[n - 1] = (unsigned char)n;
    return p;
}

static void check_free(void *p, size_t n)
{
    unsigned char *b = p;
    if (b[0] != tag_of(p) || b[n - 1] != (unsigned char)n)
        die("a block of %zu bytes was overwritten", n);
    free(p);
}

/* Frees every batch handed to w; returns the blocks freed. */
static uint64_t drain(struct worker *w)
{
    uint64_t n = 0;
    struct handed *h = atomic_exchange_explicit(&w->inbox, NULL, memory_order_acquire);
    while (h) {
        struct handed *next = h->next;
        if (h->tag != tag_of(h))
            die("a handed block was overwritten");
        free(h);
        h = next;
        n++;
    }
    return n;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct worker *to = &g_w[(w->index + 1) % g_threads];
    rng_t r;
    rng_seed(&r, g_seed, w->index + 1);
    void **slot = xcalloc((size_t)g_blocks, sizeof *slot);
    size_t *size = xcalloc((size_t)g_blocks, sizeof *size);
    uint64_t ops = 0;
    for (uint64_t loop = 0; loop < g_loops; loop++) {
        ops += drain(w);
        for (uint64_t i = 0; i < g_ops; i++) {
            uint64_t k = rng_below(&r, g_blocks);
            if (slot[k]) {
                check_free(slot[k], size[k]);
                slot[k] = NULL;
                ops++;
            }
        }
        for (uint64_t i = 0; i < g_ops; i++) {
            uint64_t k = rng_below(&r, g_blocks);
            if (slot[k]) {
                check_free(slot[k], size[k]);
                ops++;
            }
            size[k] = pick_size(&r);
            slot[k] = fill(size[k]);
            ops++;
        }
        if (g_cross && g_threads > 1 && loop % g_cross == g_cross - 1 &&
            !atomic_load_explicit(&to->done, memory_order_relaxed)) {
            struct handed *first = NULL, *last = NULL;
            for (uint64_t i = 0; i < g_ops; i++) {
                size_t n = pick_size(&r);
                struct handed *h = xmalloc(n < sizeof *h ? sizeof *h : n);
                h->next = first;
                h->size = n;
                h->tag = tag_of(h);
                if (!last)
                    last = h;
                first = h;
                ops++;
            }
            struct handed *head = atomic_load_explicit(&to->inbox, memory_order_relaxed);
            do
                last->next = head;
            while (!atomic_compare_exchange_weak_explicit(&to->inbox, &head, first,
                                                          memory_order_release,
                                                          memory_order_relaxed));
        }
    }
    atomic_store_explicit(&w->done, 1, memory_order_relaxed);
    ops += drain(w);
    for (uint64_t k = 0; k < g_blocks; k++)
        if (slot[k]) {
            check_free(slot[k], size[k]);
            ops++;
        }
    free(slot);
    free(size);
    w->ops = ops;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "scatter",
               "[THREADS=2] [LOOPS=1000] [BLOCKS=10000] [OPS=1000] [CROSS=2] [MIN=16] "
               "[MAX=16000] [SEED=42]", 8);
    g_threads = arg_threads(argc, argv, 1);
    g_loops = arg_u64(argc, argv, 2, "LOOPS", 1000, 1, UINT64_MAX / 4);
    g_blocks = arg_u64(argc, argv, 3, "BLOCKS", 10000, 1, 1ULL << 28);
    g_ops = arg_u64(argc, argv, 4, "OPS", 1000, 1, 1ULL << 28);
    g_cross = arg_u64(argc, argv, 5, "CROSS", 2, 0, UINT64_MAX);
    g_min = arg_u64(argc, argv, 6, "MIN", 16, 1, 1ULL << 30);
    g_max = arg_u64(argc, argv, 7, "MAX", 16000, 1, 1ULL << 30);
    g_seed = arg_u64(argc, argv, 8, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN", g_min, "MAX", g_max);
    print_params("threads=%" PRIu64 " loops=%" PRIu64 " blocks=%" PRIu64 " ops=%" PRIu64
                 " cross=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64 " seed=%" PRIu64,
                 g_threads, g_loops, g_blocks, g_ops, g_cross, g_min, g_max, g_seed);

    g_w = xcalloc((size_t)g_threads, sizeof *g_w);
    pthread_t *tid = xcalloc((size_t)g_threads, sizeof *tid);
    for (uint64_t i = 0; i < g_threads; i++)
        g_w[i].index = i;
    double t0 = now_sec();
    for (uint64_t i = 0; i < g_threads; i++)
        xpthread_create(&tid[i], run, &g_w[i]);
    xpthread_join_all(tid, g_threads);
    double t1 = now_sec();
    uint64_t ops = 0;
    for (uint64_t i = 0; i < g_threads; i++)
        ops += drain(&g_w[i]) + g_w[i].ops; /* batches handed after their receiver ended */
    free(g_w);
    free(tid);
    print_result((double)ops, t1 - t0, NULL);
    return 0;
}
