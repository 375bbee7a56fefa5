/* Slab carving and accounting: blocks are carved lazily, every slab's live count is exact
 * after any sequence of operations, empty slabs are reused before new memory is mapped, empty
 * SuperSlabs are cached and then trimmed, and large blocks grow without a copy. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "hakmem.h"
#include "heap.h"
#include "owned.h"
#include "room.h"
#include "os.h"
#include "superslab.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Runs fn in a thread of its own (a heap of its own, from nothing); whether it returned 1. */
static int in_new_thread(void *(*fn)(void *)) {
    pthread_t t;
    void *ok = NULL;
    if (pthread_create(&t, NULL, fn, NULL) != 0 || pthread_join(t, &ok) != 0) return 0;
    return ok == (void *)1;
}

#ifndef HK_HARDENED
/* in_new_thread for a test of the walks home: no slab gets a side list meanwhile (heap.c,
 * "Side lists"), so that the walks take every block. */
static int in_new_thread_walking(void *(*fn)(void *)) {
    hk_side_off = 1;
    int ok = in_new_thread(fn);
    hk_side_off = 0;
    return ok;
}
#endif

/* Blocks in the calling thread's cache of class c. */
static unsigned cache_len(unsigned c) {
    unsigned n = 0;
    for (void *b = hk_tls.heap->free[c]; b; b = hk_link_get(b)) n++;
    return n;
}

static unsigned resident_pages(void *start, size_t len) {
    unsigned char vec[64];
    unsigned n = 0;
    for (size_t off = 0; off < len; off += sizeof vec * 4096) {
        size_t k = len - off < sizeof vec * 4096 ? len - off : sizeof vec * 4096;
        if (mincore((char *)start + off, k, vec) != 0) return ~0u;
        for (size_t i = 0; i < k / 4096; i++) n += vec[i] & 1;
    }
    return n;
}

/* Runs first, on a class nothing else has used, so its slab comes from fresh memory. */
TEST(carving_is_lazy) {
    void *p = hak_malloc(48);
    CHECK(p != NULL);
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
    CHECK(s->cls == hk_class_of(48));
    CHECK(s->carved > 0 && s->carved < s->capacity);
    /* Pages past the carved blocks have never been touched. */
    char *base = hk_slab_base(s);
    size_t carved_end = hk_align_up((size_t)s->carved * s->bsize, 4096);
    CHECK(resident_pages(base + carved_end, HK_SLAB_SIZE - carved_end) == 0);
    CHECK(resident_pages(base, carved_end) > 0);
    hak_free(p);
}

/* A thread's first carve of a class takes 8 blocks and each later one twice as many, up to the
 * class's batch: a thread that allocates a few blocks leaves few carved in its cache. Run in a
 * new thread, whose heap has carved nothing yet. */
static void *carve_ramp(void *arg) {
    (void)arg;
    enum { N = 8 + 16 + 32 };
    static void *p[N + 1];
    int ok = 1;
    unsigned c = hk_class_of(32);
    p[0] = hak_malloc(32);
    struct hk_slab *s = hk_slab_of((uintptr_t)p[0]);
    uint32_t start = s->carved - 8; /* the slab may have been carved by a thread before */
    ok &= s->cls == c && hk_tls.heap->cur[c] == s;
    for (unsigned i = 1; i <= N && ok; i++) {
        p[i] = hak_malloc(32);
        ok &= hk_slab_of((uintptr_t)p[i]) == s;
        /* Blocks 1..8 from the first carve, 9..24 from a second of 16, 25..56 from a third. */
        uint32_t expect = i < 8 ? 8 : i < 24 ? 24 : i < 56 ? 56 : 120;
        ok &= s->carved - start == expect;
    }
    for (unsigned i = 0; i <= N; i++) hak_free(p[i]);
    return (void *)(uintptr_t)ok;
}

TEST(a_thread_carves_more_as_it_allocates_more) { CHECK(in_new_thread(carve_ramp)); }

#define NLIVE 6000
static void *live[NLIVE];

/* Compares every slab's live count with the blocks this test holds in it. */
static int accounting_exact(void) {
    struct { struct hk_slab *s; uint32_t n; } seen[512];
    unsigned ns = 0;
    for (unsigned i = 0; i < NLIVE; i++) {
        if (!live[i]) continue;
        struct hk_slab *s = hk_slab_of((uintptr_t)live[i]);
        unsigned j = 0;
        while (j < ns && seen[j].s != s) j++;
        if (j == ns) {
            if (ns == 512) return 0;
            seen[ns].s = s;
            seen[ns++].n = 0;
        }
        seen[j].n++;
    }
    for (unsigned j = 0; j < ns; j++) {
        struct hk_slab *s = seen[j].s;
        if (s->state != HK_SLOT_ACTIVE || s->cls == HK_CLS_NONE) return 0;
        if (hk_heap_slab_live(s) != seen[j].n) {
            fprintf(stderr, "  slab %p class %u: live %u, expected %u\n", (void *)s, s->cls,
                    hk_heap_slab_live(s), seen[j].n);
            return 0;
        }
    }
    return 1;
}

TEST(live_counts_exact_after_random_operations) {
    static const size_t sizes[] = {16, 24, 100, 256, 700, 1000, 3000, 9000};
    memset(live, 0, sizeof live);
    int ok = 1;
    for (unsigned step = 0; step < 200000 && ok; step++) {
        unsigned i = (unsigned)(rng() % NLIVE);
        if (live[i]) {
            hak_free(live[i]);
            live[i] = NULL;
        } else {
            live[i] = hak_malloc(sizes[rng() % 8]);
            if (!live[i]) ok = 0;
        }
        if (step % 997 == 0) ok = ok && accounting_exact();
    }
    CHECK(ok);
    CHECK(accounting_exact());
    for (unsigned i = 0; i < NLIVE; i++) hak_free(live[i]), live[i] = NULL;
}

/* More slabs than the owned-slab table has entries (heap.h): frees to the slabs the table
 * misses, full or not, keep every count exact and the memory comes back. */
TEST(frees_to_slabs_beyond_the_table_are_exact) {
    enum { PER = 32, SLABS = 3 * HK_OWNED / 2, N = PER * SLABS }; /* 2 KiB blocks */
    void **p = hak_malloc(N * sizeof *p);
    struct hak_stats a, b;
    hak_stats_get(&a);
    for (int i = 0; i < N; i++) p[i] = hak_malloc(2048);
    /* Every other block, in an order that visits every slab before any twice. */
    for (int k = 0; k < PER; k += 2)
        for (int j = 0; j < SLABS; j++) hak_free(p[j * PER + k]), p[j * PER + k] = NULL;
    int exact = 1;
    for (int j = 0; j < SLABS && exact; j++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)p[j * PER + 1]);
        uint32_t held = 0;
        for (int i = 0; i < N; i++) held += p[i] && hk_slab_of((uintptr_t)p[i]) == s;
        exact = hk_heap_slab_live(s) == held;
        if (!exact) fprintf(stderr, "  slab %d: live %u, held %u\n", j, hk_heap_slab_live(s), held);
    }
    CHECK(exact);
    for (int i = 0; i < N; i++) hak_free(p[i]);
    hak_free(p);
    hak_trim();
    hak_stats_get(&b);
    CHECKF(b.slabs_active_now <= a.slabs_active_now + 1, "active slabs %zu, %zu before",
           b.slabs_active_now, a.slabs_active_now);
}

/* A thread that owns more small slabs than its first table holds moves to a larger table
 * (heap.h, HK_OWNED): then most of its slabs have their entry, so that their frees take the
 * fast path (with the first table alone, at most a third of these could), the counts stay
 * exact, and the memory comes back. In a thread of its own, whose table starts small and which
 * exits holding the larger one (its teardown unmaps it). */
enum { TG_PER = 2, TG_SLABS = 3 * HK_OWNED, TG_N = TG_PER * TG_SLABS }; /* 32 KiB blocks */
static void *tg_block[TG_N];

static void *table_grows(void *arg) {
    (void)arg;
    int ok = hk_heap_table_size() <= HK_OWNED; /* 1 before the heap is set up */
    for (int i = 0; i < TG_N; i++) tg_block[i] = hak_malloc(32768);
    size_t entries = hk_heap_table_size();
    unsigned slabs = 0, held = 0;
    for (int i = 0; i < TG_N; i++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)tg_block[i]);
        if (i > 0 && s == hk_slab_of((uintptr_t)tg_block[i - 1])) continue;
        slabs++;
        held += hk_heap_has_entry(s);
    }
    if (entries <= HK_OWNED || held < slabs * 3 / 4) {
        fprintf(stderr, "  table of %zu entries; %u of %u slabs hold one\n", entries, held,
                slabs);
        ok = 0;
    }
    /* Every other block, then a count of each slab against what is held. */
    for (int i = 0; i < TG_N; i += 2) hak_free(tg_block[i]), tg_block[i] = NULL;
    for (int i = 1; i < TG_N && ok; i += 2) {
        struct hk_slab *s = hk_slab_of((uintptr_t)tg_block[i]);
        uint32_t expect = 0;
        for (int j = i - 1; j <= i + 1 && j < TG_N; j++)
            expect += tg_block[j] && hk_slab_of((uintptr_t)tg_block[j]) == s;
        if (hk_heap_slab_live(s) != expect) {
            fprintf(stderr, "  slab of block %d: live %u, held %u\n", i, hk_heap_slab_live(s),
                    expect);
            ok = 0;
        }
    }
    for (int i = 1; i < TG_N; i += 2) hak_free(tg_block[i]);
    return (void *)(uintptr_t)ok;
}

TEST(a_thread_with_many_slabs_gets_a_larger_table) {
    struct hak_stats a, b;
    hak_trim();
    hak_stats_get(&a);
    CHECK(in_new_thread(table_grows));
    hak_trim();
    hak_stats_get(&b);
    CHECKF(b.slabs_active_now <= a.slabs_active_now, "active slabs %zu, %zu before",
           b.slabs_active_now, a.slabs_active_now);
}

/* A slab that lost its table entry and stays current, the cache of its class serving the
 * thread so that no slab takes an entry again: every free of its blocks misses the table, and
 * the table grows for such misses as it does for slabs that take each other's entries
 * (larson's threads, whose current slabs stay put, sent a quarter of their frees to the slow
 * path with a first table of 64 entries). 1 KiB blocks; in a thread of its own, whose table
 * starts at its first size. */
enum { MG_MAX = 4 * HK_OWNED * 64 };
static void *mg_block[MG_MAX];
static struct hk_slab *mg_slab[4 * HK_OWNED];

/* Allocates 1 KiB blocks until a new slab falls to the entry of one before, then frees a
 * block of that first, full slab, which takes its entry back: the current slab (*b) has none,
 * and every free of its block mg_block[*last] misses the table. Returns the blocks allocated
 * (mg_block[0 .. n)), or 0 if that failed. */
static int mg_miss_setup(struct hk_slab **b, int *last) {
    struct hk_slab *a = NULL;
    int n = 0, k = 0;
    *b = NULL;
    while (!*b && n < MG_MAX) {
        void *p = mg_block[n++] = hak_malloc(1024);
        struct hk_slab *s = hk_slab_of((uintptr_t)p);
        if (k > 0 && s == mg_slab[k - 1]) continue;
        struct hk_heap *h = hk_tls.heap;
        for (int j = 0; j < k && !*b; j++)
            if (hk_owned_at(h, (uintptr_t)hk_slab_base(mg_slab[j])) ==
                hk_owned_at(h, (uintptr_t)hk_slab_base(s)))
                a = mg_slab[j], *b = s;
        mg_slab[k++] = s;
    }
    if (!*b || hk_heap_table_size() != HK_OWNED) {
        fprintf(stderr, "  no two slabs share an entry of the first table (%d slabs, %zu entries)\n",
                k, hk_heap_table_size());
        return 0;
    }
    *last = n - 1;
    for (int i = 0; i < n; i++)
        if (hk_slab_of((uintptr_t)mg_block[i]) == a) {
            hak_free(mg_block[i]);
            mg_block[i] = NULL;
            break;
        }
    if (!hk_heap_has_entry(a) || hk_heap_has_entry(*b)) {
        fprintf(stderr, "  the full slab did not take its entry back\n");
        return 0;
    }
    return n;
}

static void *misses_grow(void *arg) {
    (void)arg;
    struct hk_slab *b;
    int last, n = mg_miss_setup(&b, &last), ok = n > 0;
    for (int i = 0; i < 1000 && ok; i++) {
        hak_free(mg_block[last]);
        mg_block[last] = hak_malloc(1024);
    }
    if (ok && (hk_heap_table_size() <= HK_OWNED || !hk_heap_has_entry(b))) {
        fprintf(stderr, "  table of %zu entries after 1000 frees that missed it; entry %d\n",
                hk_heap_table_size(), hk_heap_has_entry(b));
        ok = 0;
    }
    for (int i = 0; i < n; i++) hak_free(mg_block[i]);
    return (void *)(uintptr_t)ok;
}

TEST(frees_that_miss_the_table_grow_it) { CHECK(in_new_thread(misses_grow)); }

/* The same misses, each beside 40 frees that hit the table, leave it as it is: a thread with
 * some 100 slabs has a few pairs of them share an entry in a table of any size, and growing
 * for those (larson's threads, to 4,096 entries) mapped and unmapped a table a thread. */
static void *few_misses(void *arg) {
    (void)arg;
    struct hk_slab *b;
    int last, n = mg_miss_setup(&b, &last), ok = n > 0;
    /* Blocks of a class whose slab has an entry of its own. */
    size_t size = 0;
    for (size_t z = 48; z <= 512 && ok && !size; z += 16) {
        void *q = hak_malloc(z);
        if (hk_heap_has_entry(hk_slab_of((uintptr_t)q))) size = z;
        hak_free(q);
    }
    if (ok && !size) {
        fprintf(stderr, "  no class of 48..512 bytes has a slab with an entry\n");
        ok = 0;
    }
    for (int i = 0; i < 1000 && ok; i++) {
        for (int j = 0; j < 40; j++) hak_free(hak_malloc(size));
        hak_free(mg_block[last]);
        mg_block[last] = hak_malloc(1024);
    }
    if (ok && hk_heap_table_size() != HK_OWNED) {
        fprintf(stderr, "  table of %zu entries after 1000 misses beside 40,000 hits\n",
                hk_heap_table_size());
        ok = 0;
    }
    for (int i = 0; i < n; i++) hak_free(mg_block[i]);
    return (void *)(uintptr_t)ok;
}

#ifndef HK_HARDENED
TEST(few_misses_beside_many_hits_leave_the_table) { CHECK(in_new_thread(few_misses)); }
#endif

/* A thread's grown table stays with its heap record when the thread exits, and the next
 * thread that takes the record grows into it instead of mapping another: one thread grows its
 * table and exits, then threads start one at a time until one takes that record (records go
 * round), which grows its table by allocating blocks in more slabs than the first table has
 * entries. */
enum { ST_BLOCKS = 3 * HK_OWNED * 2 }; /* 32 KiB blocks, 2 to a slab */
static void *st_block[ST_BLOCKS];

static int st_grow(void) {
    for (int i = 0; i < ST_BLOCKS; i++) st_block[i] = hak_malloc(32768);
    return hk_heap_table_size() > HK_OWNED;
}

static void st_free(void) {
    for (int i = 0; i < ST_BLOCKS; i++) hak_free(st_block[i]);
}

static struct hk_owned *st_spare; /* the table the first thread left */
static pid_t st_first_tid;

static void *st_first(void *arg) {
    (void)arg;
    st_first_tid = (pid_t)syscall(SYS_gettid);
    int ok = st_grow();
    st_spare = hk_tls.heap->otab;
    st_free();
    return (void *)(uintptr_t)ok;
}

/* 1 if the thread took the first thread's record and grew into its table, 2 if it took
 * another record, 0 on failure. */
static void *st_next(void *arg) {
    (void)arg;
    void *p = hak_malloc(32);
    struct hk_heap *h = hk_tls.heap;
    uintptr_t r = 2;
    if (h->ospare == st_spare) {
        r = st_grow() && h->otab == st_spare && h->ospare == NULL;
        if (!r) fprintf(stderr, "  the table at %p, not the spare %p\n", (void *)h->otab,
                        (void *)st_spare);
        st_free();
    }
    hak_free(p);
    return (void *)r;
}

/* A record waits until its thread is gone from the process (hk_record_reap). pthread_join
 * returns before the kernel has finished the thread's exit, and on a loaded machine it can
 * take milliseconds more: a test that started the next threads at once saw, once in CI, all
 * 256 of them run while the first thread was still exiting. So the test waits (10 s at
 * most) until the first thread's id is gone. */
static void st_wait_gone(pid_t tid) {
    for (int ms = 0; syscall(SYS_tgkill, getpid(), tid, 0) == 0 && ms < 10000; ms++)
        usleep(1000);
}

/* The next threads take records in turn, and one of them takes the first thread's record once
 * the free records before it are used: runs fn (1 or 0 if its thread took that record, 2 if
 * another) in up to 256 threads, one at a time, until one returns 0 or 1; 2 if none did. */
static uintptr_t st_until_taken(void *(*fn)(void *)) {
    uintptr_t r = 2;
    for (int i = 0; i < 256 && r == 2; i++) {
        pthread_t t;
        void *v = NULL;
        if (pthread_create(&t, NULL, fn, NULL) != 0 || pthread_join(t, &v) != 0) return 0;
        r = (uintptr_t)v;
    }
    return r;
}

TEST(a_grown_table_stays_with_its_record) {
    CHECK(in_new_thread(st_first));
    st_wait_gone(st_first_tid);
    uintptr_t r = st_until_taken(st_next);
    CHECKF(r == 1, "%s", r == 2 ? "no thread took the record" : "the spare table was not used");
}

/* A table that a record keeps is cleared before the next thread grows into it. The thread
 * before left the entries of the slabs it held when it exited, and those slabs have gone on:
 * here its parked heap is given up (hak_trim), its blocks are freed, and its slabs go to the
 * pool. Right after the next thread's table grows into the spare, every entry that holds
 * something is that of a small slab the thread owns, as hk_owned_put wrote it. */
static void *sc_block[ST_BLOCKS];
static struct hk_owned *sc_spare;
static pid_t sc_first_tid;

static void *sc_first(void *arg) {
    (void)arg;
    sc_first_tid = (pid_t)syscall(SYS_gettid);
    int ok = 1;
    for (int i = 0; i < ST_BLOCKS; i++) ok &= (sc_block[i] = hak_malloc(32768)) != NULL;
    sc_spare = hk_tls.heap->otab;
    return (void *)(uintptr_t)(ok && hk_heap_table_size() > HK_OWNED); /* exits holding them */
}

static int sc_table_clean(const struct hk_heap *h) {
    size_t n = hk_heap_table_size(), bad = 0;
    for (size_t i = 0; i < n; i++) {
        const struct hk_owned *e = &h->otab[i];
        const struct hk_slab *s = h->oslab[i];
        if (!s && !e->lim) continue;
        /* A slab's metadata lies in its SuperSlab, which a stale entry's may have left. */
        if (s && hk_is_superslab((uintptr_t)s) &&
            atomic_load_explicit(&s->owner, memory_order_relaxed) == h->owner &&
            s->cls < HK_NSMALL && e->base == (uintptr_t)hk_slab_base(s) &&
            e->lim == s->lim * e->mul)
            continue;
        bad++;
    }
    if (bad) fprintf(stderr, "  %zu of %zu entries hold slabs the thread does not\n", bad, n);
    return bad == 0;
}

/* 1 if the thread took the first thread's record and grew into a clean table, 2 if it took
 * another record, 0 on failure. */
static void *sc_next(void *arg) {
    (void)arg;
    void *p = hak_malloc(32);
    const struct hk_heap *h = hk_tls.heap;
    uintptr_t r = 2;
    if (h->ospare == sc_spare) {
        static void *b[ST_BLOCKS];
        int k = 0;
        while (k < ST_BLOCKS && hk_heap_table_size() <= HK_OWNED) b[k++] = hak_malloc(32768);
        r = h->otab == sc_spare && sc_table_clean(h);
        if (h->otab != sc_spare) fprintf(stderr, "  the spare table was not used\n");
        for (int i = 0; i < k; i++) hak_free(b[i]);
    }
    hak_free(p);
    return (void *)r;
}

TEST(a_table_used_again_holds_none_of_the_last_threads_slabs) {
    CHECK(in_new_thread(sc_first));
    st_wait_gone(sc_first_tid);
    hak_trim(); /* gives the parked heap up: its slabs become orphans */
    for (int i = 0; i < ST_BLOCKS; i++) hak_free(sc_block[i]);
    hak_trim();
    uintptr_t r = st_until_taken(sc_next);
    CHECKF(r == 1, "%s", r == 2 ? "no thread took the record" : "the table was not clean");
}

/* What every thread pays however little it allocates: a thread that allocated one block has
 * at most 3 pages of its heap record resident, its first owned-slab table included (with a
 * first table of 512 entries, 20 KiB, a new thread had 6 of 8 pages resident). */
static void *one_block(void *arg) {
    (void)arg;
    void *p = hak_malloc(32);
    struct hk_heap *h = hk_tls.heap;
    uintptr_t lo = (uintptr_t)h & ~(uintptr_t)4095;
    uintptr_t hi = ((uintptr_t)h + sizeof *h + 4095) & ~(uintptr_t)4095;
    unsigned pages = resident_pages((void *)lo, hi - lo);
    hak_free(p);
    if (pages > 3) fprintf(stderr, "  %u pages of the heap record resident\n", pages);
    return (void *)(uintptr_t)(pages <= 3);
}

TEST(a_thread_of_one_block_holds_three_pages_of_heap_record) {
    CHECK(in_new_thread(one_block));
}

/* Threads that start together and find no record to take get new ones from mappings of
 * several records each: 64 threads alive at once cost far fewer than 64 mappings. */
enum { RB_THREADS = 64 };
static pthread_barrier_t rb_barrier;

static void *rb_thread(void *arg) {
    (void)arg;
    void *p = hak_malloc(16);
    pthread_barrier_wait(&rb_barrier); /* every thread holds its record now */
    hak_free(p);
    return (void *)(uintptr_t)(p != NULL);
}

TEST(threads_started_together_map_their_records_together) {
    pthread_t t[RB_THREADS];
    struct hak_stats a, b;
    CHECK(pthread_barrier_init(&rb_barrier, NULL, RB_THREADS) == 0);
    hak_stats_get(&a);
    int ok = 1;
    for (int i = 0; i < RB_THREADS; i++) ok &= pthread_create(&t[i], NULL, rb_thread, NULL) == 0;
    CHECK(ok);
    for (int i = 0; i < RB_THREADS; i++) {
        void *v = NULL;
        ok &= pthread_join(t[i], &v) == 0 && v == (void *)1;
    }
    hak_stats_get(&b);
    pthread_barrier_destroy(&rb_barrier);
    CHECK(ok);
    CHECKF(b.os_mmap - a.os_mmap < RB_THREADS / 4, "%zu mappings for %d threads",
           b.os_mmap - a.os_mmap, RB_THREADS);
}

/* Frees of the thread's own blocks go into its cache whichever of its slabs they are of: the
 * next mallocs of the class hand them out, last freed first, and their slab counts them as
 * live meanwhile. (The hardened build's cache holds the current slab's blocks only.) */
TEST(own_frees_are_the_next_blocks) {
    enum { N = 3 * 1024, K = 8 }; /* 64-byte blocks: three slabs */
    void **p = hak_malloc(N * sizeof *p);
    for (int i = 0; i < N; i++) p[i] = hak_malloc(64);
    struct hk_slab *s = hk_slab_of((uintptr_t)p[0]);
    CHECK(hk_tls.heap->cur[s->cls] != s);
    void *mine[K + 1];
    int k = 0;
    for (int i = 0; i < N && k <= K; i++)
        if (hk_slab_of((uintptr_t)p[i]) == s) mine[k++] = p[i], p[i] = NULL;
    CHECK(k == K + 1);
    uint32_t live = hk_heap_slab_live(s);
    hak_free(mine[0]); /* the slab was full: into the cache all the same */
    for (int i = 1; i <= K; i++) hak_free(mine[i]);
    CHECKF(hk_heap_slab_live(s) == live - K - 1, "live %u, %u before", hk_heap_slab_live(s), live);
    int next = 0;
    for (int i = K; i >= 1; i--) {
        void *q = hak_malloc(64);
        next += q == mine[i];
        mine[i] = q;
    }
#ifdef HK_HARDENED
    CHECKF(next == 0, "%d of %d handed out next", next, K);
#else
    CHECKF(next == K, "%d of %d handed out next", next, K);
#endif
    for (int i = 1; i <= K; i++) hak_free(mine[i]);
    for (int i = 0; i < N; i++) hak_free(p[i]);
    hak_free(p);
}

/* A cache grows by its room at most (heap.h, "Reuse"): a thread that frees eight slabs' worth
 * of a class without a malloc sends the whole cache home each time the room runs out, and
 * from then on keeps an eighth of a room at most; every count stays exact. */
TEST(a_cache_grows_by_its_room_at_most) {
    enum { PER = 512, N = 8 * PER }; /* 128-byte blocks */
    void **p = hak_malloc(N * sizeof *p);
    for (int i = 0; i < N; i++) p[i] = hak_malloc(128);
    unsigned c = hk_slab_of((uintptr_t)p[0])->cls;
    for (int i = 0; i < N; i++) hak_free(p[i]);
    unsigned n = cache_len(c);
    CHECKF(n <= HK_ROOM_BYTES / 128 / 8, "%u blocks in the cache", n);
    unsigned emptied = 0;
    for (int i = 0; i < N; i += PER) {
        struct hk_slab *s = hk_slab_of((uintptr_t)p[i]);
        emptied += s->cls != c || s->list == HK_LIST_RETAINED || s->state != HK_SLOT_ACTIVE;
        if (s->cls == c && hk_heap_slab_live(s) != 0)
            CHECKF(0, "slab %d: live %u", i / PER, hk_heap_slab_live(s));
    }
    /* Eight slabs, of which the cache can hold two at most: the others went home empty. */
    CHECKF(emptied >= 5, "%u of 8 slabs emptied", emptied);
    hak_free(p);
}

#ifndef HK_HARDENED
/* A thread that frees blocks of a small class without reusing them sends its cache home each
 * time the room runs out, and the room is then an eighth of the full one, HK_ROOM_TORN
 * blocks at most (heap.h): of 16-byte blocks, whose eighth is 256, the cache never holds more
 * than HK_ROOM_TORN between walks, so each walk reads blocks freed recently. */
static void *torn_room(void *arg) {
    (void)arg;
    enum { N = 20000, LAST = 600 };
    void **p = hak_malloc(N * sizeof *p);
    for (int i = 0; i < N; i++) p[i] = hak_malloc(16);
    unsigned c = hk_class_of(16), most = 0;
    int ok = hk_heap_room_full(c) / 8 > HK_ROOM_TORN; /* else the test shows nothing */
    for (int i = 0; i < N; i++) {
        hak_free(p[i]);
        if (i < N - LAST) continue;
        unsigned n = cache_len(c);
        if (n > most) most = n;
    }
    if (most > HK_ROOM_TORN) fprintf(stderr, "  %u blocks in the cache between walks\n", most);
    ok &= most <= HK_ROOM_TORN && most > 0;
    unsigned live = 0;
    for (int i = 0; i < N; i += 1000) live += hk_heap_slab_live(hk_slab_of((uintptr_t)p[i]));
    ok &= live == 0;
    hak_free(p);
    return (void *)(uintptr_t)ok;
}

TEST(a_class_freed_without_reuse_goes_home_in_short_walks) {
    CHECK(in_new_thread_walking(torn_room));
}

/* Two classes torn down at once, their frees in turn: when one's room runs out, the walk
 * sends the other's cache home with it (heap.c, hk_heap_torn_walk), so each walk finds the
 * other class's cache empty too; every block goes home all the same. */
static void *torn_together(void *arg) {
    (void)arg;
    enum { N = 4000 };
    static void *a[N], *b[N];
    for (int i = 0; i < N; i++) a[i] = hak_malloc(16), b[i] = hak_malloc(128);
    unsigned ca = hk_class_of(16), cb = hk_class_of(128), walks = 0, other = 0;
    int ok = hk_heap_room_full(ca) / 8 >= HK_ROOM_TORN; /* else the test shows nothing */
    for (int i = 0; i < N; i++) {
        hak_free(a[i]);
        /* Past both classes' first walks (their full rooms), a's cache empty: a's walk. */
        if (i > 1100 && cache_len(ca) == 0) {
            walks++;
            other += cache_len(cb);
        }
        hak_free(b[i]);
    }
    if (walks < 10 || other) fprintf(stderr, "  %u walks; %u blocks left of the other class\n",
                                     walks, other);
    ok &= walks >= 10 && other == 0;
    unsigned live = 0;
    for (int i = 0; i < N; i += 100)
        live += hk_heap_slab_live(hk_slab_of((uintptr_t)a[i])) +
                hk_heap_slab_live(hk_slab_of((uintptr_t)b[i]));
    ok &= live == 0;
    return (void *)(uintptr_t)ok;
}

TEST(classes_torn_down_together_go_home_together) { CHECK(in_new_thread_walking(torn_together)); }

/* A class torn down and then allocated again: the teardown's last blocks, left in the cache
 * and each of another slab, go home at the next refill of another class (heap.c,
 * hk_heap_torn_home), so that only the slab of the one block malloc took of them holds a
 * block; the others empty. */
static void *torn_then_reused(void *arg) {
    (void)arg;
    enum { N = 20000, SIZE = 128, EXTRA = 2 }; /* some 40 slabs */
    void **p = hak_malloc(N * sizeof *p), *extra[EXTRA];
    for (int i = 0; i < EXTRA; i++) extra[i] = hak_malloc(SIZE);
    for (int i = 0; i < N; i++) p[i] = hak_malloc(SIZE);
    uint64_t x = 42;
    for (int i = N - 1; i > 0; i--) { /* freed in random order, as a tree torn down */
        x = x * 6364136223846793005u + 1442695040888963407u;
        int j = (int)((x >> 33) % (uint64_t)(i + 1));
        void *t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    for (int i = 0; i < N; i++) hak_free(p[i]);
    unsigned c = hk_class_of(SIZE);
    /* Where the last walk came at the last frees, the cache holds fewer than 2: as many frees
     * more as that takes (2 at most: a walk comes at the room's end, 32 frees after one). */
    int k = 0;
    while (k < EXTRA && cache_len(c) < 2) hak_free(extra[k++]);
    unsigned left = cache_len(c);
    int ok = left >= 2; /* else the test shows nothing */
    void *reused = hak_malloc(SIZE); /* one of them, from the cache */
    void *other = hak_malloc(48);    /* a refill of a class never allocated */
    ok &= hk_tls.heap->free[c] == NULL;
    struct hk_slab *keep = hk_slab_of((uintptr_t)reused);
    unsigned held = 0;
    for (int i = 0; i < N; i++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)p[i]);
        int live_extra = 0; /* an extra block not freed keeps its slab */
        for (int e = k; e < EXTRA; e++) live_extra |= hk_slab_of((uintptr_t)extra[e]) == s;
        if (s != keep && !live_extra && s->cls == c && s->state == HK_SLOT_ACTIVE &&
            s->used != 0)
            held++;
    }
    if (!ok || held)
        fprintf(stderr, "  %u blocks left in the cache; %u of the %d in slabs still held\n", left,
                held, N);
    ok &= held == 0;
    for (; k < EXTRA; k++) hak_free(extra[k]);
    hak_free(reused);
    hak_free(other);
    hak_free(p);
    return (void *)(uintptr_t)ok;
}

TEST(a_class_torn_down_and_reused_sends_its_last_blocks_home) {
    CHECK(in_new_thread_walking(torn_then_reused));
}

/* A slab's free list made of the thread's own frees is handed out in address order (heap.c,
 * hk_list_in_order), whatever order the blocks were freed in: sorted where a sixteenth or
 * more of its blocks are live, all of them in turn where none is. ORD blocks of 64 bytes, one
 * slab of a new thread; every fourth kept (KEEP: none kept), the rest freed in a scrambled
 * order and sent home, then as many allocated again. */
enum { ORD = 512 };
static void *p_ord[ORD], *q_ord[ORD];
static int order_kept(int keep_none) {
    int ok = 1, freed = 0;
    for (int i = 0; i < ORD; i++) p_ord[i] = hak_malloc(64);
    struct hk_slab *s = hk_slab_of((uintptr_t)p_ord[0]);
    for (int i = 0; i < ORD; i++) ok &= hk_slab_of((uintptr_t)p_ord[i]) == s;
    for (int i = 0; i < ORD; i++) {
        int k = (i * 149) % ORD; /* 149 is prime to 512: every block once, scrambled */
        if (!keep_none && k % 4 == 0) continue;
        hak_free(p_ord[k]);
        p_ord[k] = NULL;
        freed++;
    }
    hk_heap_flush(); /* the cache's blocks go onto the slab's list */
    ok &= s->free != NULL && s->list_tag == hk_tls.heap->tag && (s->used == 0) == keep_none;
    uintptr_t last = 0;
    int rising = 0;
    for (int i = 0; i < freed; i++) {
        uintptr_t b = (uintptr_t)(q_ord[i] = hak_malloc(64));
        rising += b > last && hk_slab_of(b) == s;
        last = b;
    }
    if (rising != freed) fprintf(stderr, "  %d of %d blocks above the one before\n", rising, freed);
    ok &= rising == freed;
    if (keep_none) ok &= q_ord[0] == (void *)hk_slab_base(s);
    for (int i = 0; i < ORD; i++) hak_free(p_ord[i]);
    for (int i = 0; i < freed; i++) hak_free(q_ord[i]);
    return ok;
}
static void *order_some(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)order_kept(0);
}
static void *order_none(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)order_kept(1);
}
TEST(a_slab_of_the_threads_own_frees_is_handed_out_in_address_order) {
    CHECK(in_new_thread(order_some));
    CHECK(in_new_thread(order_none));
}

/* A list of the thread's own frees that malloc took in order leaves its slab with the
 * thread's tag and a clear bitmap (heap.c, hk_heap_fill): an empty list is of the thread's
 * own frees, so the next ones join it on a walk's first step, not one by one on the second
 * (lua5.4's collector, whose sweeps free into slabs whose lists malloc took since the last
 * sweep: half its frees took the second step). */
static void *tag_kept(void *arg) {
    (void)arg;
    int ok = 1;
    for (int i = 0; i < ORD; i++) p_ord[i] = hak_malloc(64);
    struct hk_slab *s = hk_slab_of((uintptr_t)p_ord[0]);
    for (int i = 0; i < ORD; i++) ok &= hk_slab_of((uintptr_t)p_ord[i]) == s;
    for (int i = 0; i < ORD; i++) {
        int k = (i * 149) % ORD;
        if (k % 4) hak_free(p_ord[k]), p_ord[k] = NULL;
    }
    hk_heap_flush();
    ok &= s->free != NULL && hk_list_key(s) == hk_tls.heap->tag;
    for (int i = 0; i < ORD; i++)
        if (!p_ord[i]) p_ord[i] = hak_malloc(64); /* s's list, taken in order */
    if (s->free != NULL || hk_list_key(s) != hk_tls.heap->tag)
        fprintf(stderr, "  list %p, key %#x, tag %#x\n", s->free, hk_list_key(s),
                hk_tls.heap->tag);
    ok &= s->free == NULL && hk_list_key(s) == hk_tls.heap->tag;
    for (int i = 0; i < ORD; i++) hak_free(p_ord[i]);
    return (void *)(uintptr_t)ok;
}
TEST(a_list_taken_in_order_keeps_the_threads_tag) { CHECK(in_new_thread(tag_kept)); }

/* A walk home takes the blocks of one slab that lie together on the cache's list as a run
 * (heap.c, hk_walk_run): a program that frees its objects in the order it made them (a
 * collector's sweep) leaves them so. The slab's count stays exact, the list is handed out in
 * address order, and a run stops short of emptying its slab: the last block empties it the
 * one-by-one way, which takes a slab that is not current off the partial list. RUN_N blocks
 * of 64 bytes fill a slab; the slab is neither current nor full when the runs go home (a
 * current slab's blocks go home as they are linked). */
enum { RUN_N = 1024 };
static void *p_run[RUN_N], *q_run[RUN_N], *fill_run[2 * RUN_N];
static int fill_past(struct hk_slab *s, int *n) {
    int ok = 1, k = *n;
    do { /* until a block of another slab than the current one, s */
        fill_run[k] = hak_malloc(64);
        ok &= k < 2 * RUN_N - 1;
    } while (ok && hk_slab_of((uintptr_t)fill_run[k++]) == s);
    *n = k;
    return ok;
}
static void *walk_runs(void *arg) {
    (void)arg;
    int ok = 1, nfill = 0;
    for (int i = 0; i < RUN_N; i++) p_run[i] = hak_malloc(64);
    struct hk_slab *s = hk_slab_of((uintptr_t)p_run[0]);
    for (int i = 0; i < RUN_N; i++) ok &= hk_slab_of((uintptr_t)p_run[i]) == s;
    CHECKF(ok && s->carved == RUN_N, "carved %u", s->carved);
    fill_run[nfill++] = hak_malloc(64); /* s full, another current */
    struct hk_slab *s2 = hk_slab_of((uintptr_t)fill_run[0]);
    CHECK(s2 != s);
    hak_free(p_run[0]); /* s partial */
    p_run[0] = NULL;
    hk_heap_flush();
    CHECKF(s->list == HK_LIST_PARTIAL && s->used == RUN_N - 1, "list %u", s->list);
    /* Every block but each eighth freed, in the order made. */
    int freed = 1;
    for (int i = 1; i < RUN_N; i++) {
        if (i % 8 == 0) continue;
        hak_free(p_run[i]);
        p_run[i] = NULL;
        freed++;
    }
    hk_heap_flush();
    CHECKF(s->used == RUN_N / 8 - 1 && s->list_tag == hk_tls.heap->tag, "used %u, tag %u", s->used,
           s->list_tag);
    /* Once s2 is full, malloc takes s's list, in address order, and none of the live blocks. */
    CHECK(fill_past(s2, &nfill));
    q_run[0] = fill_run[--nfill];
    uintptr_t last = 0;
    int rising = 0, live_again = 0;
    for (int i = 0; i < freed; i++) {
        uintptr_t b = (uintptr_t)(q_run[i] = i ? hak_malloc(64) : q_run[0]);
        rising += b > last && hk_slab_of(b) == s;
        last = b;
        for (int k = 8; k < RUN_N; k += 8) live_again += (void *)b == p_run[k];
    }
    CHECKF(rising == freed && live_again == 0 && s->used == RUN_N,
           "%d of %d above the one before, %d live, used %u", rising, freed, live_again, s->used);
    for (int i = 0; i < freed; i++)
        p_run[((uintptr_t)q_run[i] - (uintptr_t)hk_slab_base(s)) / 64] = q_run[i];
    /* s full again and another current: one block freed makes it partial, and the rest,
     * freed in the order made, empty it. */
    CHECK(fill_past(s, &nfill));
    hak_free(p_run[0]);
    hk_heap_flush();
    CHECKF(s->list == HK_LIST_PARTIAL && s->used == RUN_N - 1, "list %u, used %u", s->list,
           s->used);
    for (int i = 1; i < RUN_N; i++) hak_free(p_run[i]);
    hk_heap_flush();
    CHECKF(s->cls != 3 || (s->used == 0 && s->list != HK_LIST_PARTIAL), "used %u, list %u",
           s->used, s->list);
    for (int i = 0; i < nfill; i++) hak_free(fill_run[i]);
    return (void *)(uintptr_t)ok;
}
TEST(a_walk_home_takes_a_slabs_blocks_in_runs) { CHECK(in_new_thread_walking(walk_runs)); }

/* A walk home frees to full slabs of lists of the thread's own on its first step, and moves
 * them to the partial list at its end (heap.c, HK_LIST_FULL_FREED); those beyond the first
 * HK_WALK_FULL it notes go the one-by-one way. Either way each slab is partial after it, its
 * count exact. FULL_N slabs of 64-byte blocks: a block of each freed and allocated again, so
 * that each list was taken in order (the slab keeps the thread's tag) and each slab is full;
 * then two blocks of each freed, the slabs in turn. */
enum { FULL_N = 40, FULL_PER = 1024 };
static void *full_blk[(FULL_N + 1) * FULL_PER], *full_again[FULL_N];
static void *full_walks(void *arg) {
    (void)arg;
    int ok = 1, n = (FULL_N + 1) * FULL_PER;
    struct hk_slab *slab[FULL_N];
    for (int i = 0; i < n; i++) full_blk[i] = hak_malloc(64);
    for (int k = 0; k < FULL_N; k++) {
        slab[k] = hk_slab_of((uintptr_t)full_blk[k * FULL_PER]);
        for (int i = 0; i < FULL_PER; i++)
            ok &= hk_slab_of((uintptr_t)full_blk[k * FULL_PER + i]) == slab[k];
    }
    CHECKF(ok, "blocks of %d slabs of %d not laid out as expected", FULL_N, FULL_PER);
    for (int k = 0; k < FULL_N; k++) hak_free(full_blk[k * FULL_PER + 5]);
    hk_heap_flush();
    for (int k = 0; k < FULL_N; k++) full_again[k] = hak_malloc(64);
    int full = 0, tagged = 0;
    for (int k = 0; k < FULL_N; k++) {
        full += slab[k]->list == HK_LIST_FULL;
        tagged += hk_list_key(slab[k]) == hk_tls.heap->tag;
    }
    CHECKF(full >= FULL_N - 1 && tagged == FULL_N, "%d of %d slabs full, %d with the tag", full,
           FULL_N, tagged);
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < FULL_N; k++) {
            int i = k * FULL_PER + 100 + j * 600;
            hak_free(full_blk[i]);
            full_blk[i] = NULL;
        }
    hk_heap_flush();
    int bad = 0;
    for (int k = 0; k < FULL_N; k++)
        bad += (slab[k]->list != HK_LIST_PARTIAL && slab[k]->list != HK_LIST_CURRENT) ||
               slab[k]->used != FULL_PER - 2;
    CHECKF(bad == 0, "%d of %d slabs not partial with their count (slab 0: list %u, used %u)",
           bad, FULL_N, slab[0]->list, slab[0]->used);
    for (int k = 0; k < FULL_N; k++) full_blk[k * FULL_PER + 5] = NULL;
    for (int i = 0; i < n; i++) hak_free(full_blk[i]);
    for (int k = 0; k < FULL_N; k++) hak_free(full_again[k]);
    return (void *)(uintptr_t)ok;
}
TEST(a_walk_home_makes_the_full_slabs_it_frees_to_partial) {
    CHECK(in_new_thread_walking(full_walks));
}

/* Blocks another thread freed join the owner's slab list from its inbox: the list is then
 * not the owner's own (list_tag 0), and malloc takes it as it lies, without walking lines that
 * lie in the other core's cache. */
static pthread_barrier_t ord_bar;
static void *order_remote(void *arg) {
    (void)arg;
    int ok = 1;
    for (int i = 0; i < ORD; i++) p_ord[i] = hak_malloc(64);
    struct hk_slab *s = hk_slab_of((uintptr_t)p_ord[0]);
    pthread_barrier_wait(&ord_bar); /* main frees half of them */
    pthread_barrier_wait(&ord_bar);
    hk_heap_flush(); /* applies the inbox */
    ok &= s->free != NULL && s->list_tag == 0 && hk_tls.heap->tag != 0;
    for (int i = 0; i < ORD; i += 2) hak_free(p_ord[i]);
    hk_heap_flush(); /* its own frees join a list that holds the others': still not its own */
    ok &= s->list_tag == 0;
    /* Taken as it lies; the next list of its own frees is in order again, with none of the
     * bits its frees set before the others' joined them. */
    for (int i = 0; i < ORD; i++) p_ord[i] = hak_malloc(64);
    ok &= s->free == NULL && hk_list_key(s) != hk_tls.heap->tag; /* not its own: no tag */
    for (int i = 0; i < ORD; i++) ok &= hk_slab_of((uintptr_t)p_ord[i]) == s;
    for (int i = 0; i < ORD; i++) {
        int k = (i * 149) % ORD;
        if (k % 4) hak_free(p_ord[k]), p_ord[k] = NULL;
    }
    hk_heap_flush();
    ok &= s->list_tag == hk_tls.heap->tag;
    uintptr_t last = 0;
    int rising = 0;
    for (int i = 0; i < ORD; i++) {
        if (p_ord[i]) continue;
        uintptr_t b = (uintptr_t)(p_ord[i] = hak_malloc(64));
        rising += b > last && hk_slab_of(b) == s;
        last = b;
    }
    ok &= rising == ORD - ORD / 4;
    for (int i = 0; i < ORD; i++) hak_free(p_ord[i]);
    return (void *)(uintptr_t)ok;
}
TEST(another_threads_frees_leave_a_slab_list_unordered) {
    pthread_t t;
    void *ok = NULL;
    pthread_barrier_init(&ord_bar, NULL, 2);
    CHECK(pthread_create(&t, NULL, order_remote, NULL) == 0);
    pthread_barrier_wait(&ord_bar);
    for (int i = 1; i < ORD; i += 2) hak_free(p_ord[i]);
    hk_heap_flush(); /* this thread's batch to the owner's inbox */
    pthread_barrier_wait(&ord_bar);
    CHECK(pthread_join(t, &ok) == 0 && ok == (void *)1);
    pthread_barrier_destroy(&ord_bar);
}

/* A thread that allocates and frees a class in waves longer than its room (heap.h, "Reuse";
 * room.c, hk_room_grow) gets a larger room: after a few waves (24 blocks of 8 KiB), a wave's
 * frees all stay in the cache and the next wave's mallocs get exactly those blocks back. One
 * that frees a class without allocating it again (a structure torn down) keeps its first room,
 * the growth of all rooms together stays within its bound, and giving the caches back undoes
 * it. In a new thread, whose rooms have not grown. */
enum { WAVE = 24, WAVE_SIZE = 8192 }; /* a first room of 8 blocks, grown to 32 at most */
_Static_assert(HK_ROOM_GROW_BYTES / WAVE_SIZE >= WAVE, "a wave fits the grown room");
static int in_wave(void *const *w, void *b) {
    for (int i = 0; i < WAVE; i++)
        if (w[i] == b) return 1;
    return 0;
}
static void *room_waves(void *arg) {
    (void)arg;
    static void *w[WAVE], *x[WAVE];
    int ok = 1;
    unsigned c = hk_class_of(WAVE_SIZE), first = hk_heap_room_full(c);
    ok &= first < WAVE && hk_tls.heap->room_grown == 0;
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < WAVE; i++) w[i] = hak_malloc(WAVE_SIZE);
        for (int i = 0; i < WAVE; i++) hak_free(w[i]);
    }
    unsigned held = cache_len(c), same = 0;
    for (int i = 0; i < WAVE; i++) same += in_wave(w, x[i] = hak_malloc(WAVE_SIZE));
    if (held < WAVE || same != WAVE) {
        fprintf(stderr, "  cache %u after a wave of %d, %u of its blocks reused, room %u\n", held,
                WAVE, same, hk_heap_room_full(c));
        ok = 0;
    }
    for (int i = 0; i < WAVE; i++) hak_free(x[i]);
    /* Torn down: allocated once, freed once, never refilled after. */
    unsigned t = hk_class_of(6144);
    for (int i = 0; i < WAVE; i++) w[i] = hak_malloc(6144);
    for (int i = 0; i < WAVE; i++) hak_free(w[i]);
    if (hk_heap_room_full(t) != first) {
        fprintf(stderr, "  torn-down class: room %u\n", hk_heap_room_full(t));
        ok = 0;
    }
    /* Waves in every class of 4 KiB and up: the growth of all rooms stays bounded, and is
     * exactly what each room grew by. */
    enum { MANY = 64 };
    static void *m[MANY];
    for (size_t n = 4096; n <= HK_SMALL_MAX; n += n / 4)
        for (int round = 0; round < 8; round++) {
            for (int i = 0; i < MANY; i++) m[i] = hak_malloc(n);
            for (int i = 0; i < MANY; i++) hak_free(m[i]);
        }
    uint64_t grown = 0;
    for (unsigned k = 0; k < HK_NSMALL; k++) {
        unsigned base = hk_heap_room_full(k);
        if (k >= hk_class_of(4096)) { /* the first room of a class of 4 KiB or more */
            base = HK_ROOM_BYTES / hk_class_size[k];
            base = base < HK_ROOM_MIN ? HK_ROOM_MIN : base;
        }
        grown += (uint64_t)(hk_heap_room_full(k) - base) * hk_class_size[k];
    }
    if (grown != hk_tls.heap->room_grown || grown > HK_ROOM_GROWN_MAX || grown == 0) {
        fprintf(stderr, "  grown %llu, counted %u, bound %u\n", (unsigned long long)grown,
                hk_tls.heap->room_grown, HK_ROOM_GROWN_MAX);
        ok = 0;
    }
    hk_heap_flush();
    ok &= hk_tls.heap->room_grown == 0 && hk_heap_room_full(c) == first;
    return (void *)(intptr_t)ok;
}
TEST(a_room_grows_for_waves_longer_than_it) { CHECK(in_new_thread(room_waves)); }

/* Side lists (heap.c): a thread that frees a class without allocating it frees onto its slabs'
 * side lists, each slab empties at the free of its last block, and a malloc of the class
 * takes the lists back. 64-byte blocks, 12 slabs' worth, freed in a scattered order (a step
 * prime to the count). In new threads, whose classes are not torn down yet. */
enum { SIDE_PER = 1024, SIDE_SLABS = 12, SIDE_N = SIDE_PER * SIDE_SLABS, SIDE_STEP = 7919 };
static void *side_p[SIDE_N];
static struct hk_slab *side_sl[SIDE_N];

static void side_fill(void) {
    for (int i = 0; i < SIDE_N; i++) {
        side_p[i] = hak_malloc(64);
        side_sl[i] = hk_slab_of((uintptr_t)side_p[i]);
    }
}
/* Frees the blocks whose index k has k % keep != 0 (all with keep 0), in the scattered order. */
static void side_free(int keep) {
    unsigned k = 0;
    for (int n = 0; n < SIDE_N; n++) {
        k = (k + SIDE_STEP) % SIDE_N;
        if (keep == 0 || k % (unsigned)keep) {
            hak_free(side_p[k]);
            side_p[k] = NULL;
        }
    }
}
static int side_ptr_cmp(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void *side_reuse(void *arg) {
    (void)arg;
    int ok = 1;
    side_fill();
    side_free(4);
    /* The slabs have side lists now, and each one's live blocks are exactly those not freed. */
    int sided = 0, wrong = 0;
    for (int i = 0; i < SIDE_N; i++) {
        struct hk_slab *s = side_sl[i];
        if (i > 0 && s == side_sl[i - 1]) continue;
        uint32_t live = 0;
        for (int j = 0; j < SIDE_N; j++) live += side_sl[j] == s && side_p[j] != NULL;
        sided += s->side != 0;
        wrong += hk_heap_slab_live(s) != live;
    }
    if (!(hk_counting || sided >= SIDE_SLABS - 1) || wrong) {
        fprintf(stderr, "  %d slabs with side lists, %d with live counts wrong\n", sided, wrong);
        ok = 0;
    }
    /* A live block of a slab whose entry leads to its side list: its size, and a realloc to
     * that size keeps it, as anywhere (the class from the slab's metadata, not the entry). */
    int sized = 0, live = 0;
    for (int i = 0; i < SIDE_N; i++)
        if (side_p[i] && side_sl[i]->side) {
            live++;
            sized += hak_usable_size(side_p[i]) == 64 && hak_realloc(side_p[i], 64) == side_p[i];
        }
    if (sized != live) {
        fprintf(stderr, "  %d of %d live blocks with side lists sized right\n", sized, live);
        ok = 0;
    }
    /* The class allocated again: the side lists go back, and what malloc hands out is what
     * was freed, each block once. */
    static uintptr_t all[SIDE_N];
    int n = 0, outside = 0;
    for (int i = 0; i < SIDE_N; i++)
        if (side_p[i]) all[n++] = (uintptr_t)side_p[i];
    /* In address order within each slab, but for what the cache held (a torn-down room's
     * worth at most): the side lists' blocks got their bits when the lists went back. */
    int falling = 0;
    uintptr_t last = 0;
    while (n < SIDE_N) {
        void *q = hak_malloc(64);
        struct hk_slab *s = hk_slab_of((uintptr_t)q);
        int mine = 0;
        for (int j = 0; j < SIDE_N && !mine; j += SIDE_PER / 2) mine = side_sl[j] == s;
        outside += !mine;
        falling += last && hk_slab_of(last) == s && (uintptr_t)q < last;
        last = (uintptr_t)q;
        all[n++] = (uintptr_t)q;
    }
    if (falling > (int)HK_ROOM_TORN + SIDE_SLABS) {
        fprintf(stderr, "  %d blocks below the one before in their slab\n", falling);
        ok = 0;
    }
    qsort(all, SIDE_N, sizeof all[0], side_ptr_cmp);
    int twice = 0;
    for (int i = 1; i < SIDE_N; i++) twice += all[i] == all[i - 1];
    sided = 0;
    for (int i = 0; i < SIDE_N; i += SIDE_PER / 2) sided += side_sl[i]->side != 0;
    if (twice || outside || sided) {
        fprintf(stderr, "  %d blocks handed out twice, %d from other slabs, %d side lists\n",
                twice, outside, sided);
        ok = 0;
    }
    for (int i = 0; i < SIDE_N; i++) hak_free((void *)all[i]);
    hk_heap_flush();
    for (int i = 0; i < SIDE_N; i += SIDE_PER / 2) ok &= side_sl[i]->side == 0;
    return (void *)(intptr_t)ok;
}
TEST(a_torn_down_class_frees_onto_side_lists_until_it_is_allocated_again) {
    CHECK(in_new_thread(side_reuse));
}

/* malloc_usable_size of a small block is its class's size, whether the thread that asks owns
 * its slab (the class from the slab's table entry, which leads to the class's cache) or not
 * (from the slab's metadata); a realloc to that size keeps the block. In a new thread, which
 * frees by its table. */
static void *usable_of(void *p) { return (void *)(uintptr_t)hak_usable_size(p); }
static void *usable_classes(void *arg) {
    (void)arg;
    int ok = 1;
    for (unsigned c = 0; c < HK_NSMALL; c++) {
        size_t n = hk_class_size[c];
        char *p = hak_malloc(n > 16 ? n - 7 : n);
        void *other;
        pthread_t t;
        if (!p || pthread_create(&t, NULL, usable_of, p) || pthread_join(t, &other)) return NULL;
        size_t own = hak_usable_size(p);
        int kept = hak_realloc(p, n) == p;
        if (own != n || (size_t)(uintptr_t)other != n || !kept) {
            fprintf(stderr, "  class %u: %zu, %zu to another thread, not %zu; realloc %s\n", c,
                    own, (size_t)(uintptr_t)other, n, kept ? "kept it" : "moved it");
            ok = 0;
        }
        hak_free(p);
    }
    return (void *)(intptr_t)ok;
}
TEST(a_small_block_s_usable_size_is_its_class_s_size_to_every_thread) {
    CHECK(in_new_thread(usable_classes));
}

/* A mid block whose span's entries the thread's table holds (a span it reuses): told the
 * block's usable size by the table's entry, the program may fill all of it, and realloc keeps
 * every byte (the block's noted request is forgotten there as on the full path). */
static void *usable_mid(void *arg) {
    (void)arg;
    size_t n = 70000;
    for (int i = 0; i < 4; i++) hak_free(hak_malloc(n)); /* the span is reused: admitted */
    unsigned char *p = hak_malloc(n);
    if (!p || !hk_owned_block(hk_free_entry((uintptr_t)p), p, hk_free_mark())) {
        fprintf(stderr, "  the mid block's span has no entry in the thread's table\n");
        return NULL;
    }
    size_t u = hak_usable_size(p);
    if (u != hk_class_size[hk_mid_class_of(n)]) return NULL;
    for (size_t j = 0; j < u; j++) p[j] = (unsigned char)(j * 7);
    unsigned char *q = hak_realloc(p, 2 * u);
    size_t bad = 0;
    for (size_t j = 0; q && j < u; j++) bad += q[j] != (unsigned char)(j * 7);
    if (!q || bad) {
        fprintf(stderr, "  %zu of the %zu usable bytes lost by realloc\n", bad, u);
        return NULL;
    }
    hak_free(q);
    return (void *)1;
}
TEST(a_mid_block_s_usable_size_from_the_table_lets_realloc_keep_it_whole) {
    CHECK(in_new_thread(usable_mid));
}

/* Frees side_fill's blocks in the scattered order; after lose of them (none with -1), every
 * slab with a side list loses its table entry, as to a slab that took it (the thread's slabs
 * outnumber the table's entries). Whether each slab is no longer in use right after the free
 * of its last block. */
static int side_empty_at_last(int lose) {
    side_fill();
    unsigned c = side_sl[0]->cls;
    /* Each slab's live blocks, counted down as they are freed. */
    enum { SLABS_MAX = SIDE_SLABS + 2 };
    struct hk_slab *sl[SLABS_MAX];
    int live[SLABS_MAX], ns = 0;
    for (int i = 0; i < SIDE_N; i++) {
        int j = 0;
        while (j < ns && sl[j] != side_sl[i]) j++;
        if (j == ns) {
            if (ns == SLABS_MAX) return 0;
            sl[ns] = side_sl[i], live[ns++] = 0;
        }
        live[j]++;
    }
    /* Freed in the scattered order: a slab that is not current is no longer in use right
     * after the free of its last block (a cache would keep it until its next walk home). */
    int late = 0, emptied = 0, lost = 0;
    unsigned k = 0;
    for (int n = 0; n < SIDE_N; n++) {
        if (n == lose)
            for (int j = 0; j < ns; j++)
                if (sl[j]->side && live[j] > 0) {
                    hk_owned_clear(hk_tls.heap, sl[j]);
                    lost++;
                }
        k = (k + SIDE_STEP) % SIDE_N;
        hak_free(side_p[k]);
        int j = 0;
        while (sl[j] != side_sl[k]) j++;
        if (--live[j] > 0) continue;
        struct hk_slab *s = sl[j];
        emptied++;
        late += s->cls == c && s->state == HK_SLOT_ACTIVE && s->list != HK_LIST_RETAINED &&
                hk_tls.heap->cur[c] != s;
    }
    if ((late && !hk_counting) || emptied != ns || (lose >= 0 && !lost && !hk_counting)) {
        fprintf(stderr, "  %d of %d slabs still in use after their last free (%d lost entries)\n",
                late, emptied, lost);
        return 0;
    }
    return 1;
}
static void *side_empties(void *arg) {
    (void)arg;
    return (void *)(intptr_t)side_empty_at_last(-1);
}
TEST(a_slab_on_a_side_list_empties_at_its_last_free) { CHECK(in_new_thread(side_empties)); }

/* A free of a slab with a side list whose table entry another slab holds takes the slow path:
 * the block goes onto the side list all the same, and the slab takes the entry back. Sent to
 * the slab's own list, it left the list's count above 0, and the slab, its other blocks all
 * on the list, stayed in use until the class was allocated again. After a room's worth of
 * frees (the class torn down, its slabs with side lists), every slab's entry is lost. */
static void *side_entry_lost(void *arg) {
    (void)arg;
    return (void *)(intptr_t)side_empty_at_last(2 * (int)(HK_ROOM_BYTES / 64));
}
TEST(a_slab_on_a_side_list_empties_when_its_table_entry_was_lost) {
    CHECK(in_new_thread(side_entry_lost));
}

/* A thread that exits with blocks on side lists gives them back: once another thread has freed
 * the rest, every slab goes back. */
static void *side_exits(void *arg) {
    (void)arg;
    side_fill();
    side_free(4);
    return (void *)1;
}
TEST(a_thread_that_exits_gives_its_side_lists_back) {
    struct hak_stats a, b;
    hak_trim();
    hak_stats_get(&a);
    CHECK(in_new_thread(side_exits));
    for (int i = 0; i < SIDE_N; i++) hak_free(side_p[i]);
    hak_trim();
    hak_stats_get(&b);
    CHECKF(b.slabs_active_now <= a.slabs_active_now, "active slabs %zu, %zu before",
           b.slabs_active_now, a.slabs_active_now);
}
#endif

#ifndef HK_HARDENED
/* A thread that mallocs and frees the same mid block in turn keeps it for its next malloc of
 * the class, once it has shown that it allocates the class again after a free: no span goes
 * to the pool and comes back. A block it frees once, and then waits, goes to its span. It
 * keeps a block of each class it frees while they come to 1 MiB at most (heap.c,
 * HK_MID_KEEP_BYTES): a free beyond sends the others home, where their spans empty, and so
 * does a large block, which the spans' SuperSlabs may serve. */
static int mid_kept_as(void *p, int kept) {
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
    unsigned c = s->cls;
    int is = hk_tls.heap->cur[c] == s && s->used == 1 && cache_len(c) == 1 &&
             hk_tls.heap->free[c] == p;
    int home = hk_tls.heap->cur[c] != s && cache_len(c) == 0;
    CHECKF(kept ? is : home, "block of %u bytes: used %u, cached %u, current %d, expected %s",
           hk_class_size[c], s->used, cache_len(c), hk_tls.heap->cur[c] == s,
           kept ? "kept" : "home");
    return kept ? is : home;
}

/* A malloc and a free of n bytes, twice: the second free keeps the block. */
static void *mid_pairs(size_t n) {
    void *p = hak_malloc(n);
    hak_free(p);
    p = hak_malloc(n);
    hak_free(p);
    return p;
}

static void *mid_kept(void *arg) {
    (void)arg;
    enum { PAIRS = 100 };
    void *once = hak_malloc(200000);
    hak_free(once);
    int ok = mid_kept_as(once, 0); /* freed once: no reuse shown yet */
    void *p = mid_pairs(200000);
    struct hak_stats a, b;
    hak_stats_get(&a);
    int same = 0;
    for (int i = 0; i < PAIRS; i++) {
        void *q = hak_malloc(200000);
        same += q == p;
        hak_free(q);
    }
    hak_stats_get(&b);
    int stayed = b.slab_release == a.slab_release && b.acquire_stage1 == a.acquire_stage1 &&
                 b.acquire_stage2 == a.acquire_stage2;
    CHECKF(same == PAIRS, "%d of %d mallocs took the block back", same, PAIRS);
    CHECKF(stayed, "slabs released %zu, acquired %zu + %zu meanwhile",
           b.slab_release - a.slab_release, b.acquire_stage1 - a.acquire_stage1,
           b.acquire_stage2 - a.acquire_stage2);
    ok &= same == PAIRS && stayed && mid_kept_as(p, 1);
    void *r = mid_pairs(100000); /* with p, within 1 MiB */
    ok &= mid_kept_as(p, 1) & mid_kept_as(r, 1);
    void *t = mid_pairs(900000); /* beyond it: the others go home */
    ok &= mid_kept_as(p, 0) & mid_kept_as(r, 0) & mid_kept_as(t, 1);
    void *big = hak_malloc(4 << 20);
    ok &= mid_kept_as(t, 0);
    hak_free(big);
    return (void *)(uintptr_t)ok;
}

TEST(a_mid_block_freed_is_kept_for_the_next_malloc) { CHECK(in_new_thread(mid_kept)); }

/* A thread that lives on a kept mid block refills nothing, and its tick comes all the same
 * (heap.c, HK_MID_KEPT_TICK): a small class it freed blocks of and then left idle gives its
 * cache back. (The tick sends the kept block home too, its class having refilled nothing: a
 * span from the pool a tick.) */
static void *mid_kept_ticks(void *arg) {
    (void)arg;
    void *small[32];
    for (int i = 0; i < 32; i++) small[i] = hak_malloc(64);
    for (int i = 0; i < 32; i++) hak_free(small[i]);
    unsigned c = hk_slab_of((uintptr_t)small[0])->cls;
    unsigned before = cache_len(c);
    mid_pairs(200000);
    struct hak_stats a, b;
    hak_stats_get(&a);
    uint64_t t0 = hk_now_ms();
    long pairs = 0;
    while (cache_len(c) != 0 && hk_now_ms() - t0 < 2000)
        for (int i = 0; i < 1000; i++, pairs++) hak_free(hak_malloc(200000));
    hak_stats_get(&b);
    /* The pairs took the kept block: a span a tick at most (one each 10 ms at the most) came
     * from the pool. */
    uint64_t ms = hk_now_ms() - t0;
    size_t spans = (b.acquire_stage1 - a.acquire_stage1) + (b.acquire_stage2 - a.acquire_stage2);
    int ok = before > 0 && cache_len(c) == 0 && spans <= ms / 10 + 2;
    CHECKF(ok, "%u blocks of %u bytes cached before, %u after %ld mid pairs in %llu ms; spans "
               "acquired %zu", before, hk_class_size[c], cache_len(c), pairs,
           (unsigned long long)ms, spans);
    return (void *)(uintptr_t)ok;
}

TEST(a_thread_living_on_a_kept_mid_block_ticks) { CHECK(in_new_thread(mid_kept_ticks)); }

/* Once a thread has shown reuse of a mid class, the slots of its current span have entries in
 * its owned-slab table, and free's fast path keeps its blocks there (owned.h,
 * hk_owned_admits): each such free takes 1 from the class's room, where the slow path's keep
 * takes none. A run of frees that fills the room sends the cache home: it holds less than a
 * full room. Only for the classes whose multiply is exact (size_class.h, hk_mul_exact). */
static void *mid_fast(void *arg) {
    (void)arg;
    enum { N = 12 };
    hak_trim(); /* no resident free large memory, which 300 KB blocks would borrow (malloc.c) */
    size_t n = 100000;
    void *p = mid_pairs(n);
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
    unsigned c = s->cls;
    int entry = hk_heap_has_entry(s);
    intptr_t before = hk_tls.heap->room[c];
    void *q = hak_malloc(n);
    hak_free(q);
    intptr_t after = hk_tls.heap->room[c];
    CHECKF(entry && q == p && after == before - 1,
           "span's entry %d, block back %d, room %ld -> %ld", entry, q == p, (long)before,
           (long)after);
    int ok = entry && q == p && after == before - 1;
    void *v[N];
    for (int i = 0; i < N; i++) v[i] = hak_malloc(n);
    for (int i = 0; i < N; i++) hak_free(v[i]);
    unsigned full = hk_heap_room_full(c), held = cache_len(c);
    CHECKF(held < full, "%u blocks cached, full room %u", held, full);
    ok &= held < full;
    /* A class whose multiply is not exact far from the span (size_class.h, hk_mul_exact)
     * gets no entry: its frees take the slow path, which validates them in full. */
    void *b = mid_pairs(300000);
    struct hk_slab *bs = hk_slab_of((uintptr_t)b);
    int none = !hk_mul_exact(hk_class_mul[bs->cls], bs->bsize) && !hk_heap_has_entry(bs) &&
               hk_tls.heap->cur[bs->cls] == bs;
    CHECKF(none, "a span of %u-byte blocks: entry %d", bs->bsize, hk_heap_has_entry(bs));
    return (void *)(uintptr_t)(ok && none);
}

TEST(a_threads_own_mid_blocks_take_the_fast_path_after_reuse) { CHECK(in_new_thread(mid_fast)); }

/* A request to the large tier sends home what free's fast path cached of a mid class, even
 * where the class's keep mark was dropped meanwhile (a slow keep of another class found its
 * cache empty): the blocks' spans may empty, and their SuperSlabs serve the request. */
static void *mid_fast_home(void *arg) {
    (void)arg;
    hak_trim(); /* no resident free large memory, which 300 KB blocks would borrow (malloc.c) */
    size_t n = 100000;
    void *p = mid_pairs(n);
    unsigned c = hk_slab_of((uintptr_t)p)->cls;
    void *a = hak_malloc(n);               /* the cache of c is empty now */
    mid_pairs(300000);                     /* a slow keep of another class */
    int forgot = !(hk_tls.heap->mid_kept >> c & 1);
    hak_free(a);                           /* free's fast path caches it */
    unsigned before = cache_len(c);
    void *big = hak_malloc(4 << 20);
    unsigned after = cache_len(c);
    hak_free(big);
    CHECKF(forgot && before == 1 && after == 0,
           "keep mark dropped %d; cached %u before the large request, %u after", forgot, before,
           after);
    return (void *)(uintptr_t)(forgot && before == 1 && after == 0);
}

TEST(a_large_request_sends_home_what_free_cached_of_mid_classes) {
    CHECK(in_new_thread(mid_fast_home));
}
#endif

/* A cache sent home in one walk frees into every slab of the thread's that its blocks are of
 * (heap.c, hk_heap_cache_send): here 48 slabs, each waiting for its last block, empty at once,
 * more than the walk deals with itself (the rest take the path one block at a time). Each is
 * then empty and kept or given to the pool, and none stays active after a trim. */
TEST(a_cache_walk_empties_many_slabs_at_once) {
    enum { PER = 512, SLABS = 48, N = SLABS * PER }; /* 128-byte blocks */
    void **p = hak_malloc(N * sizeof *p);
    struct hak_stats a, b;
    hak_trim();
    hak_stats_get(&a);
    for (int i = 0; i < N; i++) p[i] = hak_malloc(128);
    /* All but the first block of each slab, slab after slab in turn. */
    for (int k = 1; k < PER; k++)
        for (int j = 0; j < SLABS; j++) hak_free(p[j * PER + k]);
    hk_heap_flush();
    int ok = 1;
    for (int j = 0; j < SLABS && ok; j++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)p[j * PER]);
        ok = hk_heap_slab_live(s) == (s == hk_slab_of((uintptr_t)p[j * PER + 1]) ? 1u : 0u);
        if (!ok) fprintf(stderr, "  slab %d: live %u\n", j, hk_heap_slab_live(s));
    }
    CHECK(ok);
    /* The last block of each: into the cache (room for 256), then home in one walk. */
    for (int j = 0; j < SLABS; j++) hak_free(p[j * PER]);
    unsigned c = hk_slab_of((uintptr_t)p[0])->cls;
    hk_heap_flush();
    unsigned busy = 0;
    for (int j = 0; j < SLABS; j++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)p[j * PER]);
        busy += s->cls == c && s->state == HK_SLOT_ACTIVE && s->list != HK_LIST_RETAINED &&
                hk_tls.heap->cur[c] != s;
    }
    CHECKF(busy == 0, "%u slabs still in use", busy);
    hak_free(p);
    hak_trim();
    hak_stats_get(&b);
    CHECKF(b.slabs_active_now <= a.slabs_active_now, "active slabs %zu, %zu before",
           b.slabs_active_now, a.slabs_active_now);
}

/* A class that sits idle gives back what its cache holds of other slabs than the current
 * one, so that they can empty without a malloc_trim: two ticks of the thread's slow paths
 * (10 ms apart) see it unchanged. */
TEST(an_idle_cache_goes_home) {
    enum { PER = 21, N = 4 * PER }; /* 3 KiB blocks: four slabs, the last one current */
    void *p[N];
    for (int i = 0; i < N; i++) p[i] = hak_malloc(3072);
    struct hk_slab *s = hk_slab_of((uintptr_t)p[0]);
    unsigned c = s->cls;
    for (int i = 0; i < PER; i++) hak_free(p[i]); /* all of the first slab */
#ifndef HK_HARDENED
    CHECKF(hk_heap_slab_live(s) == 0 && s->used > 0 && s->list == HK_LIST_PARTIAL,
           "used %u, list %u: the blocks are not in the cache", s->used, s->list);
#endif
    for (int round = 0; round < 3; round++) {
        usleep(15000);
        /* Refills of another class: a mid class takes one block per refill, so each of these
         * refills, and every 16th reads the clock. */
        for (int i = 0; i < 40; i++) hak_free(hak_malloc(200000));
    }
    CHECKF(s->cls != c || s->list != HK_LIST_PARTIAL, "the slab is still partial (used %u)",
           s->used);
    for (int i = PER; i < N; i++) hak_free(p[i]);
}

TEST(empty_slabs_are_reused_before_mapping) {
    /* Six slabs' worth of 1 KiB blocks: five become empty and not current; the thread keeps
     * some (its soft cap) and gives the rest to the pool. Allocating them again maps nothing. */
    enum { N = 6 * 64 };
    void *p[N];
    struct hak_stats a, b;
    for (int i = 0; i < N; i++) p[i] = hak_malloc(1000);
    for (int i = 0; i < N; i++) hak_free(p[i]);
    hak_stats_get(&a);
    for (int i = 0; i < N; i++) p[i] = hak_malloc(1000);
    hak_stats_get(&b);
    CHECK(b.acquire_stage3_mmap == a.acquire_stage3_mmap);
    CHECK(b.os_mmap == a.os_mmap);
    for (int i = 0; i < N; i++) hak_free(p[i]);
}

TEST(empty_slabs_are_kept_then_trimmed) {
    /* 32 KiB blocks, two per slab: 100 blocks need 50 slabs, more than one SuperSlab. */
    enum { N = 100 };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = hak_malloc(30000);
        memset(p[i], 0xab, 30000);
    }
    struct hak_stats a, b, c;
    hak_stats_get(&a);
    for (int i = 0; i < N; i++) hak_free(p[i]);
    hak_stats_get(&b);
    /* All but the thread's current and kept slabs are EMPTY in the pool (in its fronts, on
     * its lists, or in a cached SuperSlab), resident until the trim. */
    CHECKF(b.pool_empty_bytes_now >= a.pool_empty_bytes_now + 40 * HK_SLAB_SIZE,
           "EMPTY %zu -> %zu", a.pool_empty_bytes_now, b.pool_empty_bytes_now);
    CHECK(b.slabs_active_now < a.slabs_active_now);
    CHECK(hak_trim() == 1);
    hak_stats_get(&c);
    CHECK(c.superslabs_cached_now == 0);
    CHECK(c.pool_empty_bytes_now == 0);
    CHECK(c.os_munmap > b.os_munmap);
    CHECK(c.mapped_bytes_now < b.mapped_bytes_now);
}

TEST(a_superslab_is_one_mapping_where_the_kernel_aligns) {
    /* Where the kernel puts a 2 MiB anonymous mapping on a 2 MiB boundary (Linux 6.7 and
     * later), a new SuperSlab costs one mmap and no munmap; elsewhere the probe says so and
     * only the alignment is checked. */
    void *probe = mmap(NULL, HK_SS_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    CHECK(probe != MAP_FAILED);
    int kernel_aligns = ((uintptr_t)probe & (HK_SS_SIZE - 1)) == 0;
    munmap(probe, HK_SS_SIZE);
    CHECK(hak_trim() >= 0);
    enum { N = 200 };
    void *p[N];
    struct hak_stats a, b;
    hak_stats_get(&a);
    int n = 0;
    do {
        p[n++] = hak_malloc(30000);
        hak_stats_get(&b);
    } while (n < N && b.acquire_stage3_mmap == a.acquire_stage3_mmap);
    CHECKF(b.acquire_stage3_mmap == a.acquire_stage3_mmap + 1, "%d blocks mapped %zu SuperSlabs",
           n, b.acquire_stage3_mmap - a.acquire_stage3_mmap);
    CHECK(((uintptr_t)hk_ss_of((uintptr_t)p[n - 1]) & (HK_SS_SIZE - 1)) == 0);
    if (kernel_aligns) {
        CHECKF(b.os_mmap == a.os_mmap + 1 && b.os_munmap == a.os_munmap,
               "mmap +%zu, munmap +%zu", b.os_mmap - a.os_mmap, b.os_munmap - a.os_munmap);
    } else {
        printf("  (this kernel does not align 2 MiB mappings: the over-map path ran)\n");
    }
    for (int i = 0; i < n; i++) hak_free(p[i]);
}

TEST(large_blocks_grow_without_copying) {
    /* Growing a large block with no free memory at hand moves its pages (mremap) or takes the
     * address space after it: the stats count either, the old pages are what mremap moved or
     * kept, and no more is mapped than the new length and the 2 MiB of slack that new
     * address space is trimmed of (os.c). */
    struct hak_stats a, b;
    size_t n = (size_t)3 << 20;
    char *p = hak_malloc(n);
    memset(p, 7, n);
    hak_stats_get(&a);
    p = hak_realloc(p, (size_t)64 << 20);
    hak_stats_get(&b);
    CHECK(p != NULL && p[0] == 7 && p[n - 1] == 7);
    CHECK(b.large_realloc_in_place + b.large_realloc_mremap ==
          a.large_realloc_in_place + a.large_realloc_mremap + 1);
    CHECKF(b.os_mremap_bytes - a.os_mremap_bytes >= n, "%zu bytes moved or kept",
           b.os_mremap_bytes - a.os_mremap_bytes);
    /* The page map may map a leaf (256 KiB) for the new place, which lies where the kernel
     * put it. */
    CHECKF(b.os_mmap_bytes - a.os_mmap_bytes <= ((size_t)66 << 20) + ((size_t)256 << 10),
           "%zu bytes mapped", b.os_mmap_bytes - a.os_mmap_bytes);
    hak_free(p);
}

/* Calls that change page tables cover one 2 MiB-aligned stretch each (os.c): 6 MiB from 4 KiB
 * past a boundary is 4 calls. A move goes stretch by stretch from the front and, where a
 * stretch would not move, stops there and says how far it got, the rest left in place. */
TEST(os_calls_cover_one_stretch_each) {
    const size_t S = (size_t)2 << 20, n = 3 * S;
    struct hak_stats a, b;
    /* Three mappings: each move goes into one of them, never into the hole a move left
     * (any mapping made meanwhile may have landed there). */
    char *r = hk_os_map(5 * S), *d = hk_os_map(5 * S), *t = hk_os_map(5 * S);
    CHECK(r != NULL && d != NULL && t != NULL);
    char *p = (char *)(((uintptr_t)r + S - 1) & ~(uintptr_t)(S - 1)) + 4096;
    char *q = (char *)(((uintptr_t)d + S - 1) & ~(uintptr_t)(S - 1)) + 4096;
    char *w = (char *)(((uintptr_t)t + S - 1) & ~(uintptr_t)(S - 1)) + 4096;
    memset(p, 5, n);
    hak_stats_get(&a);
    hk_os_release(p, n);
    hak_stats_get(&b);
    CHECKF(b.os_madvise - a.os_madvise == 4, "%zu calls", b.os_madvise - a.os_madvise);
    CHECK(b.os_madvise_bytes - a.os_madvise_bytes == n);
    CHECK(resident_pages(p, n) == 0 && p[0] == 0 && p[n - 1] == 0);
    memset(p, 6, n);
    hak_stats_get(&a);
    size_t moved = hk_os_move(p, n, q);
    hak_stats_get(&b);
    CHECKF(moved == n && b.os_mremap - a.os_mremap == 4, "%zu moved in %zu calls", moved,
           b.os_mremap - a.os_mremap);
    CHECK(q[0] == 6 && q[n / 2] == 6 && q[n - 1] == 6);
    /* A hole inside the source's third stretch: kernels before 6.17 refuse to move a range
     * that is not one mapping, and the move stops at that stretch; later ones move it all. */
    CHECK(munmap(q + 2 * S + S / 2, 4096) == 0);
    moved = hk_os_move(q, n, w);
    CHECKF(moved == 2 * S - 4096 || moved == n, "%zu moved", moved);
    CHECK(w[0] == 6 && w[moved - 1] == 6);
    if (moved < n) { /* the rest is where it was */
        CHECK(q[moved] == 6 && q[n - 1] == 6);
        hk_os_unmap(q + moved, n - moved);
    }
    hk_os_unmap(t, 5 * S);
    hk_os_unmap(d, (size_t)(q - d));
    hk_os_unmap(q + n, (size_t)(d + 5 * S - (q + n)));
    hk_os_unmap(r, (size_t)(p - r));
    hk_os_unmap(p + n, (size_t)(r + 5 * S - (p + n)));
}

/* Whether this kernel fills pages on madvise(MADV_POPULATE_WRITE) (Linux 5.14): where it
 * does not, hakmem makes the call once and then leaves it (os.c). */
static int kernel_populates(void) {
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 0;
    int ok = madvise(m, 4096, 23 /* MADV_POPULATE_WRITE */) == 0 && resident_pages(m, 4096) == 1;
    munmap(m, 4096);
    return ok;
}

/* A slab made of a slot whose pages hold nothing has each carve's pages filled in one call,
 * from the first page the last carve did not touch to the one this one ends in, and no
 * further: the pages past the carved blocks stay untouched (carving stays lazy), and a carve
 * that ends in the page the last one ended in makes no call. Run in a new thread, after a
 * trim has released every EMPTY slab's pages, so that its slab of a class it never used is
 * made of such a slot. */
static void *fresh_carves(void *arg) {
    (void)arg;
    enum { N = 8 + 16 + 32, TINY = 8 + 16 + 32 + 64 + 128 };
    static void *p[N], *t[TINY];
    struct hak_stats a, b;
    int ok = 1;
    hak_stats_get(&a);
    p[0] = hak_malloc(200);
    hak_stats_get(&b);
    struct hk_slab *s = hk_slab_of((uintptr_t)p[0]);
    char *base = hk_slab_base(s);
    size_t end = hk_align_up((size_t)s->carved * s->bsize, 4096);
    ok &= s->fresh && s->carved == 8 && hk_tls.heap->cur[s->cls] == s;
    ok &= b.os_populate == a.os_populate + 1 && b.os_populate_bytes - a.os_populate_bytes == end;
    ok &= resident_pages(base + end, HK_SLAB_SIZE - end) == 0;
    /* The next carves (16 blocks, then 32) each make one call over their own pages. */
    size_t last = s->carved;
    for (unsigned i = 1; i < N; i++) p[i] = hak_malloc(200);
    hak_stats_get(&a);
    size_t from = hk_align_up((size_t)last * s->bsize, 4096);
    end = hk_align_up((size_t)s->carved * s->bsize, 4096);
    ok &= s->carved == N && a.os_populate == b.os_populate + 2;
    ok &= a.os_populate_bytes - b.os_populate_bytes == end - from;
    ok &= resident_pages(base + end, HK_SLAB_SIZE - end) == 0;
    for (unsigned i = 0; i < N; i++) hak_free(p[i]);
    /* Blocks of 16 bytes: five carves (8, 16, 32, 64 and 128 blocks, 3,968 bytes) end in the
     * slab's first page, filled by the first of them alone. */
    hak_stats_get(&a);
    for (unsigned i = 0; i < TINY; i++) t[i] = hak_malloc(16);
    hak_stats_get(&b);
    s = hk_slab_of((uintptr_t)t[0]);
    ok &= s->fresh && s->carved == TINY && s->bsize == 16;
    ok &= b.os_populate == a.os_populate + 1 && b.os_populate_bytes - a.os_populate_bytes == 4096;
    for (unsigned i = 0; i < TINY; i++) hak_free(t[i]);
    return (void *)(uintptr_t)ok;
}

/* Runs fn in a new thread after a trim has released every EMPTY slab's pages (its slots
 * hold nothing again), where the kernel fills pages on request; whether fn returned 1 (1 if
 * skipped). */
static int in_fresh_thread_where_filled(void *(*fn)(void *)) {
    if (!kernel_populates()) {
        printf("  (skipped: this kernel does not take MADV_POPULATE_WRITE)\n");
        return 1;
    }
    hak_trim();
    return in_new_thread(fn);
}

TEST(a_fresh_slab_is_filled_a_carve_at_a_time) {
    CHECK(in_fresh_thread_where_filled(fresh_carves));
}

/* Whether block p's slab, if a fresh one, holds nothing past what it carved: what makes a
 * carve's call worth it (a slab taken back from the pool keeps the pages of its last use, and
 * filling them again would cost a system call for nothing). */
static int fresh_past_carve(void *p) {
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
    if (!s->fresh) return 1;
    size_t end = hk_align_up((size_t)s->carved * s->bsize, 4096);
    return end >= HK_SLAB_SIZE || resident_pages(hk_slab_base(s) + end, HK_SLAB_SIZE - end) == 0;
}

/* Slabs made fresh, emptied into the pool, then taken back: a slab formatted again is not
 * fresh, so no carve of it fills pages that were resident (the second round carves part of a
 * slab the first carved whole). */
static void *reused_carves(void *arg) {
    (void)arg;
    enum { N = 12 * 64, M = 64 + 20 };
    static void *p[N], *q[M];
    int ok = 1;
    for (int i = 0; i < N; i++) p[i] = hak_malloc(1000);
    for (int i = 0; i < N; i++) ok &= fresh_past_carve(p[i]);
    for (int i = 0; i < N; i++) hak_free(p[i]);
    hk_heap_flush();
    hk_heap_trim(); /* the kept ones too: every slab but the current one goes to the pool */
    for (int i = 0; i < M; i++) q[i] = hak_malloc(1000);
    for (int i = 0; i < M; i++) ok &= fresh_past_carve(q[i]);
    for (int i = 0; i < M; i++) hak_free(q[i]);
    return (void *)(uintptr_t)ok;
}

TEST(a_slab_taken_back_is_not_filled) { CHECK(in_new_thread(reused_carves)); }

/* calloc of a block above a page carved from a fresh slab within the call clears only the
 * block's first two words: its other pages stay untouched until the program writes them. The same
 * block, written, freed and asked for again, is cleared in full. In a new thread, after a
 * trim (fresh slots). */
static void *fresh_calloc(void *arg) {
    (void)arg;
    enum { N = 200000 };
    int ok = 1;
    /* A thread's first call takes a heap (maybe an exited thread's, with its note): the
     * calloc comes after it. */
    hak_free(hak_malloc(16));
    unsigned char *p = hak_calloc(1, N);
    ok &= p != NULL && hk_slab_of((uintptr_t)p)->fresh;
    char *page = (char *)(((uintptr_t)p + 4096) & ~(uintptr_t)4095);
    size_t untouched = (size_t)((char *)p + N - page) & ~(size_t)4095;
    ok &= resident_pages(page, untouched) == 0;
    for (size_t i = 0; i < N; i += 509) ok &= p[i] == 0;
    ok &= p[0] == 0 && p[8] == 0 && p[15] == 0 && p[N - 1] == 0;
    memset(p, 0x5a, N);
    hak_free(p);
    unsigned char *q = hak_calloc(1, N);
    ok &= q != NULL;
    for (size_t i = 0; i < N; i++) ok &= q[i] == 0;
    hak_free(q);
    return (void *)(uintptr_t)ok;
}

/* The same for a small class of blocks above a page (20 KiB): a carve writes only their
 * first words. */
static void *fresh_calloc_small(void *arg) {
    (void)arg;
    enum { N = 20000 };
    int ok = 1;
    hak_free(hak_malloc(16)); /* as above */
    unsigned char *p = hak_calloc(1, N);
    struct hk_slab *s = p ? hk_slab_of((uintptr_t)p) : NULL;
    ok &= s != NULL && s->cls < HK_NSMALL && s->fresh;
    char *page = (char *)(((uintptr_t)p + 4096) & ~(uintptr_t)4095);
    ok &= resident_pages(page, (size_t)((char *)p + N - page) & ~(size_t)4095) == 0;
    for (size_t i = 0; i < N && ok; i += 61) ok &= p[i] == 0;
    ok &= p[8] == 0 && p[N - 1] == 0;
    memset(p, 0x5a, N);
    hak_free(p);
    unsigned char *q = hak_calloc(1, N);
    for (size_t i = 0; q && i < N; i++) ok &= q[i] == 0;
    hak_free(q);
    return (void *)(uintptr_t)(ok && q != NULL);
}

/* A thread's first call takes over the heap an exited thread left (heap.c, "Handover"),
 * with the note of that thread's last fresh carve: a block it wrote, freed and left on its
 * slab. A calloc that gets that block back must clear it in full. */
static unsigned char *handover_block;

static void *handover_write(void *arg) {
    (void)arg;
    handover_block = hak_malloc(20000);
    memset(handover_block, 0x5a, 20000);
    hak_free(handover_block);
    return (void *)1;
}

static void *handover_calloc(void *arg) {
    (void)arg;
    unsigned char *q = hak_calloc(1, 20000);
    int ok = q != NULL;
    for (size_t i = 0; ok && i < 20000; i++) ok &= q[i] == 0;
    hak_free(q);
    return (void *)(uintptr_t)ok;
}

TEST(calloc_clears_a_block_an_exited_thread_wrote) {
    hak_trim();
    hk_heap_give_up_all(); /* the next thread takes over the one this test parks */
    CHECK(in_new_thread(handover_write));
    CHECK(in_new_thread(handover_calloc));
}

TEST(calloc_of_a_fresh_mid_block_leaves_its_pages_alone) {
    hak_trim(); /* every EMPTY slab's pages released: its slots hold nothing again */
    CHECK(in_new_thread(fresh_calloc));
    hak_trim();
    CHECK(in_new_thread(fresh_calloc_small));
}

/* realloc that moves a block into a mid block carved from a fresh span within the call fills
 * the pages the copy will write in one call, and no more. In a new thread, after a trim. */
static void *fresh_realloc(void *arg) {
    (void)arg;
    enum { OLD = 40000, NEW = 200000 };
    int ok = 1;
    unsigned char *p = hak_malloc(OLD);
    for (size_t i = 0; i < OLD; i++) p[i] = (unsigned char)(i * 7);
    struct hak_stats a, b;
    hak_stats_get(&a);
    unsigned char *q = hak_realloc(p, NEW);
    hak_stats_get(&b);
    ok &= q != NULL && q != p && hk_slab_of((uintptr_t)q)->fresh;
    for (size_t i = 0; i < OLD && ok; i++) ok &= q[i] == (unsigned char)(i * 7);
    size_t end = hk_align_up((uintptr_t)q + OLD, 4096) - ((uintptr_t)q & ~(uintptr_t)4095);
    ok &= b.os_populate == a.os_populate + 1 && b.os_populate_bytes - a.os_populate_bytes == end;
    char *past = (char *)hk_align_up((uintptr_t)q + OLD, 4096);
    ok &= resident_pages(past, (size_t)((char *)q + NEW - past) & ~(size_t)4095) == 0;
    hak_free(q);
    return (void *)(uintptr_t)ok;
}

TEST(realloc_into_a_fresh_mid_block_fills_what_it_copies) {
    CHECK(in_fresh_thread_where_filled(fresh_realloc));
}

/* realloc copies a mid block's request as noted when it was handed out (superslab.h,
 * hk_mid_req): each block's own, never a neighbour's. In every mid class, blocks asked for
 * with the largest request of the class and the smallest in turn, each filled to its request,
 * then moved by realloc: a note shared with the next block would lose the tail of a large
 * one. */
TEST(realloc_of_mid_blocks_keeps_each_ones_request) {
    enum { NB = 40 };
    unsigned char *b[NB];
    size_t asked[NB];
    int bad = 0;
    for (unsigned c = HK_NSMALL; c < HK_NCLASS; c++) {
        size_t d = hk_class_size[c], low = hk_class_size[c - 1] + 1;
        for (unsigned i = 0; i < NB; i++) {
            asked[i] = i % 2 ? low : d;
            b[i] = hak_malloc(asked[i]);
            for (size_t j = 0; j < asked[i] - 1; j += 512) b[i][j] = (unsigned char)(i + j / 512);
            b[i][asked[i] - 1] = (unsigned char)(0xa5 ^ i);
        }
        for (unsigned i = 0; i < NB; i++) {
            unsigned char *q = hak_realloc(b[i], 2 * d + 4096);
            if (!q) {
                bad++;
                hak_free(b[i]);
                continue;
            }
            for (size_t j = 0; j < asked[i] - 1; j += 512)
                bad += q[j] != (unsigned char)(i + j / 512);
            bad += q[asked[i] - 1] != (unsigned char)(0xa5 ^ i);
            hak_free(q);
        }
    }
    CHECKF(bad == 0, "%d bytes of mid blocks' requests lost by realloc", bad);
}

/* Every slot of a SuperSlab either heads a small slab of one slot or has no small class: free
 * reads the class of a pointer's slot without looking up its slab's head (heap.c,
 * hk_free_by_meta). Small slabs emptied first, then spans of several slots laid over them. */
static void check_slots_of(const void *p, int *bad) {
    const struct hk_superslab *ss = hk_ss_of((uintptr_t)p);
    for (unsigned i = 1; i < HK_SLABS; i++) {
        const struct hk_slab *t = &ss->slabs[i];
        if (t->cls < HK_NSMALL && (t->head != i || t->nslots != 1)) (*bad)++;
    }
}

TEST(a_slot_of_a_span_has_no_small_class) {
    enum { NS = 2048, NM = 24 };
    static void *small[NS], *mid[NM];
    for (int i = 0; i < NS; i++) small[i] = hak_malloc(1000 + (size_t)(i % 7) * 3000);
    for (int i = 0; i < NS; i++) hak_free(small[i]);
    for (int i = 0; i < NM; i++) mid[i] = hak_malloc(200000);
    int bad = 0, spans = 0;
    for (int i = 0; i < NM; i++) {
        spans += hk_slab_of((uintptr_t)mid[i])->nslots > 1;
        check_slots_of(mid[i], &bad);
    }
    for (int i = 0; i < NS; i += 64) check_slots_of(small[i], &bad);
    CHECKF(spans > 0, "no span of several slots");
    CHECKF(bad == 0, "%d slots with a small class head no slab of one slot", bad);
    for (int i = 0; i < NM; i++) hak_free(mid[i]);
}

TEST(pointer_to_slab_is_arithmetic) {
    void *p = hak_malloc(200);
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
    char *base = hk_slab_base(s);
    CHECK((char *)p >= base && (char *)p < base + HK_SLAB_SIZE);
    CHECK(hk_ss_of((uintptr_t)p)->magic == HK_SS_MAGIC);
    CHECK(((uintptr_t)hk_ss_of((uintptr_t)p) & (HK_SS_SIZE - 1)) == 0);
    CHECK(hk_is_superslab((uintptr_t)p));
    int on_stack;
    CHECK(!hk_is_superslab((uintptr_t)&on_stack));
    CHECK(hk_slab_block_index(s, (uintptr_t)p) >= 0);
    CHECK(hk_slab_block_index(s, (uintptr_t)p + 8) < 0);
    hak_free(p);
}

/* malloc's fast path resolves every small size by the thread's class table (heap.h), up to
 * 32 KiB: each size gets the smallest class that fits, in a thread whose first call asks for
 * one above 1 KiB too (where the table stopped before). */
static int fc_first_class, fc_first_want;

static void *fc_first_call_is_big(void *arg) {
    (void)arg;
    void *p = hak_malloc(5000);
    fc_first_class = p ? hk_slab_of((uintptr_t)p)->cls : -1;
    fc_first_want = (int)hk_class_of(5000);
    hak_free(p);
    return NULL;
}

TEST(every_small_size_gets_its_smallest_class) {
    pthread_t t;
    pthread_create(&t, NULL, fc_first_call_is_big, NULL);
    pthread_join(t, NULL);
    CHECKF(fc_first_class == fc_first_want, "class %d, want %d", fc_first_class, fc_first_want);
    for (size_t n = 1; n <= HK_TABLE_MAX; n++) {
        void *p = hak_malloc(n);
        unsigned c = hk_slab_of((uintptr_t)p)->cls;
        CHECKF(c == hk_class_of(n) && hk_class_size[c] >= n, "n=%zu class %u", n, c);
        /* From the table, not the refill that finds the class when the table has none. */
        unsigned t = hk_malloc_class[(n + 15) >> 4];
        CHECKF(hk_counting || t == c, "n=%zu: the table says %u", n, t);
        hak_free(p);
        if (c != hk_class_of(n)) return;
    }
}

int main(void) {
    TEST_MAIN_BEGIN("slab");
    RUN(carving_is_lazy);
    RUN(a_thread_carves_more_as_it_allocates_more);
    RUN(live_counts_exact_after_random_operations);
    RUN(frees_to_slabs_beyond_the_table_are_exact);
    RUN(a_thread_with_many_slabs_gets_a_larger_table);
    RUN(frees_that_miss_the_table_grow_it);
#ifndef HK_HARDENED
    RUN(few_misses_beside_many_hits_leave_the_table);
#endif
    RUN(a_thread_of_one_block_holds_three_pages_of_heap_record);
    RUN(a_grown_table_stays_with_its_record);
    RUN(a_table_used_again_holds_none_of_the_last_threads_slabs);
    RUN(threads_started_together_map_their_records_together);
    RUN(own_frees_are_the_next_blocks);
    RUN(a_cache_grows_by_its_room_at_most);
#ifndef HK_HARDENED
    RUN(a_class_freed_without_reuse_goes_home_in_short_walks);
    RUN(classes_torn_down_together_go_home_together);
    RUN(a_class_torn_down_and_reused_sends_its_last_blocks_home);
    RUN(a_slab_of_the_threads_own_frees_is_handed_out_in_address_order);
    RUN(a_list_taken_in_order_keeps_the_threads_tag);
    RUN(a_walk_home_takes_a_slabs_blocks_in_runs);
    RUN(a_walk_home_makes_the_full_slabs_it_frees_to_partial);
    RUN(another_threads_frees_leave_a_slab_list_unordered);
    RUN(a_room_grows_for_waves_longer_than_it);
    RUN(a_small_block_s_usable_size_is_its_class_s_size_to_every_thread);
    RUN(a_mid_block_s_usable_size_from_the_table_lets_realloc_keep_it_whole);
    RUN(a_torn_down_class_frees_onto_side_lists_until_it_is_allocated_again);
    RUN(a_slab_on_a_side_list_empties_at_its_last_free);
    RUN(a_slab_on_a_side_list_empties_when_its_table_entry_was_lost);
    RUN(a_thread_that_exits_gives_its_side_lists_back);
    RUN(a_mid_block_freed_is_kept_for_the_next_malloc);
    RUN(a_thread_living_on_a_kept_mid_block_ticks);
    RUN(a_threads_own_mid_blocks_take_the_fast_path_after_reuse);
    RUN(a_large_request_sends_home_what_free_cached_of_mid_classes);
#endif
    RUN(a_cache_walk_empties_many_slabs_at_once);
    RUN(an_idle_cache_goes_home);
    RUN(empty_slabs_are_reused_before_mapping);
    RUN(empty_slabs_are_kept_then_trimmed);
    RUN(a_superslab_is_one_mapping_where_the_kernel_aligns);
    RUN(large_blocks_grow_without_copying);
    RUN(os_calls_cover_one_stretch_each);
    RUN(a_fresh_slab_is_filled_a_carve_at_a_time);
    RUN(a_slab_taken_back_is_not_filled);
    RUN(calloc_of_a_fresh_mid_block_leaves_its_pages_alone);
    RUN(calloc_clears_a_block_an_exited_thread_wrote);
    RUN(realloc_into_a_fresh_mid_block_fills_what_it_copies);
    RUN(realloc_of_mid_blocks_keeps_each_ones_request);
    RUN(a_slot_of_a_span_has_no_small_class);
    RUN(pointer_to_slab_is_arithmetic);
    RUN(every_small_size_gets_its_smallest_class);
    TEST_MAIN_END();
}
