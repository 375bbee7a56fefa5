/*
 * large N MIN_KB MAX_KB LIVE SEED [TOUCH] [CALLOC]
 *
 * Large blocks.  N times: pick a size log-uniformly between MIN_KB and
 * MAX_KB KiB (default 64 KiB .. 32 MiB), malloc it, write one byte per page
 * (so every page is faulted in) and put it in a ring of LIVE slots, freeing
 * the block that was there.  Stresses the large/mmap path: page faults,
 * mmap/munmap traffic, and caching of large spans (faster when the
 * allocator keeps them, at the price of RSS).  With TOUCH=0 the program
 * writes nothing: buffers reserved at their largest and used in part, or
 * not at all (mimalloc-bench's malloc-large: 5..25 MiB blocks, never
 * written), where what counts is whether the allocator itself touches the
 * pages it hands out.  With CALLOC=1 the blocks come from calloc: zeroed
 * without touching pages the program never wrote, or not.  Reports
 * allocations per second.
 */
#include "common.h"

int main(int argc, char **argv)
{
    bench_init(argc, argv, "large",
               "[N=2000] [MIN_KB=64] [MAX_KB=32768] [LIVE=4] [SEED=42] [TOUCH=1] [CALLOC=0]", 7);
    uint64_t n = arg_u64(argc, argv, 1, "N", 2000, 1, UINT64_MAX / 2);
    uint64_t min_kb = arg_u64(argc, argv, 2, "MIN_KB", 64, 1, 1ULL << 24);
    uint64_t max_kb = arg_u64(argc, argv, 3, "MAX_KB", 32768, 1, 1ULL << 24);
    uint64_t live = arg_u64(argc, argv, 4, "LIVE", 4, 1, 1ULL << 20);
    uint64_t seed = arg_u64(argc, argv, 5, "SEED", 42, 0, UINT64_MAX);
    uint64_t touch = arg_u64(argc, argv, 6, "TOUCH", 1, 0, 1);
    uint64_t zeroed = arg_u64(argc, argv, 7, "CALLOC", 0, 0, 1);
    check_min_max("MIN_KB", min_kb, "MAX_KB", max_kb);

    print_params("n=%" PRIu64 " min_kb=%" PRIu64 " max_kb=%" PRIu64 " live=%" PRIu64
                 " seed=%" PRIu64 " touch=%" PRIu64 " calloc=%" PRIu64,
                 n, min_kb, max_kb, live, seed, touch, zeroed);

    rng_t r;
    rng_seed(&r, seed, 1);
    void **ring = xcalloc((size_t)live, sizeof *ring);
    uint64_t bytes = 0;
    double t0 = now_sec();
    for (uint64_t i = 0; i < n; i++) {
        size_t sz = (size_t)rng_log_range(&r, min_kb * 1024, max_kb * 1024);
        void *p = zeroed ? xcalloc(1, sz) : xmalloc(sz);
        if (touch)
            touch_pages(p, sz, (unsigned char)i);
        size_t k = (size_t)(i % live);
        free(ring[k]);
        ring[k] = p;
        bytes += sz;
    }
    double t1 = now_sec();
    for (uint64_t k = 0; k < live; k++)
        free(ring[k]);
    free(ring);

    print_result((double)n, t1 - t0, " mib_allocated=%.1f", (double)bytes / 1048576.0);
    return 0;
}
