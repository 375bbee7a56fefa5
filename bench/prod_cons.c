/*
 * prod_cons THREADS N MIN MAX RING SEED
 *
 * Producer/consumer: THREADS/2 pairs (at least one).  In each pair the
 * producer mallocs blocks of MIN..MAX bytes, writes a sequence number into
 * them and pushes the pointers through a bounded single-producer /
 * single-consumer ring of RING slots; the consumer pops, checks the sequence
 * number and frees.  Every free is therefore a remote free, and the
 * producer's thread never sees its blocks again.  N blocks in total are
 * passed (split evenly between the pairs).  Reports blocks per second.
 */
#include "common.h"
#include <sched.h>
#include <stdatomic.h>

struct ring {
    _Alignas(64) atomic_size_t head;   /* written by the producer */
    _Alignas(64) atomic_size_t tail;   /* written by the consumer */
    _Alignas(64) void **slot;
    size_t mask;
    uint64_t count;                    /* blocks to pass */
    uint64_t seed;
    uint64_t index;
};

static size_t g_min, g_max;

static inline void backoff(unsigned *spins)
{
    if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

static void *producer(void *arg)
{
    struct ring *R = arg;
    rng_t r;
    rng_seed(&r, R->seed, R->index + 1);
    size_t head = 0;
    size_t tail_cache = 0;
    size_t cap = R->mask + 1;
    for (uint64_t i = 0; i < R->count; i++) {
        size_t sz = (size_t)rng_range(&r, g_min, g_max);
        unsigned char *p = xmalloc(sz);
        uint64_t seq = i;
        memcpy(p, &seq, sizeof seq);
        if (sz > sizeof seq) /* the last byte too, where it is not the number's */
            p[sz - 1] = (unsigned char)(i | 1);
        unsigned spins = 0;
        while (head - tail_cache >= cap) {
            tail_cache = atomic_load_explicit(&R->tail, memory_order_acquire);
            if (head - tail_cache >= cap)
                backoff(&spins);
        }
        R->slot[head & R->mask] = p;
        head++;
        atomic_store_explicit(&R->head, head, memory_order_release);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    struct ring *R = arg;
    size_t tail = 0;
    size_t head_cache = 0;
    for (uint64_t i = 0; i < R->count; i++) {
        unsigned spins = 0;
        while (tail == head_cache) {
            head_cache = atomic_load_explicit(&R->head, memory_order_acquire);
            if (tail == head_cache)
                backoff(&spins);
        }
        unsigned char *p = R->slot[tail & R->mask];
        uint64_t seq;
        memcpy(&seq, p, sizeof seq);
        if (seq != i)
            die("ring %" PRIu64 ": block %" PRIu64 " holds %" PRIu64 " (corrupted)",
                R->index, i, seq);
        free(p);
        tail++;
        atomic_store_explicit(&R->tail, tail, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "prod_cons",
               "[THREADS=2] [N=10000000] [MIN=16] [MAX=256] [RING=1024] [SEED=42]\n"
               "  THREADS/2 producer/consumer pairs run (at least one pair)", 6);
    uint64_t nthreads = arg_threads(argc, argv, 1);
    uint64_t n = arg_u64(argc, argv, 2, "N", 10000000, 1, UINT64_MAX / 2);
    g_min = (size_t)arg_u64(argc, argv, 3, "MIN", 16, 8, 1ULL << 30);
    g_max = (size_t)arg_u64(argc, argv, 4, "MAX", 256, 8, 1ULL << 30);
    uint64_t ring = arg_u64(argc, argv, 5, "RING", 1024, 1, 1ULL << 24);
    uint64_t seed = arg_u64(argc, argv, 6, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN", g_min, "MAX", g_max);
    if ((ring & (ring - 1)) != 0)
        usage_exit(2, "RING (%" PRIu64 ") must be a power of two", ring);
    uint64_t pairs = nthreads / 2 ? nthreads / 2 : 1;

    print_params("threads=%" PRIu64 " pairs=%" PRIu64 " n=%" PRIu64
                 " min=%zu max=%zu ring=%" PRIu64 " seed=%" PRIu64,
                 nthreads, pairs, n, g_min, g_max, ring, seed);

    struct ring *rings = aligned_alloc(64, (size_t)pairs * sizeof *rings);
    if (rings == NULL)
        die("aligned_alloc(64, %zu) returned NULL", (size_t)pairs * sizeof *rings);
    pthread_t *tid = xcalloc((size_t)pairs * 2, sizeof *tid);
    uint64_t total = 0;
    for (uint64_t i = 0; i < pairs; i++) {
        struct ring *R = &rings[i];
        atomic_init(&R->head, 0);
        atomic_init(&R->tail, 0);
        R->slot = xcalloc((size_t)ring, sizeof *R->slot);
        R->mask = (size_t)ring - 1;
        R->count = n / pairs + (i < n % pairs ? 1 : 0);
        R->seed = seed;
        R->index = i;
        total += R->count;
    }

    double t0 = now_sec();
    for (uint64_t i = 0; i < pairs; i++) {
        xpthread_create(&tid[2 * i], consumer, &rings[i]);
        xpthread_create(&tid[2 * i + 1], producer, &rings[i]);
    }
    xpthread_join_all(tid, 2 * pairs);
    double t1 = now_sec();

    for (uint64_t i = 0; i < pairs; i++)
        free(rings[i].slot);
    free(rings);
    free(tid);

    print_result((double)total, t1 - t0, " blocks=%" PRIu64, total);
    return 0;
}
