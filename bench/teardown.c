/*
 * teardown N ROUNDS MIN MAX ORDER SEED
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
 * order the free lists were left in).  Single-threaded.  Reports mallocs
 * plus frees per second over both phases (the shuffle is not timed), and
 * the nanoseconds of a malloc and of a free.
 */
#include "common.h"

int main(int argc, char **argv)
{
    bench_init(argc, argv, "teardown",
               "[N=1000000] [ROUNDS=10] [MIN=16] [MAX=128] [ORDER=random|fifo|lifo] [SEED=42]",
               6);
    uint64_t n = arg_u64(argc, argv, 1, "N", 1000000, 1, 1ULL << 32);
    uint64_t rounds = arg_u64(argc, argv, 2, "ROUNDS", 10, 1, 1ULL << 32);
    uint64_t min = arg_u64(argc, argv, 3, "MIN", 16, 1, 1ULL << 30);
    uint64_t max = arg_u64(argc, argv, 4, "MAX", 128, 1, 1ULL << 30);
    const char *order = argc > 5 ? argv[5] : "random";
    uint64_t seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN", min, "MAX", max);
    int shuffle = strcmp(order, "random") == 0, lifo = strcmp(order, "lifo") == 0;
    if (!shuffle && !lifo && strcmp(order, "fifo") != 0)
        usage_exit(2, "ORDER must be random, fifo or lifo (got '%s')", order);

    print_params("n=%" PRIu64 " rounds=%" PRIu64 " min=%" PRIu64 " max=%" PRIu64
                 " order=%s seed=%" PRIu64, n, rounds, min, max, order, seed);

    unsigned char **block = xcalloc((size_t)n, sizeof *block);
    rng_t r;
    rng_seed(&r, seed, 1);
    double t_alloc = 0, t_free = 0;
    uint64_t check = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        double t0 = now_sec();
        for (uint64_t i = 0; i < n; i++) {
            size_t sz = (size_t)rng_range(&r, min, max);
            unsigned char *p = xmalloc(sz);
            p[0] = (unsigned char)i;
            p[sz - 1] = (unsigned char)round;
            block[i] = p;
        }
        double t1 = now_sec();
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
        t_alloc += t1 - t0;
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
