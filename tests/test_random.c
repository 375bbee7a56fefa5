/* Randomized operation sequences against a shadow model: every live block keeps the contents
 * written into it (checked on every free and realloc), no two live blocks overlap, and in the
 * threaded run blocks move between threads and are freed wherever they land. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "hakmem.h"

struct rng { uint64_t s; };
static uint64_t next(struct rng *r) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

/* Mostly small sizes, some mid, a few large ones. */
static size_t pick_size(struct rng *r) {
    unsigned k = (unsigned)(next(r) % 100);
    if (k < 60) return 1 + next(r) % 256;
    if (k < 88) return 257 + next(r) % 4000;
    if (k < 98) return 4257 + next(r) % 40000;
    return 44257 + next(r) % 400000;
}

static void fill(unsigned char *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 131);
}
static size_t bad_bytes(const unsigned char *p, size_t n, uint32_t seed) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += p[i] != (unsigned char)(seed + i * 131);
    return bad;
}

/* Operation counts are scaled by argv[1] (percent, default 100): the sanitizer builds run a
 * tenth of the work. */
static unsigned scale_pct = 100;
static unsigned scaled(unsigned n) { return (unsigned)((unsigned long)n * scale_pct / 100); }

#define SLOTS 2048
struct slot { unsigned char *p; size_t n; uint32_t seed; };

static int cmp_slot(const void *a, const void *b) {
    const struct slot *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

static int no_overlap(const struct slot *s) {
    static struct slot sorted[SLOTS];
    unsigned k = 0;
    for (unsigned i = 0; i < SLOTS; i++)
        if (s[i].p) sorted[k++] = s[i];
    qsort(sorted, k, sizeof *sorted, cmp_slot);
    for (unsigned i = 1; i < k; i++)
        if (sorted[i - 1].p + sorted[i - 1].n > sorted[i].p) return 0;
    return 1;
}

TEST(single_thread_shadow_model) {
    static struct slot s[SLOTS];
    struct rng r = {0x9e3779b97f4a7c15ull};
    size_t corrupt = 0, failed = 0, overlaps = 0;
    for (unsigned op = 0, n = scaled(300000); op < n; op++) {
        struct slot *x = &s[next(&r) % SLOTS];
        unsigned kind = (unsigned)(next(&r) % 10);
        if (x->p) {
            corrupt += bad_bytes(x->p, x->n, x->seed);
            if (kind < 3) { /* realloc: the common prefix survives */
                size_t n = pick_size(&r);
                unsigned char *q = hak_realloc(x->p, n);
                if (!q) { failed++; continue; }
                corrupt += bad_bytes(q, n < x->n ? n : x->n, x->seed);
                x->p = q;
                x->n = n;
                fill(q, n, x->seed);
            } else {
                hak_free(x->p);
                x->p = NULL;
            }
        } else {
            size_t n = pick_size(&r);
            unsigned char *p;
            if (kind < 2) {
                p = hak_calloc(1, n);
                if (p) for (size_t i = 0; i < n; i++) corrupt += p[i] != 0;
            } else if (kind < 3) {
                size_t a = (size_t)16 << (next(&r) % 9);
                p = hak_aligned_alloc(a, n);
                if (p && ((uintptr_t)p & (a - 1))) corrupt++;
            } else {
                p = hak_malloc(n);
            }
            if (!p) { failed++; continue; }
            x->p = p;
            x->n = n;
            x->seed = (uint32_t)next(&r);
            fill(p, n, x->seed);
        }
        if (op % 20000 == 0 && !no_overlap(s)) overlaps++;
    }
    CHECKF(corrupt == 0, "%zu corrupted bytes", corrupt);
    CHECK(failed == 0);
    CHECK(overlaps == 0);
    CHECK(no_overlap(s));
    for (unsigned i = 0; i < SLOTS; i++) hak_free(s[i].p), s[i].p = NULL;
}

/* Threaded: a shared array of blocks; a thread takes a slot's block (atomically), checks and
 * frees it (often a remote free), or allocates a new one and publishes it. The block carries
 * its own size and seed in its first 16 bytes. */
#define TSLOTS 4096
static _Atomic(unsigned char *) shared[TSLOTS];
static _Atomic size_t t_corrupt, t_failed;

static void *worker(void *arg) {
    struct rng r = {(uint64_t)(uintptr_t)arg * 0x2545f4914f6cdd1dull + 1};
    for (unsigned op = 0, n = scaled(200000); op < n; op++) {
        unsigned i = (unsigned)(next(&r) % TSLOTS);
        unsigned char *p = atomic_exchange(&shared[i], NULL);
        if (p) {
            size_t n;
            uint32_t seed;
            memcpy(&n, p, sizeof n);
            memcpy(&seed, p + 8, sizeof seed);
            if (n < 16 || n > 500000) t_corrupt++;
            else atomic_fetch_add(&t_corrupt, bad_bytes(p + 16, n - 16, seed));
            hak_free(p);
        } else {
            size_t n = 16 + pick_size(&r);
            p = hak_malloc(n);
            if (!p) { t_failed++; continue; }
            uint32_t seed = (uint32_t)next(&r);
            memcpy(p, &n, sizeof n);
            memcpy(p + 8, &seed, sizeof seed);
            fill(p + 16, n - 16, seed);
            unsigned char *old = atomic_exchange(&shared[i], p);
            if (old) hak_free(old); /* raced with another publisher: drop theirs unchecked */
        }
    }
    return NULL;
}

TEST(threads_shadow_model) {
    enum { NT = 4 };
    pthread_t th[NT];
    for (uintptr_t t = 0; t < NT; t++) CHECK(pthread_create(&th[t], NULL, worker, (void *)(t + 1)) == 0);
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    CHECKF(t_corrupt == 0, "%zu corrupted bytes", (size_t)t_corrupt);
    CHECK(t_failed == 0);
    for (unsigned i = 0; i < TSLOTS; i++) hak_free(atomic_exchange(&shared[i], NULL));
}

int main(int argc, char **argv) {
    if (argc > 1) scale_pct = (unsigned)atoi(argv[1]);
    if (scale_pct == 0 || scale_pct > 10000) scale_pct = 100;
    TEST_MAIN_BEGIN("random");
    RUN(single_thread_shadow_model);
    RUN(threads_shadow_model);
    TEST_MAIN_END();
}
