/*
 * burst MIB SLEEP_MS SEED
 *
 * Memory return.  Allocates about MIB MiB in blocks of mixed sizes
 * (log-uniform 16 B .. 256 KiB), writing one byte per page so that the
 * memory is really resident, then frees everything in random order, waits
 * SLEEP_MS milliseconds, performs a few small malloc/free calls (allocators
 * that purge lazily do it on their next call) and measures the resident set
 * again.  Reports the time for the allocate+free phase, the RSS at the peak
 * and the RSS after the free: does the memory go back to the system?
 */
#include "common.h"

int main(int argc, char **argv)
{
    bench_init(argc, argv, "burst", "[MIB=1024] [SLEEP_MS=500] [SEED=42]", 3);
    uint64_t mib = arg_u64(argc, argv, 1, "MIB", 1024, 1, 1ULL << 20);
    uint64_t sleep = arg_u64(argc, argv, 2, "SLEEP_MS", 500, 0, 3600000);
    uint64_t seed = arg_u64(argc, argv, 3, "SEED", 42, 0, UINT64_MAX);

    print_params("mib=%" PRIu64 " sleep_ms=%" PRIu64 " seed=%" PRIu64, mib, sleep, seed);

    rng_t r;
    rng_seed(&r, seed, 1);
    long rss_start = current_rss_kb();
    size_t cap = 4096;
    void **blk = xmalloc(cap * sizeof *blk);

    double t0 = now_sec();
    size_t n = fill_blocks(&r, &blk, &cap, mib << 20, 16, 256 * 1024);
    double t1 = now_sec();
    long rss_peak = current_rss_kb();

    /* free in a random (but deterministic) order */
    shuffle_ptrs(&r, blk, n);
    double t2 = now_sec();
    for (size_t i = 0; i < n; i++)
        free(blk[i]);
    double t3 = now_sec();
    free(blk);

    long rss_freed = current_rss_kb();
    sleep_ms(sleep);
    for (int i = 0; i < 100; i++) {
        void *p = xmalloc(64);
        escape(p);
        free(p);
    }
    long rss_after = current_rss_kb();

    print_result(NO_OPS, (t1 - t0) + (t3 - t2),
                 " blocks=%zu alloc_seconds=%.4f free_seconds=%.4f"
                 " rss_start_kb=%ld rss_peak_kb=%ld rss_freed_kb=%ld rss_after_free_kb=%ld",
                 n, t1 - t0, t3 - t2, rss_start, rss_peak, rss_freed, rss_after);
    return 0;
}
