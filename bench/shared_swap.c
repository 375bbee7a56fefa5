/*
 * shared_swap THREADS N SLOTS BIG_PCT BIG_MAX SEED [MID_PCT]
 *
 * Threads that share one table of live blocks.  Each step, a thread picks a
 * random slot, allocates a new block, writes it, swaps it into the slot with
 * an atomic exchange and frees whatever block the slot held before, after
 * checking its contents.  The old block was allocated by any of the threads,
 * so with T threads about (T-1)/T of all frees are of another thread's blocks:
 * the pattern of a server whose worker threads replace entries of a shared
 * cache.  Sizes: 16..128 bytes, except BIG_PCT percent of 128..BIG_MAX bytes
 * (log-uniform) and MID_PCT percent (default 0) of 129..2048 bytes (log-uniform): with
 * MID_PCT 25 the live blocks span several times more slabs than a thread's table of them
 * holds, as in a server whose cache entries are mostly small strings and records.  N steps in total, split between the threads.  Reports steps
 * per second; the table is freed at the end.
 */
#include "common.h"
#include <stdatomic.h>

struct block_head {
    uint64_t tag;  /* the slot and step that made the block, checked on free */
};

static _Atomic(struct block_head *) *g_slot;
static uint64_t g_slots, g_steps, g_big_pct, g_big_max, g_seed, g_mid_pct;

static size_t pick_size(rng_t *r)
{
    uint64_t u = rng_below(r, 100);
    if (u < g_big_pct)
        return (size_t)rng_log_range(r, 129, g_big_max);
    if (u < g_big_pct + g_mid_pct)
        return (size_t)rng_log_range(r, 129, 2048);
    return (size_t)rng_range(r, 16, 128);
}

static void check_and_free(struct block_head *b, uint64_t slot)
{
    if (b == NULL)
        return;
    if ((b->tag & 0xffffffffu) != slot)
        die("slot %" PRIu64 " holds a block tagged for slot %" PRIu64 " (corrupted)",
            slot, b->tag & 0xffffffffu);
    free(b);
}

static void *run(void *arg)
{
    struct split_worker *w = arg;
    rng_t r;
    rng_seed(&r, g_seed, w->index + 1);
    for (uint64_t i = 0; i < w->steps; i++) {
        uint64_t slot = rng_below(&r, g_slots);
        size_t sz = pick_size(&r);
        struct block_head *b = xmalloc(sz);
        b->tag = slot | (i << 32);
        ((unsigned char *)b)[sz - 1] = (unsigned char)i;
        check_and_free(atomic_exchange_explicit(&g_slot[slot], b, memory_order_acq_rel), slot);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "shared_swap",
               "[THREADS=2] [N=10000000] [SLOTS=100000] [BIG_PCT=5] [BIG_MAX=16384] [SEED=42] "
               "[MID_PCT=0]", 7);
    uint64_t nthreads = arg_threads(argc, argv, 1);
    g_steps = arg_u64(argc, argv, 2, "N", 10000000, 1, UINT64_MAX / 2);
    g_slots = arg_u64(argc, argv, 3, "SLOTS", 100000, 1, 1ULL << 32);
    g_big_pct = arg_u64(argc, argv, 4, "BIG_PCT", 5, 0, 100);
    g_big_max = arg_u64(argc, argv, 5, "BIG_MAX", 16384, 129, 1ULL << 30);
    g_seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    g_mid_pct = arg_u64(argc, argv, 7, "MID_PCT", 0, 0, 100 - g_big_pct);
    print_params("threads=%" PRIu64 " n=%" PRIu64 " slots=%" PRIu64 " big_pct=%" PRIu64
                 " big_max=%" PRIu64 " seed=%" PRIu64 " mid_pct=%" PRIu64,
                 nthreads, g_steps, g_slots, g_big_pct, g_big_max, g_seed, g_mid_pct);

    g_slot = xcalloc((size_t)g_slots, sizeof *g_slot);
    double secs = run_split(nthreads, g_steps, run);

    for (uint64_t s = 0; s < g_slots; s++)
        check_and_free(atomic_load_explicit(&g_slot[s], memory_order_relaxed), s);
    free(g_slot);
    print_result((double)g_steps, secs, NULL);
    return 0;
}
