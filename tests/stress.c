/* stress [SECONDS=60] [THREADS=4] [SEED=1] [STEPS=22000]: many threads for a set time doing
 * everything a program does to an allocator at once, with every block's contents checked.
 *
 * Workers come and go: each runs a random number of steps (STEPS/11 to STEPS) and exits, and
 * the main thread starts another in its place until the time is up (a small STEPS: threads
 * that exit and hand their heaps over many times a second). A step allocates a block of a
 * random size in any tier (small, mid, large, aligned up to 2 MiB, calloc), fills it, and
 * either swaps it into a shared table, freeing the block it displaces (usually another
 * thread's, often one whose thread has exited: remote and orphan frees), or keeps it in the
 * worker's own set, where it is later grown or shrunk with realloc or freed. Every block starts
 * with its size and a tag from which each of its bytes follows; each is checked in full
 * (sparsely above 64 KiB) before it is freed or after it is moved, so a block handed out twice,
 * damaged or not copied right is found. At the end the table is emptied and hakmem must hold
 * exactly what it held at the start: no live large block, and as many active slabs as before
 * (a single leaked block would keep its slab). Links against build/libhakmem.a: the standard
 * names, and glibc's own allocations, are hakmem's. Prints PASS/FAIL lines for tests/run.sh. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hakmem.h"

#define SLOTS 4096 /* shared table */
#define OWN 64     /* a worker's own blocks */
#define MAX_WORKERS 64

struct hdr {
    size_t size;
    uint64_t tag;
};

static _Atomic(struct hdr *) table[SLOTS];
static _Atomic uint64_t steps_done, bytes_done, errors;
static _Atomic int stop;
static uint64_t seed0, max_steps = 22000;

static double now_sec(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static void fail(const char *what, const struct hdr *h) {
    if (atomic_fetch_add(&errors, 1) < 10)
        printf("  stress: %s (block %p, size %zu, tag %llx)\n", what, (const void *)h,
               h ? h->size : 0, h ? (unsigned long long)h->tag : 0ull);
}

static inline unsigned char byte_at(uint64_t tag, size_t i) {
    return (unsigned char)((tag >> ((i & 7) * 8)) ^ (i >> 3));
}

/* The bytes of a block of n bytes that carry its pattern: all of the first 4 KiB, then one
 * byte in 64 up to 64 KiB, one per page beyond (at fixed offsets), and the last 64. Written
 * for the block's size n; checked below `limit` (a realloc keeps only a prefix). */
static int pattern(struct hdr *h, size_t n, int write, size_t limit) {
    unsigned char *c = (unsigned char *)h;
    for (size_t i = sizeof *h; i < n && i < limit; i += i < 4096 ? 1 : i < 65536 ? 64 : 4096) {
        if (write) c[i] = byte_at(h->tag, i);
        else if (c[i] != byte_at(h->tag, i)) return 0;
    }
    for (size_t i = n > 64 + sizeof *h ? n - 64 : sizeof *h; i < n && i < limit; i++) {
        if (write) c[i] = byte_at(h->tag, i);
        else if (c[i] != byte_at(h->tag, i)) return 0;
    }
    return 1;
}

static void fill(struct hdr *h) { pattern(h, h->size, 1, h->size); }
static void check(struct hdr *h, size_t limit, const char *what) {
    if (!pattern(h, h->size, 0, limit)) fail(what, h);
}

static size_t pick_size(uint64_t *s) {
    uint64_t u = rnd(s) % 1000;
    size_t lo, hi;
    if (u < 700) lo = 16, hi = 1024;
    else if (u < 900) lo = 1025, hi = 32768;
    else if (u < 985) lo = 32769, hi = 1 << 20;
    else lo = (1 << 20) + 1, hi = 6 << 20;
    return lo + rnd(s) % (hi - lo + 1);
}

static struct hdr *make(uint64_t *s) {
    size_t n = pick_size(s);
    uint64_t how = rnd(s) % 100;
    struct hdr *h;
    if (how < 80) {
        h = malloc(n);
    } else if (how < 88) {
        h = calloc(1, n);
        if (h) {
            const unsigned char *c = (const unsigned char *)h;
            for (size_t i = 0; i < n; i += i < 4096 ? 1 : 4096)
                if (c[i]) {
                    fail("calloc block not zero", NULL);
                    break;
                }
        }
    } else {
        size_t align = (size_t)32 << (rnd(s) % 17); /* 32 B .. 2 MiB */
        if (how < 94) {
            h = aligned_alloc(align, n);
        } else {
            void *p = NULL;
            h = posix_memalign(&p, align, n) == 0 ? p : NULL;
        }
        if (h && ((uintptr_t)h & (align - 1))) fail("misaligned block", h);
    }
    if (!h) {
        fail("allocation failed", NULL);
        return NULL;
    }
    if (malloc_usable_size(h) < n) fail("usable size below the request", h);
    h->size = n;
    h->tag = rnd(s) | 1;
    fill(h);
    atomic_fetch_add_explicit(&bytes_done, n, memory_order_relaxed);
    return h;
}

static void check_free(struct hdr *h) {
    if (!h) return;
    check(h, h->size, "a byte changed");
    h->tag = 0; /* a block freed twice, or handed out twice, shows as tag 0 */
    free(h);
}

/* Grows or shrinks a block with realloc; the common prefix must survive. */
static struct hdr *resize(struct hdr *h, uint64_t *s) {
    size_t n = pick_size(s);
    if (n > (2 << 20) && rnd(s) % 4) n = 1000 + rnd(s) % 100000; /* keep big moves rare */
    size_t old = h->size;
    uint64_t tag = h->tag;
    struct hdr *q = realloc(h, n);
    if (!q) {
        fail("realloc failed", h);
        return h;
    }
    if (q->tag != tag || q->size != old) fail("realloc lost the header", q);
    check(q, old < n ? old : n, "realloc lost a byte of the kept prefix");
    q->size = n;
    fill(q);
    return q;
}

static void *worker(void *arg) {
    uint64_t s = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull ^ seed0;
    struct hdr *own[OWN] = {0};
    uint64_t steps = max_steps / 11 + rnd(&s) % (max_steps - max_steps / 11), done = 0;
    for (; done < steps && !atomic_load_explicit(&stop, memory_order_relaxed); done++) {
        uint64_t u = rnd(&s) % 100;
        if (u < 45) {
            struct hdr *h = make(&s);
            if (h) check_free(atomic_exchange(&table[rnd(&s) % SLOTS], h));
        } else if (u < 75) {
            unsigned i = (unsigned)(rnd(&s) % OWN);
            check_free(own[i]);
            own[i] = make(&s);
        } else if (u < 95) {
            unsigned i = (unsigned)(rnd(&s) % OWN);
            if (own[i]) own[i] = resize(own[i], &s);
        } else {
            /* hand a block of the worker's own to the table: it outlives the worker */
            unsigned i = (unsigned)(rnd(&s) % OWN);
            if (own[i]) check_free(atomic_exchange(&table[rnd(&s) % SLOTS], own[i]));
            own[i] = NULL;
        }
    }
    for (unsigned i = 0; i < OWN; i++) check_free(own[i]);
    atomic_fetch_add(&steps_done, done);
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 60;
    int nthreads = argc > 2 ? atoi(argv[2]) : 4;
    seed0 = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    max_steps = argc > 4 ? strtoull(argv[4], NULL, 10) : max_steps;
    if (seconds <= 0 || nthreads < 1 || nthreads > MAX_WORKERS || max_steps < 11) {
        fprintf(stderr, "usage: stress [SECONDS>0] [THREADS 1..%d] [SEED] [STEPS>=11]\n",
                MAX_WORKERS);
        return 2;
    }
    /* One worker first, so that the main thread's own slabs (glibc allocates on it for
     * every pthread_create) exist before the starting figures are taken. */
    pthread_t warm;
    pthread_create(&warm, NULL, worker, (void *)(uintptr_t)1000);
    pthread_join(warm, NULL);
    for (unsigned i = 0; i < SLOTS; i++) check_free(atomic_exchange(&table[i], NULL));
    hak_trim();
    struct hak_stats st0, st1;
    hak_stats_get(&st0);

    pthread_t t[MAX_WORKERS];
    int alive[MAX_WORKERS];
    uint64_t started = 0;
    double t0 = now_sec(), end = t0 + seconds;
    for (int i = 0; i < nthreads; i++) {
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)++started);
        alive[i] = 1;
    }
    /* Replace workers as they finish, round robin, until the time is up. */
    for (int i = 0; now_sec() < end; i = (i + 1) % nthreads) {
        pthread_join(t[i], NULL);
        alive[i] = now_sec() < end;
        if (alive[i]) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)++started);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads; i++)
        if (alive[i]) pthread_join(t[i], NULL);
    for (unsigned i = 0; i < SLOTS; i++) check_free(atomic_exchange(&table[i], NULL));
    double t1 = now_sec();
    hak_trim();
    hak_stats_get(&st1);

    printf("stress: %.1f s, %d threads at a time, %llu threads in all, %llu steps, %.1f GB "
           "requested, %llu remote frees, %llu slabs abandoned, %llu adopted\n",
           t1 - t0, nthreads, (unsigned long long)started + 1,
           (unsigned long long)atomic_load(&steps_done), (double)atomic_load(&bytes_done) / 1e9,
           (unsigned long long)(st1.remote_free - st0.remote_free),
           (unsigned long long)(st1.slab_abandon - st0.slab_abandon),
           (unsigned long long)(st1.slab_adopt - st0.slab_adopt));
    uint64_t e = atomic_load(&errors);
    printf("%s: stress every block intact (%llu errors)\n", e ? "FAIL" : "PASS",
           (unsigned long long)e);
    int back = st1.large_now == 0 && st1.large_bytes_now == 0 &&
               st1.slabs_active_now == st0.slabs_active_now;
    printf("%s: stress every block came back (active slabs %zu at the start, %zu at the end; "
           "live large blocks %zu)\n",
           back ? "PASS" : "FAIL", st0.slabs_active_now, st1.slabs_active_now, st1.large_now);
    return e || !back;
}
