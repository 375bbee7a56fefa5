/*
 * larson THREADS SECONDS MIN MAX SLOTS ROUND_OPS SEED
 *
 * Larson & Krishnan server simulation.  THREADS lanes run concurrently; each
 * lane owns SLOTS blocks (initially allocated by the main thread).  A lane's
 * thread repeatedly replaces a random slot: free the old block, malloc a new
 * one of MIN..MAX bytes and write it.  After ROUND_OPS replacements the
 * thread creates a successor thread, hands it the lane (the slot array and
 * all live blocks) and exits, so most frees hit blocks allocated by a thread
 * that is gone ("bleeding").  Runs for SECONDS of wall time, then reports the
 * total number of replacements per second.
 *
 * Thread lifetime: each successor joins its predecessor; the last thread of
 * each lane is joined by main.
 */
#include "common.h"
#include <stdatomic.h>

struct lane {
    void **slot;
    size_t nslots;
    rng_t rng;
    uint64_t ops;          /* replacements done in this lane */
    uint64_t generations;  /* threads that have run this lane */
    pthread_t prev;        /* predecessor to join (when join_prev) */
    int join_prev;
    int done;              /* protected by g_mu */
    pthread_t final;       /* protected by g_mu */
};

static size_t g_min, g_max;
static uint64_t g_round_ops;
static atomic_int g_stop;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_lanes_done;

static void *lane_thread(void *arg)
{
    struct lane *L = arg;
    if (L->join_prev)
        xpthread_join(L->prev);
    L->generations++;

    uint64_t done = 0;
    while (done < g_round_ops) {
        /* look at the stop flag every 256 operations */
        uint64_t chunk = g_round_ops - done < 256 ? g_round_ops - done : 256;
        for (uint64_t i = 0; i < chunk; i++) {
            uint64_t x = rng_next(&L->rng);
            size_t idx = (size_t)(((unsigned __int128)x * L->nslots) >> 64);
            size_t sz = g_min + (size_t)((x & 0xffffffffu) % (g_max - g_min + 1));
            free(L->slot[idx]);
            void *p = xmalloc(sz);
            touch_lines(p, sz, (unsigned char)x);
            L->slot[idx] = p;
        }
        done += chunk;
        if (atomic_load_explicit(&g_stop, memory_order_relaxed))
            break;
    }
    L->ops += done;

    if (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        /* hand the lane to a fresh thread; L belongs to it from now on */
        pthread_t t;
        L->prev = pthread_self();
        L->join_prev = 1;
        xpthread_create(&t, lane_thread, L);
        return NULL;
    }

    pthread_mutex_lock(&g_mu);
    L->final = pthread_self();
    L->done = 1;
    g_lanes_done++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init(argc, argv, "larson",
               "[THREADS=2] [SECONDS=5] [MIN=16] [MAX=1024] [SLOTS=1000] "
               "[ROUND_OPS=50000] [SEED=42]", 7);
    uint64_t nthreads = arg_threads(argc, argv, 1);
    double seconds = arg_double(argc, argv, 2, "SECONDS", 5.0, 0.001, 86400.0);
    g_min = (size_t)arg_u64(argc, argv, 3, "MIN", 16, 1, 1ULL << 30);
    g_max = (size_t)arg_u64(argc, argv, 4, "MAX", 1024, 1, 1ULL << 30);
    uint64_t nslots = arg_u64(argc, argv, 5, "SLOTS", 1000, 1, 1ULL << 26);
    g_round_ops = arg_u64(argc, argv, 6, "ROUND_OPS", 50000, 1, UINT64_MAX / 2);
    uint64_t seed = arg_u64(argc, argv, 7, "SEED", 42, 0, UINT64_MAX);
    check_min_max("MIN", g_min, "MAX", g_max);

    print_params("threads=%" PRIu64 " seconds=%g min=%zu max=%zu slots=%" PRIu64
                 " round_ops=%" PRIu64 " seed=%" PRIu64,
                 nthreads, seconds, g_min, g_max, nslots, g_round_ops, seed);

    struct lane *lanes = xcalloc((size_t)nthreads, sizeof *lanes);
    for (uint64_t t = 0; t < nthreads; t++) {
        struct lane *L = &lanes[t];
        L->nslots = (size_t)nslots;
        L->slot = xcalloc(L->nslots, sizeof *L->slot);
        rng_seed(&L->rng, seed, t + 1);
        for (size_t i = 0; i < L->nslots; i++) {
            size_t sz = g_min + (size_t)rng_below(&L->rng, g_max - g_min + 1);
            void *p = xmalloc(sz);
            touch_lines(p, sz, (unsigned char)i);
            L->slot[i] = p;
        }
    }

    double t0 = now_sec();
    for (uint64_t t = 0; t < nthreads; t++) {
        pthread_t tid; /* joined by its successor, or by main via L->final */
        xpthread_create(&tid, lane_thread, &lanes[t]);
    }
    sleep_ms((uint64_t)(seconds * 1000.0 + 0.5));
    atomic_store(&g_stop, 1);

    pthread_mutex_lock(&g_mu);
    while (g_lanes_done < (int)nthreads)
        pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    double t1 = now_sec();

    uint64_t ops = 0, gens = 0;
    for (uint64_t t = 0; t < nthreads; t++) {
        struct lane *L = &lanes[t];
        pthread_mutex_lock(&g_mu);
        pthread_t fin = L->final;
        pthread_mutex_unlock(&g_mu);
        xpthread_join(fin);
        ops += L->ops;
        gens += L->generations;
        for (size_t i = 0; i < L->nslots; i++)
            free(L->slot[i]);
        free(L->slot);
    }
    free(lanes);

    print_result((double)ops, t1 - t0, " ops=%" PRIu64 " threads_created=%" PRIu64,
                 ops, gens);
    return 0;
}
