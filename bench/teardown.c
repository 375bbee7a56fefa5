/*
 * teardown N ROUNDS MIN MAX ORDER SEED [HANDOFF]
 *
 * A program that builds a large structure and takes it apart, ROUNDS times:
 * N blocks of MIN..MAX bytes (uniform) are allocated one after the other,
 * each written once, and then all freed, in an order set by ORDER: "random"
 * (a hash table or a tree torn down: each free lands on a block written long
 * ago, anywhere in the heap), "fifo" (the order they were made) or "lifo".
 * With the defaults the heap peaks at about 70 MB of small blocks, more
 * slabs than a thread keeps at hand and more memory than the caches hold:
 * what it measures is the free path of a thread's own blocks over a big
 * heap, the return of a thread cache's surplus when nothing is allocated,
 * and how the next round's mallocs reuse what the last round freed (in the
 * order the free lists were left in).  With HANDOFF 1, each round's blocks
 * are allocated by a new thread, which exits before the main thread frees
 * them (a worker's result taken apart by another: every free is of a slab
 * whose owner is gone, and the next round's thread wants the memory back at
 * once).  With HANDOFF W above 1, W workers build a W-th of the blocks each,
 * at once, and all exit before the main thread frees them: in random order,
 * its frees go to the W exited threads' slabs by turns (a parallel phase's
 * results, or a thread pool's, taken apart at the end).  Reports mallocs plus
 * frees per second over both phases (the shuffle and the threads' start are
 * not timed), and the nanoseconds of a malloc and of a free.
 */
#include "common.h"

struct build {
    unsigned char **block;
    uint64_t n, min, max, round;
    rng_t *r;
    double seconds;
};

/* Allocates the round's blocks, each written once. */
static void *build_blocks(void *arg)
{
    struct build *b = arg;
    double t0 = now_sec();
    for (uint64_t i = 0; i < b->n; i++) {
        size_t sz = (size_t)rng_range(b->r, b->min, b->max);
        unsigned char *p = xmalloc(sz);
        p[0] = (unsigned char)i;
        p[sz - 1] = (unsigned char)b->round;
        b->block[i] = p;
    }
    b->seconds = now_sec() - t0;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "teardown",
               "[N=1000000] [ROUNDS=10] [MIN=16] [MAX=128] [ORDER=random|fifo|lifo] [SEED=42] "
               "[HANDOFF=0..64]",
               7);
    uint64_t n = arg_u64(argc, argv, 1, "N", 1000000, 1, 1ULL << 32);
    uint64_t rounds = arg_u64(argc, argv, 2, "ROUNDS", 10, 1, 1ULL << 32);
    uint64_t min = arg_u64(argc, argv, 3, "MIN", 16, 1, 1ULL << 30);
    uint64_t max = arg_u64(argc, argv, 4, "MAX", 128, 1, 1ULL << 30);
    const char *order = argc > 5 ? argv[5] : "random";
    uint64_t seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    uint64_t handoff = arg_u64(argc, argv, 7, "HANDOFF", 0, 0, 64);
    check_min_max("MIN", min, "MAX", max);
    int shuffle = strcmp(order, "random") == 0, lifo = strcmp(order, "lifo") == 0;
    if (!shuffle && !lifo && strcmp(order, "fifo") != 0)
        usage_exit(2, "ORDER must be random, fifo or lifo (got '%s')", order);

    print_params("n=%" PRIu64 " rounds=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64
                 " order=%s seed=%" PRIu64 " handoff=%" PRIu64, n, rounds, min, max, order, seed,
                 handoff);

    unsigned char **block = xcalloc((size_t)n, sizeof *block);
    rng_t r;
    rng_seed(&r, seed, 1);
    double t_alloc = 0, t_free = 0;
    uint64_t check = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        struct build b = {block, n, min, max, round, &r, 0};
        if (handoff == 1) {
            pthread_t t;
            xpthread_create(&t, build_blocks, &b);
            xpthread_join_all(&t, 1);
        } else if (handoff > 1) {
            /* Worker w builds blocks [n*w/W, n*(w+1)/W) with a generator of its own; the
             * round's time is the slowest worker's. */
            struct build wb[64];
            rng_t wr[64];
            pthread_t wt[64];
            for (uint64_t w = 0; w < handoff; w++) {
                uint64_t lo = n * w / handoff, hi = n * (w + 1) / handoff;
                rng_seed(&wr[w], seed, 2 + round * 64 + w);
                wb[w] = (struct build){block + lo, hi - lo, min, max, round, &wr[w], 0};
                xpthread_create(&wt[w], build_blocks, &wb[w]);
            }
            xpthread_join_all(wt, (size_t)handoff);
            for (uint64_t w = 0; w < handoff; w++)
                if (wb[w].seconds > b.seconds) b.seconds = wb[w].seconds;
        } else {
            build_blocks(&b);
        }
        if (shuffle) {
            for (uint64_t i = n - 1; i > 0; i--) {
                uint64_t j = rng_below(&r, i + 1);
                unsigned char *t = block[i];
                block[i] = block[j];
                block[j] = t;
            }
        }
        double t2 = now_sec();
        for (uint64_t k = 0; k < n; k++) {
            unsigned char *p = block[lifo ? n - 1 - k : k];
            check += p[0];
            free(p);
        }
        double t3 = now_sec();
        t_alloc += b.seconds;
        t_free += t3 - t2;
    }
    escape(&check);
    free(block);
    double ops = 2.0 * (double)n * (double)rounds;
    print_result(ops, t_alloc + t_free, " malloc_ns=%.1f free_ns=%.1f",
                 t_alloc * 1e9 / ((double)n * (double)rounds),
                 t_free * 1e9 / ((double)n * (double)rounds));
    return 0;
}
