/*
 * phases ROUNDS ARRAYS MIB SEED
 *
 * A program whose memory changes shape from one phase to the next, as an interpreter's does
 * when a script builds big arrays, drops them and then builds many small objects: each round
 *   1. grows ARRAYS arrays by realloc, doubling from 64 bytes to 4 MiB and writing each new
 *      part, keeps them all, and frees them;
 *   2. allocates about MIB MiB of small objects (16..128 bytes, written), and frees them.
 * Both phases need about the same memory but never at the same time, so the footprint a
 * program needs is one phase's, not the two together. An allocator that keeps each size
 * range's free memory for that range alone holds both at once. Reports the peak RSS (the
 * figure to watch) beside the time and the page faults after the first round.
 */
#include "common.h"

#define ARRAY_MAX ((size_t)4 << 20)

int main(int argc, char **argv)
{
    bench_init(argc, argv, "phases", "[ROUNDS=5] [ARRAYS=20] [MIB=80] [SEED=42]", 4);
    uint64_t rounds = arg_u64(argc, argv, 1, "ROUNDS", 5, 1, 100000);
    uint64_t narrays = arg_u64(argc, argv, 2, "ARRAYS", 20, 1, 4096);
    uint64_t mib = arg_u64(argc, argv, 3, "MIB", 80, 1, 1ULL << 20);
    uint64_t seed = arg_u64(argc, argv, 4, "SEED", 42, 0, UINT64_MAX);
    print_params("rounds=%" PRIu64 " arrays=%" PRIu64 " mib=%" PRIu64 " seed=%" PRIu64, rounds,
                 narrays, mib, seed);

    rng_t r;
    rng_seed(&r, seed, 1);
    unsigned char **arr = xmalloc(narrays * sizeof *arr);
    size_t cap = 4096;
    void **blk = xmalloc(cap * sizeof *blk);
    uint64_t target = mib << 20;
    long flt_first = 0;
    double ops = 0;
    double t0 = now_sec();
    for (uint64_t round = 0; round < rounds; round++) {
        for (uint64_t k = 0; k < narrays; k++) {
            unsigned char *a = NULL;
            size_t len = 0;
            for (size_t n = 64; n <= ARRAY_MAX; n *= 2) {
                a = realloc(a, n);
                if (a == NULL)
                    die("realloc(%zu) returned NULL", n);
                touch_pages(a + len, n - len, (unsigned char)k);
                len = n;
                ops++;
            }
            arr[k] = a;
        }
        for (uint64_t k = 0; k < narrays; k++)
            free(arr[k]);
        size_t n = fill_blocks(&r, &blk, &cap, target, 16, 128);
        for (size_t i = 0; i < n; i++)
            free(blk[i]);
        ops += 2.0 * (double)n;
        if (round == 0)
            flt_first = minor_faults();
    }
    double secs = now_sec() - t0;
    free(arr);
    free(blk);
    print_result(ops, secs, " faults_after_round1=%ld", minor_faults() - flt_first);
    return 0;
}
