/*
 * waves ROUNDS MIB PAUSE_MS SEED [MAX]
 *
 * Work that comes in waves with pauses between them, as a server's bursts of requests or a
 * compiler's passes: each round allocates about MIB MiB in blocks of mixed sizes
 * (log-uniform 16 B .. MAX, 1 MiB by default, one byte written per page), frees them in
 * random order and then makes no call for PAUSE_MS milliseconds. A few MiB of long-lived
 * blocks stay throughout.
 * The timed figure is the work alone (the pauses are not counted). An allocator that keeps
 * the free memory through the pauses reuses it without page faults; one that gives it back
 * has the pauses' RSS lower and pays page faults at each wave. Reports the page faults
 * taken after the first round and the RSS at the end of each pause (median), beside the
 * peak.
 */
#include "common.h"

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "waves", "[ROUNDS=20] [MIB=64] [PAUSE_MS=300] [SEED=42] [MAX=1048576]",
               5);
    uint64_t rounds = arg_u64(argc, argv, 1, "ROUNDS", 20, 2, 100000);
    uint64_t mib = arg_u64(argc, argv, 2, "MIB", 64, 1, 1ULL << 20);
    uint64_t pause = arg_u64(argc, argv, 3, "PAUSE_MS", 300, 0, 3600000);
    uint64_t seed = arg_u64(argc, argv, 4, "SEED", 42, 0, UINT64_MAX);
    uint64_t max = arg_u64(argc, argv, 5, "MAX", 1 << 20, 16, 1ULL << 30);
    print_params("rounds=%" PRIu64 " mib=%" PRIu64 " pause_ms=%" PRIu64 " seed=%" PRIu64
                 " max=%" PRIu64,
                 rounds, mib, pause, seed, max);

    rng_t r;
    rng_seed(&r, seed, 1);
    /* The long-lived part: 4 MiB of small blocks. */
    size_t nbase = 4096;
    void **base = xmalloc(nbase * sizeof *base);
    for (size_t i = 0; i < nbase; i++) {
        base[i] = xmalloc(1024);
        touch_pages(base[i], 1024, (unsigned char)i);
    }
    size_t cap = 4096;
    void **blk = xmalloc(cap * sizeof *blk);
    long *idle_rss = xmalloc(rounds * sizeof *idle_rss);
    uint64_t target = mib << 20;
    long flt_first = 0;
    double work = 0;
    size_t blocks = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        double t0 = now_sec();
        size_t n = fill_blocks(&r, &blk, &cap, target, 16, (size_t)max);
        shuffle_ptrs(&r, blk, n);
        for (size_t i = 0; i < n; i++)
            free(blk[i]);
        work += now_sec() - t0;
        blocks += n;
        if (round == 0)
            flt_first = minor_faults();
        sleep_ms(pause);
        idle_rss[round] = current_rss_kb();
    }
    long flt_later = minor_faults() - flt_first;
    qsort(idle_rss, rounds, sizeof *idle_rss, cmp_long);
    long idle_median = idle_rss[rounds / 2];
    for (size_t i = 0; i < nbase; i++)
        free(base[i]);
    free(base);
    free(blk);
    free(idle_rss);
    print_result((double)blocks, work, " faults_after_round1=%ld idle_rss_kb=%ld", flt_later,
                 idle_median);
    return 0;
}
