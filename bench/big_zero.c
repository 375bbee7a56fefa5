/*
 * big_zero N MIN_MIB MAX_MIB SEED
 *
 * Big short-lived buffers.  N times: malloc a block of MIN_MIB..MAX_MIB MiB
 * (uniform, page-granular), zero all of it with memset (the program's own
 * work, as a decoder or a matrix code would), read a byte back and free it.
 * An allocator that returns each block to the OS at once pays the page
 * faults of every byte on every iteration; one that keeps freed memory for
 * the next request pays only the memset.  Reports seconds for the loop.
 */
#include "common.h"

int main(int argc, char **argv)
{
    bench_init(argc, argv, "big_zero", "[N=300] [MIN_MIB=5] [MAX_MIB=25] [SEED=42]", 4);
    uint64_t n = arg_u64(argc, argv, 1, "N", 300, 1, UINT64_MAX / 2);
    uint64_t min_mib = arg_u64(argc, argv, 2, "MIN_MIB", 5, 1, 1ULL << 20);
    uint64_t max_mib = arg_u64(argc, argv, 3, "MAX_MIB", 25, 1, 1ULL << 20);
    uint64_t seed = arg_u64(argc, argv, 4, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN_MIB", min_mib, "MAX_MIB", max_mib);

    print_params("n=%" PRIu64 " min_mib=%" PRIu64 " max_mib=%" PRIu64 " seed=%" PRIu64,
                 n, min_mib, max_mib, seed);

    rng_t r;
    rng_seed(&r, seed, 1);
    uint64_t check = 0, bytes = 0;
    double t0 = now_sec();
    for (uint64_t i = 0; i < n; i++) {
        size_t pages = (size_t)rng_range(&r, min_mib << 8, max_mib << 8);
        size_t sz = pages * 4096;
        unsigned char *p = xmalloc(sz);
        escape(p); /* keep malloc+memset from being fused into calloc */
        memset(p, 0, sz);
        escape(p);
        check += p[rng_below(&r, sz)];
        free(p);
        bytes += sz;
    }
    double t1 = now_sec();
    if (check != 0)
        die("a zeroed block read back non-zero");

    print_result(NO_OPS, t1 - t0, " blocks=%" PRIu64 " mib_zeroed=%.0f", n,
                 (double)bytes / 1048576.0);
    return 0;
}
