/*
 * random_mixed CYCLES WS SEED COUNT
 *
 * Single thread.  A working set of WS slots; each operation picks a random
 * slot: if it holds a block the block is freed, otherwise a block of 16..1040
 * bytes is allocated and written (one byte per 64-byte line plus the last
 * byte).  Stresses the small-object fast paths with a random (non-LIFO)
 * free order and a mixed size-class population.  With COUNT=1 the program
 * keeps a count of its memory as redis does (used_memory): it asks each
 * block's usable size right after its malloc, and before its free, once it has
 * read the block's first byte (a program looks at what it frees).
 */
#include <malloc.h>

#include "common.h"

int main(int argc, char **argv)
{
    bench_init(argc, argv, "random_mixed", "[CYCLES=10000000] [WS=8192] [SEED=42] [COUNT=0]", 4);
    uint64_t cycles = arg_u64(argc, argv, 1, "CYCLES", 10000000, 1, UINT64_MAX / 2);
    uint64_t ws = arg_u64(argc, argv, 2, "WS", 8192, 1, 1ULL << 28);
    uint64_t seed = arg_u64(argc, argv, 3, "SEED", 42, 0, UINT64_MAX);
    uint64_t count = arg_u64(argc, argv, 4, "COUNT", 0, 0, 1);

    void **slot = xcalloc((size_t)ws, sizeof *slot);
    rng_t r;
    rng_seed(&r, seed, 1);

    print_params("cycles=%" PRIu64 " ws=%" PRIu64 " seed=%" PRIu64 " count=%" PRIu64, cycles, ws,
                 seed, count);

    uint64_t allocs = 0;
    size_t used = 0;
    double t0 = now_sec();
    for (uint64_t i = 0; i < cycles; i++) {
        uint64_t x = rng_next(&r);
        size_t idx = (size_t)(((unsigned __int128)x * ws) >> 64);
        if (slot[idx] != NULL) {
            if (count) {
                (void)*(volatile unsigned char *)slot[idx];
                used -= malloc_usable_size(slot[idx]);
            }
            free(slot[idx]);
            slot[idx] = NULL;
        } else {
            size_t sz = 16 + (size_t)((x & 0xffffffffu) % 1025u); /* 16..1040 */
            void *p = xmalloc(sz);
            if (count) used += malloc_usable_size(p);
            touch_lines(p, sz, (unsigned char)i);
            slot[idx] = p;
            allocs++;
        }
    }
    double t1 = now_sec();

    for (uint64_t i = 0; i < ws; i++)
        free(slot[i]);
    free(slot);

    print_result((double)cycles, t1 - t0, " allocs=%" PRIu64 " counted_bytes=%zu", allocs, used);
    return 0;
}
