/*
 * tight SIZE N
 *
 * Single thread: malloc(SIZE) immediately followed by free, N times.  The
 * pointer is passed to an empty asm statement with a memory clobber so the
 * compiler cannot elide the pair.  Measures the bare fast-path cost of one
 * malloc+free pair (this is also the program used for the callgrind
 * instruction count).
 */
#include "common.h"

int main(int argc, char **argv)
{
    bench_init(argc, argv, "tight", "[SIZE=32] [N=50000000]", 2);
    uint64_t size = arg_u64(argc, argv, 1, "SIZE", 32, 1, 1ULL << 40);
    uint64_t n = arg_u64(argc, argv, 2, "N", 50000000, 1, UINT64_MAX / 2);

    print_params("size=%" PRIu64 " n=%" PRIu64, size, n);

    double t0 = now_sec();
    for (uint64_t i = 0; i < n; i++) {
        void *p = malloc((size_t)size);
        if (__builtin_expect(p == NULL, 0))
            die("malloc(%" PRIu64 ") returned NULL", size);
        escape(p);
        free(p);
    }
    double t1 = now_sec();
    double secs = t1 - t0;
    print_result((double)n, secs, " ns_per_pair=%.2f", secs * 1e9 / (double)n);
    return 0;
}
