/*
 * large_swap THREADS N SLOTS MIN_KB MAX_KB SEED
 *
 * Threads that share one table of large blocks, as server threads share
 * big buffers (a response being built, a decompressed object) and release
 * each other's.  Each step, a thread picks a random slot, allocates a block
 * of MIN_KB..MAX_KB KiB (log-uniform; default 1..4 MiB), writes its first
 * and last bytes (a page or two, not the whole block: the allocator's own
 * work dominates, not page faults), swaps it into the slot with an atomic
 * exchange and frees the block the slot held, after checking it.  With T
 * threads about (T-1)/T of the frees are of another thread's block, and all
 * threads allocate big blocks at once: where one lock guards every big
 * block, they queue on it.  N steps in total, split between the threads.
 * Reports steps per second.
 */
#include "common.h"
#include <stdatomic.h>

struct big_head {
    uint64_t size;
    uint64_t tag;
};

static _Atomic(struct big_head *) *g_slot;
static uint64_t g_slots, g_steps, g_min, g_max, g_seed;

static void check_and_free(struct big_head *b, uint64_t slot)
{
    if (b == NULL)
        return;
    unsigned char last = ((unsigned char *)b)[b->size - 1];
    if ((b->tag & 0xffffffffu) != slot || last != (unsigned char)(b->tag >> 32))
        die("slot %" PRIu64 " holds a damaged block (tag %" PRIx64 ", size %" PRIu64 ")", slot,
            b->tag, b->size);
    free(b);
}

static void *run(void *arg)
{
    struct split_worker *w = arg;
    rng_t r;
    rng_seed(&r, g_seed, w->index + 1);
    for (uint64_t i = 0; i < w->steps; i++) {
        uint64_t slot = rng_below(&r, g_slots);
        size_t sz = (size_t)rng_log_range(&r, g_min, g_max);
        struct big_head *b = xmalloc(sz);
        b->size = sz;
        b->tag = slot | (i << 32);
        ((unsigned char *)b)[sz - 1] = (unsigned char)i;
        check_and_free(atomic_exchange_explicit(&g_slot[slot], b, memory_order_acq_rel), slot);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "large_swap",
               "[THREADS=2] [N=200000] [SLOTS=64] [MIN_KB=1024] [MAX_KB=4096] [SEED=42]", 6);
    uint64_t nthreads = arg_threads(argc, argv, 1);
    g_steps = arg_u64(argc, argv, 2, "N", 200000, 1, UINT64_MAX / 2);
    g_slots = arg_u64(argc, argv, 3, "SLOTS", 64, 1, 1ULL << 24);
    uint64_t min_kb = arg_u64(argc, argv, 4, "MIN_KB", 1024, 1, 1ULL << 24);
    uint64_t max_kb = arg_u64(argc, argv, 5, "MAX_KB", 4096, 1, 1ULL << 24);
    g_seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN_KB", min_kb, "MAX_KB", max_kb);
    g_min = min_kb << 10;
    g_max = max_kb << 10;
    print_params("threads=%" PRIu64 " n=%" PRIu64 " slots=%" PRIu64 " min_kb=%" PRIu64
                 " max_kb=%" PRIu64 " seed=%" PRIu64,
                 nthreads, g_steps, g_slots, min_kb, max_kb, g_seed);

    g_slot = xcalloc((size_t)g_slots, sizeof *g_slot);
    double secs = run_split(nthreads, g_steps, run);

    for (uint64_t s = 0; s < g_slots; s++)
        check_and_free(atomic_load_explicit(&g_slot[s], memory_order_relaxed), s);
    free(g_slot);
    print_result((double)g_steps, secs, NULL);
    return 0;
}
