/* Threads: remote frees are reclaimed by the owner (in batches, by another thread when the
 * owner is blocked), a thread's slabs outlive it as orphans
 * until freed or adopted, threads created and joined forever keep memory flat, and fork in a
 * threaded program leaves a working allocator on both sides. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "hakmem.h"
#include "heap.h"
#include "owned.h"
#include "room.h"
#include "large.h"
#include "orphan.h"
#include "policy.h"
#include "pool.h"
#include "transfer.h"

static struct hak_stats stats(void) {
    struct hak_stats s;
    hak_stats_get(&s);
    return s;
}

/* --- remote frees ---------------------------------------------------------------------- */
#define NB 20000
static void *blocks[NB];

static void *free_all(void *arg) {
    (void)arg;
    for (int i = 0; i < NB; i++) hak_free(blocks[i]);
    return NULL;
}

TEST(remote_frees_are_reclaimed_by_owner) {
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(64);
    struct hk_slab *first = hk_slab_of((uintptr_t)blocks[0]);
    struct hak_stats a = stats();
    /* This thread waits in the join: its partial slabs stay its own however long the frees
     * take (as an idle owner's let go, the frees after would go to the orphans). */
    hk_heap_hold(HK_HOLD_IDLE);
    pthread_t t;
    pthread_create(&t, NULL, free_all, NULL);
    pthread_join(t, NULL);
    hk_heap_hold(0);
    struct hak_stats b = stats();
    CHECK(b.remote_free >= a.remote_free + NB);
    /* The owner applies them on its next refill: the same memory serves the next round. */
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(64);
    struct hak_stats c = stats();
    CHECK(c.acquire_stage3_mmap == b.acquire_stage3_mmap);
    /* Against the count before the frees: where a helper applied them (the frees took longer
     * than HK_HELP_MS), the slabs they emptied went to the pool meanwhile, to come back now. */
    CHECKF(c.slabs_active_now <= a.slabs_active_now, "active slabs %zu, before the frees %zu",
           c.slabs_active_now, a.slabs_active_now);
    CHECK(first->state == HK_SLOT_ACTIVE);
    for (int i = 0; i < NB; i++) hak_free(blocks[i]);
}

/* --- batches and idle owners ------------------------------------------------------------ */
#define NB_SMALL 5
static void *few[2 * NB_SMALL];

static void *free_few_and_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < NB_SMALL; i++) hak_free(few[i]); /* fewer than a batch: they wait */
    return NULL;
}

TEST(thread_exit_hands_over_its_waiting_batches) {
    for (int i = 0; i < 2 * NB_SMALL; i++) few[i] = hak_malloc(208);
    struct hk_slab *s = hk_slab_of((uintptr_t)few[0]);
    CHECK(hk_heap_slab_live(s) >= 2 * NB_SMALL);
    uint32_t before = hk_heap_slab_live(s);
    pthread_t t;
    pthread_create(&t, NULL, free_few_and_exit, NULL);
    pthread_join(t, NULL);
    /* A refill (of a class not used before) applies the inbox. */
    void *x = hak_malloc(20000);
    CHECKF(hk_heap_slab_live(s) == before - NB_SMALL, "live %u, expected %u",
           hk_heap_slab_live(s), before - NB_SMALL);
    hak_free(x);
    for (int i = NB_SMALL; i < 2 * NB_SMALL; i++) hak_free(few[i]);
}

/* A thread frees blocks of an exited thread's slab (an orphan): they wait in its orphan
 * batch. Meanwhile another thread adopts the slab. When the first thread exits, its batch
 * finds the slab owned again, and the blocks must travel on to the new owner, not be left in
 * the exiting thread's batches. */
enum { OB_N = 20, OB_K = 10, OB_M = 8, OB_SIZE = 2560 }; /* 25 blocks of 2560 B to a slab */
static void *ob_blocks[OB_N];
static int ob_ready[2], ob_go[2];

static void *ob_alloc_free_half_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < OB_N; i++) ob_blocks[i] = hak_malloc(OB_SIZE);
    for (int i = 0; i < OB_K; i++) hak_free(ob_blocks[i]); /* the slab keeps free blocks */
    return NULL;
}

static void *ob_free_some_then_wait(void *arg) {
    (void)arg;
    for (int i = OB_K; i < OB_K + OB_M; i++) hak_free(ob_blocks[i]); /* fewer than a batch */
    char c = 0;
    if (write(ob_ready[1], &c, 1) != 1 || read(ob_go[0], &c, 1) != 1) return NULL;
    return NULL; /* exit: the batch goes now */
}

/* Runs fn(arg) in a thread to its exit, then gives its heap up: its slabs with live blocks are
 * orphans, not a heap the next thread takes over. */
static void run_to_orphans(void *(*fn)(void *), void *arg) {
    pthread_t t;
    pthread_create(&t, NULL, fn, arg);
    pthread_join(t, NULL);
    hk_heap_give_up_all();
}

TEST(orphan_blocks_adopted_meanwhile_reach_the_new_owner) {
    CHECK(pipe(ob_ready) == 0 && pipe(ob_go) == 0);
    pthread_t b;
    run_to_orphans(ob_alloc_free_half_exit, NULL);
    struct hk_slab *s = hk_slab_of((uintptr_t)ob_blocks[OB_K]);
    CHECKF(hk_heap_slab_live(s) == OB_N - OB_K, "live %u", hk_heap_slab_live(s));
    pthread_create(&b, NULL, ob_free_some_then_wait, NULL);
    char c = 0;
    CHECK(read(ob_ready[0], &c, 1) == 1);
    /* This thread's first block of the class adopts the orphan, which has free blocks. */
    struct hak_stats st0 = stats();
    void *x = hak_malloc(OB_SIZE);
    struct hak_stats st1 = stats();
    CHECKF(hk_slab_of((uintptr_t)x) == s && st1.slab_adopt > st0.slab_adopt,
           "adopted %zu", st1.slab_adopt - st0.slab_adopt);
    CHECK(write(ob_go[1], &c, 1) == 1);
    pthread_join(b, NULL);
    /* A refill (of a class not used before) applies this thread's inbox. */
    void *y = hak_malloc(24000);
    CHECKF(hk_heap_slab_live(s) == OB_N - OB_K - OB_M + 1, "live %u, expected %d",
           hk_heap_slab_live(s), OB_N - OB_K - OB_M + 1);
    hak_free(y);
    hak_free(x);
    for (int i = OB_K + OB_M; i < OB_N; i++) hak_free(ob_blocks[i]);
    close(ob_ready[0]), close(ob_ready[1]), close(ob_go[0]), close(ob_go[1]);
}

/* A thread that only frees (a consumer that never allocates) batches its remote frees too:
 * fewer than a batch wait in it, and go at its exit. */
enum { CB_N = 12 };
static void *cb_blocks[CB_N];
static int cb_ready[2], cb_go[2];

static void *cb_free_then_wait(void *arg) {
    (void)arg;
    for (int i = 0; i < CB_N; i++) hak_free(cb_blocks[i]);
    char c = 0;
    if (write(cb_ready[1], &c, 1) != 1 || read(cb_go[0], &c, 1) != 1) return NULL;
    return NULL;
}

TEST(a_thread_that_only_frees_batches_them) {
    CHECK(pipe(cb_ready) == 0 && pipe(cb_go) == 0);
    for (int i = 0; i < CB_N; i++) cb_blocks[i] = hak_malloc(176);
    struct hk_slab *s = hk_slab_of((uintptr_t)cb_blocks[0]);
    uint32_t before = hk_heap_slab_live(s);
    pthread_t t;
    pthread_create(&t, NULL, cb_free_then_wait, NULL);
    char c = 0;
    CHECK(read(cb_ready[0], &c, 1) == 1);
    void *x = hak_malloc(5000); /* a refill (a class not used before): applies the inbox */
    CHECKF(hk_heap_slab_live(s) == before, "live %u, %u before: the frees did not wait",
           hk_heap_slab_live(s), before);
    CHECK(write(cb_go[1], &c, 1) == 1);
    pthread_join(t, NULL);
    void *y = hak_malloc(6000); /* another one */
    CHECKF(hk_heap_slab_live(s) == before - CB_N, "live %u, expected %u", hk_heap_slab_live(s),
           before - CB_N);
    hak_free(y);
    hak_free(x);
    close(cb_ready[0]), close(cb_ready[1]), close(cb_go[0]), close(cb_go[1]);
}

/* Whether hakmem can apply an idle owner's inbox here (heap.c: not under ThreadSanitizer). */
static int membarrier_available(void) {
#if defined(__SANITIZE_THREAD__)
    return 0;
#endif
    long r = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return r > 0 && (r & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* Other activity until a helper has applied an inbox (at most 2 s): this thread's slow paths
 * run the scan for idle owners. Returns the stats then. */
/* A wave of 4 KiB blocks longer than any room can grow (heap.h, HK_ROOM_GROW_BYTES): its
 * mallocs refill, the slow path that runs the thread's tick. */
#define SLOW_WAVE ((int)(2 * HK_ROOM_GROW_BYTES / 4096))

static struct hak_stats await_help(struct hak_stats a) {
    struct hak_stats b = stats();
    for (int round = 0; round < 400 && b.inbox_helps == a.inbox_helps; round++) {
        void *v[SLOW_WAVE];
        for (int i = 0; i < SLOW_WAVE; i++) v[i] = hak_malloc(4096);
        for (int i = 0; i < SLOW_WAVE; i++) hak_free(v[i]);
        usleep(5000);
        b = stats();
    }
    return b;
}

/* Starts owner thread fn, which writes to ready[1] once it has allocated and then blocks
 * reading go[0], and waits for that write. 0 where a blocked owner's inbox is never applied by
 * others (no membarrier): nothing to check then. */
static int start_blocked_owner(void *(*fn)(void *), int ready[2], int go[2], pthread_t *owner) {
    if (!membarrier_available()) {
        fprintf(stderr, "  (no membarrier here: inboxes wait for their owners; nothing to check)\n");
        return 0;
    }
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pthread_create(owner, NULL, fn, NULL);
    char ch;
    CHECK(read(ready[0], &ch, 1) == 1);
    return 1;
}

/* Lets the owner of start_blocked_owner go on, joins it and closes the pipes. */
static void release_blocked_owner(pthread_t owner, int ready[2], int go[2]) {
    char ch = 0;
    CHECK(write(go[1], &ch, 1) == 1);
    pthread_join(owner, NULL);
    for (int i = 0; i < 2; i++) close(ready[i]), close(go[i]);
}

static int ready_pipe[2], go_pipe[2]; /* owner to test, test to owner */
static void *alloc_then_block(void *arg) {
    (void)arg;
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(64);
    char c = 0;
    if (write(ready_pipe[1], &c, 1) != 1) return NULL;
    /* Blocked until the test is over: no malloc, no free, no refill. */
    if (read(go_pipe[0], &c, 1) != 1) return NULL;
    return NULL;
}

static void *free_quarter(void *arg) {
    int q = (int)(intptr_t)arg;
    for (int i = q; i < NB; i += 4) hak_free(blocks[i]);
    return NULL;
}

TEST(remote_frees_into_a_blocked_owner_are_applied) {
    pthread_t owner, f[4];
    if (!start_blocked_owner(alloc_then_block, ready_pipe, go_pipe, &owner)) return;
    unsigned c = hk_slab_of((uintptr_t)blocks[0])->cls; /* 64 bytes, or more when hardened */
    struct hak_stats a = stats();
    for (int q = 0; q < 4; q++) pthread_create(&f[q], NULL, free_quarter, (void *)(intptr_t)q);
    for (int q = 0; q < 4; q++) pthread_join(f[q], NULL);
    struct hak_stats b = await_help(a);
    CHECKF(b.inbox_helps > a.inbox_helps, "no inbox applied in 2 s");
    /* The owner's slabs of 64-byte blocks are empty now: all but those it may keep are back
     * in the pool. */
    CHECKF(b.class_slabs_held[c] + 8 < a.class_slabs_held[c], "held %zu, before %zu",
           b.class_slabs_held[c], a.class_slabs_held[c]);
    release_blocked_owner(owner, ready_pipe, go_pipe);
}

/* Frees that keep arriving do not hide a blocked owner: the scan once looked for a lane whose
 * first block had not changed, and one freeing thread that pushed a block every few
 * milliseconds into an idle owner's inbox (mid blocks go one at a time) kept every block of
 * it stranded for as long as it went on. Here the stream goes on for half a second and stops as
 * soon as a help is seen: a help must come while it flows. */
enum { ST_N = 24, ST_SIZE = 40 * 1024 }; /* three spans: little for the pool to take back */
static atomic_int st_helped, st_freed;
static void *st_owner(void *arg) {
    (void)arg;
    for (int i = 0; i < ST_N; i++) blocks[i] = hak_malloc(ST_SIZE);
    char c = 0;
    if (write(ready_pipe[1], &c, 1) != 1) return NULL;
    if (read(go_pipe[0], &c, 1) != 1) return NULL;
    return NULL;
}

static void *st_stream(void *arg) {
    (void)arg;
    int i = 0;
    for (; i < ST_N && !atomic_load(&st_helped); i++) {
        hak_free(blocks[i]);
        usleep(20000);
    }
    atomic_store(&st_freed, i);
    return NULL;
}

TEST(a_blocked_owner_is_helped_while_frees_keep_coming) {
    pthread_t owner, f;
    if (!start_blocked_owner(st_owner, ready_pipe, go_pipe, &owner)) return;
    struct hak_stats a = stats();
    pthread_create(&f, NULL, st_stream, NULL);
    struct hak_stats b = await_help(a);
    atomic_store(&st_helped, 1);
    pthread_join(f, NULL);
    int freed = atomic_load(&st_freed);
    CHECKF(b.inbox_helps > a.inbox_helps, "no inbox applied in 2 s");
    CHECKF(freed < ST_N, "the help came only after the stream ended (%d frees)", freed);
    release_blocked_owner(owner, ready_pipe, go_pipe);
    for (int i = freed; i < ST_N; i++) hak_free(blocks[i]);
}

/* Blocks freed into an owner that stays blocked are not stranded on its slabs: once a helper
 * has applied its inbox and the owner has run no slow path for HK_IDLE_MS, its partial slabs
 * go to the orphans, and another thread's refill adopts one. The owner allocates 64-byte
 * blocks and blocks; a thread that only frees sends all but every 64th home, in bursts or at
 * once (the slabs stay partial); this thread allocates the class until a block of the owner's
 * slabs comes back. Before, none did (larson's main thread held 348 slabs, 98% of them
 * free). */
#ifndef HK_HARDENED /* hardened: the slabs stay (heap.c, hk_heap_help) */
enum { IP_N = NB, IP_KEEP = 64, IP_BURST = 256 }; /* the owner: alloc_then_block */
static atomic_int ip_stop;
static int ip_bursts; /* frees in bursts 5 ms apart, or all at once */

static void *ip_stream(void *arg) {
    (void)arg;
    for (int i = 0; i < IP_N && !atomic_load(&ip_stop); i++) {
        if (ip_bursts && i % IP_BURST == IP_BURST - 1) usleep(5000);
        if (i % IP_KEEP == 0) continue;
        hak_free(blocks[i]);
        blocks[i] = NULL;
    }
    return NULL;
}

static int ip_of_owner(void *p, struct hk_slab *const *own, int n) {
    struct hk_slab *s = hk_slab_of((uintptr_t)p);
    for (int i = 0; i < n; i++)
        if (own[i] == s) return 1;
    return 0;
}

static void idle_owner_serves(int bursts) {
    pthread_t owner, f;
    ip_bursts = bursts;
    if (!start_blocked_owner(alloc_then_block, ready_pipe, go_pipe, &owner)) return;
    static struct hk_slab *own[IP_N / 64 + 8];
    int nown = 0;
    for (int i = 0; i < IP_N; i++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)blocks[i]);
        if (nown == 0 || own[nown - 1] != s) own[nown++] = s;
    }
    atomic_store(&ip_stop, 0);
    pthread_create(&f, NULL, ip_stream, NULL);
    enum { ROUNDS = 400, PER = 512 };
    static void *mine[ROUNDS * PER];
    int n = 0, found = 0;
    for (int round = 0; round < ROUNDS && !found; round++) {
        for (int i = 0; i < PER; i++) {
            mine[n] = hak_malloc(64);
            found |= ip_of_owner(mine[n++], own, nown);
        }
        void *v[SLOW_WAVE]; /* refills, which run this thread's tick and the scan */
        for (int i = 0; i < SLOW_WAVE; i++) v[i] = hak_malloc(4096);
        for (int i = 0; i < SLOW_WAVE; i++) hak_free(v[i]);
        usleep(5000);
    }
    atomic_store(&ip_stop, 1);
    pthread_join(f, NULL);
    CHECKF(found, "none of %d blocks came from the blocked owner's %d slabs", n, nown);
    for (int i = 0; i < n; i++) hak_free(mine[i]);
    release_blocked_owner(owner, ready_pipe, go_pipe);
    for (int i = 0; i < IP_N; i++) hak_free(blocks[i]);
}

TEST(an_idle_owners_partial_slabs_serve_other_threads) { idle_owner_serves(1); }
/* One burst, then nothing: the owner was helped once, and stays idle. */
TEST(an_owner_idle_after_one_burst_lets_its_slabs_go) { idle_owner_serves(0); }
#endif

/* A thread that only frees exited threads' blocks never refills, so its inbox waits and other
 * threads help it: hk_heap_help applies its inbox and flushes its batches, its orphans' batch
 * too, while it goes on adding to that batch. Every block must still come back exactly (a
 * block lost keeps its slab active; one applied twice is reported as a double free). */
enum { HO_OWN = 20000, HO_ORPH = 50000, HO_ROUNDS = 40, HO_MAX_ROUNDS = 2000 };
static void *ho_own[HO_OWN], *ho_orph[HO_ORPH];
static atomic_int ho_ready, ho_made, ho_freed, ho_last, ho_remote_n, ho_remote_done;

static void *ho_make_orphans(void *arg) {
    (void)arg;
    for (int i = 0; i < HO_ORPH; i++) ho_orph[i] = hak_malloc(64);
    return NULL; /* exits: every block is an orphan's */
}

/* Frees each round's orphans as fast as it can; never allocates after its first blocks. */
static void *ho_freer(void *arg) {
    (void)arg;
    for (int i = 0; i < HO_OWN; i++) ho_own[i] = hak_malloc(96);
    atomic_store(&ho_ready, 1);
    for (int round = 1;; round++) {
        while (atomic_load(&ho_made) < round && !atomic_load(&ho_last)) usleep(50);
        if (atomic_load(&ho_made) < round) break; /* the rounds are over */
        for (int i = 0; i < HO_ORPH; i++) hak_free(ho_orph[i]);
        atomic_store(&ho_freed, round);
    }
    while (!atomic_load(&ho_remote_done)) usleep(1000);
    return NULL;
}

static void *ho_remote(void *arg) {
    (void)arg;
    int i = 0;
    for (; i < HO_OWN && !atomic_load(&ho_last); i++) {
        hak_free(ho_own[i]); /* into the freer's inbox */
        if (i % 20 == 19) usleep(100);
    }
    atomic_store(&ho_remote_n, i);
    atomic_store(&ho_remote_done, 1);
    return NULL;
}

/* At least HO_ROUNDS rounds, and on until a help has come (how soon one comes is a matter of
 * timing: on a busy machine 40 rounds once passed without one). */
TEST(a_thread_freeing_orphans_while_helped_loses_nothing) {
    if (!membarrier_available()) {
        fprintf(stderr, "  (no membarrier here: inboxes wait for their owners; nothing to check)\n");
        return;
    }
    hk_heap_trim();
    struct hak_stats a = stats();
    pthread_t maker, freer, remote;
    pthread_create(&freer, NULL, ho_freer, NULL);
    while (!atomic_load(&ho_ready)) usleep(100);
    pthread_create(&remote, NULL, ho_remote, NULL);
    int round = 1;
    for (;; round++) {
        pthread_create(&maker, NULL, ho_make_orphans, NULL);
        pthread_join(maker, NULL);
        atomic_store(&ho_made, round);
        while (atomic_load(&ho_freed) < round) { /* this thread's slow paths run the scans */
            void *v[SLOW_WAVE];
            for (int i = 0; i < SLOW_WAVE; i++) v[i] = hak_malloc(4096);
            for (int i = 0; i < SLOW_WAVE; i++) hak_free(v[i]);
        }
        if (round >= HO_MAX_ROUNDS ||
            (round >= HO_ROUNDS && stats().inbox_helps > a.inbox_helps))
            break;
    }
    atomic_store(&ho_last, round);
    pthread_join(remote, NULL);
    pthread_join(freer, NULL);
    for (int i = atomic_load(&ho_remote_n); i < HO_OWN; i++) hak_free(ho_own[i]);
    /* A trim: this thread, which takes in the heaps whose blocks it frees, keeps empty slabs
     * of a class it allocated in an earlier test; they are empty, not lost. */
    hk_heap_trim();
    struct hak_stats b = stats();
    CHECKF(b.inbox_helps > a.inbox_helps, "no inbox applied in %d rounds", round);
    /* The orphans' class and the freer's own: every slab of them went back. */
    unsigned c64 = hk_class_of(64), c96 = hk_class_of(96);
    CHECKF(b.class_slabs_held[c64] <= a.class_slabs_held[c64] &&
               b.class_slabs_held[c96] <= a.class_slabs_held[c96],
           "slabs held: %zu and %zu, %zu and %zu before", b.class_slabs_held[c64],
           b.class_slabs_held[c96], a.class_slabs_held[c64], a.class_slabs_held[c96]);
}

/* A helper that makes a full slab of a blocked owner partial leaves the owner's table of
 * owned slabs alone (free's fast path reads it without marking the heap busy): the slab keeps
 * the entry it had while full, and the owner's next free to it takes the fast path. (The
 * hardened build gives a full slab no entry; the owner's next free gives it one back.) */
enum { HT_PER = 1024, HT_N = 4 * HT_PER }; /* 64-byte blocks: four slabs */
static int ht_ready[2], ht_go[2];
static int ht_entry_before, ht_entry_after;
static uint32_t ht_live;

static int ht_has_entry(struct hk_slab *s) { return hk_heap_has_entry(s); }

static void *ht_owner(void *arg) {
    (void)arg;
    for (int i = 0; i < HT_N; i++) blocks[i] = hak_malloc(64);
    char c = 0;
    if (write(ht_ready[1], &c, 1) != 1) return NULL;
    if (read(ht_go[0], &c, 1) != 1) return NULL;
    struct hk_slab *s = hk_slab_of((uintptr_t)blocks[0]);
    ht_entry_before = ht_has_entry(s);
    hak_free(blocks[1]);
    ht_entry_after = ht_has_entry(s);
    /* What the other thread left: blocks 2..255 and every 256th, but for blocks[0]. */
    for (int i = 2; i < HT_PER / 4; i++) hak_free(blocks[i]);
    for (int i = 256; i < HT_N; i += 256) hak_free(blocks[i]);
    hk_heap_flush();
    ht_live = hk_heap_slab_live(s); /* blocks[0] only */
    hak_free(blocks[0]);
    return NULL;
}

static void *ht_free_some(void *arg) {
    (void)arg;
    /* Most of the owner's blocks: not the first HT_PER / 4, nor every 256th. */
    for (int i = HT_PER / 4; i < HT_N; i++)
        if (i % 256 != 0) hak_free(blocks[i]);
    return NULL;
}

TEST(a_helper_leaves_the_owned_table_alone) {
    pthread_t owner, f;
    if (!start_blocked_owner(ht_owner, ht_ready, ht_go, &owner)) return;
    /* The owner's partial slabs, and their entries, stay its own however late the help comes
     * (HK_IDLE_MS after the owner's last tick, a helper lets them go). */
    hk_heap_hold(HK_HOLD_IDLE);
    struct hak_stats a = stats();
    pthread_create(&f, NULL, ht_free_some, NULL);
    pthread_join(f, NULL);
    struct hak_stats b = await_help(a);
    CHECKF(b.inbox_helps > a.inbox_helps, "no inbox applied in 2 s");
    release_blocked_owner(owner, ht_ready, ht_go);
    hk_heap_hold(0);
#ifndef HK_HARDENED
    CHECKF(ht_entry_before && ht_entry_after, "entry before the owner's free %d, after %d",
           ht_entry_before, ht_entry_after);
#else
    CHECKF(!ht_entry_before && ht_entry_after, "entry before the owner's free %d, after %d",
           ht_entry_before, ht_entry_after);
#endif
    CHECKF(ht_live == 1, "live %u", ht_live);
}

/* --- reuse of other threads' blocks -------------------------------------------------------- */
#define NREUSE 8
static void *given[NREUSE];
static int reused, next_ok;
static uint32_t live_after;

static void *free_then_allocate(void *arg) {
    (void)arg;
    hak_free(hak_malloc(96)); /* this thread has a heap */
    for (int i = 0; i < NREUSE; i++) hak_free(given[i]);
    /* The stash is the top of the cache: the next mallocs of the class hand the blocks out,
     * last freed first. */
    enum { MAXGOT = 2048 };
    static void *got[MAXGOT];
    int n = 0;
    while (n < MAXGOT && reused < NREUSE) {
        got[n] = hak_malloc(96);
        if (n < NREUSE) next_ok += got[n] == given[NREUSE - 1 - n];
        for (int j = 0; j < NREUSE; j++) reused += got[n] == given[j];
        n++;
    }
    for (int i = 0; i < n; i++) hak_free(got[i]);
    hak_trim(); /* the stash goes home */
    return NULL;
}

TEST(blocks_freed_here_are_reused_here) {
    for (int i = 0; i < NREUSE; i++) given[i] = hak_malloc(96);
    struct hk_slab *s = hk_slab_of((uintptr_t)given[0]);
    uint32_t before = hk_heap_slab_live(s);
    pthread_t t;
    pthread_create(&t, NULL, free_then_allocate, NULL);
    pthread_join(t, NULL);
#ifdef HK_HARDENED
    CHECK(reused == 0); /* no stash in the hardened build: the blocks went home */
#else
    CHECKF(reused == NREUSE, "%d of %d blocks reused", reused, NREUSE);
    CHECKF(next_ok == NREUSE, "%d of %d blocks handed out next", next_ok, NREUSE);
#endif
    /* Whether they came back through the stash or not, the owner's count is exact once it
     * applies its inbox (a refill: of a class whose cache is empty, which earlier tests may
     * have filled for any class). */
    unsigned c = HK_NSMALL;
    while (c-- > 1 && hk_tls.heap->free[c] != NULL) continue;
    void *x = hak_malloc(hk_class_size[c]);
    live_after = hk_heap_slab_live(s);
    CHECKF(live_after + NREUSE <= before, "live %u, %u before", live_after, before);
    hak_free(x);
}

/* Mid blocks too: a thread that frees another live thread's block of a class it allocates keeps
 * it for its next malloc of the class, instead of sending it to an owner that may not run for a
 * while (16 threads on 2 cores, blocks of 64 KiB to 1 MiB: 1.9 GB at the peak, 1.2 with it), as
 * many as the stash may hold of the class (room.h, hk_stash_mid_max); the rest go to the
 * class's transfer list. 40 KiB blocks: 3 (HK_MID_ROOM_BYTES), so the order they come back in
 * is seen too. */
#define MID_REUSE 4
#define MID_SIZE (40 * 1024)
static void *mid_given[MID_REUSE];
static int mid_next_ok, mid_kept;

static void *mid_free_then_allocate(void *arg) {
    (void)arg;
    void *mine = hak_malloc(MID_SIZE); /* a current span of the class */
#ifndef HK_HARDENED
    mid_kept = (int)hk_stash_mid_max(hk_class_of(MID_SIZE));
    if (mid_kept > MID_REUSE) mid_kept = MID_REUSE;
#endif
    for (int i = 0; i < MID_REUSE; i++) hak_free(mid_given[i]);
    for (int i = 0; i < mid_kept; i++) {
        void *p = hak_malloc(MID_SIZE);
        mid_next_ok += p == mid_given[mid_kept - 1 - i];
        mid_given[mid_kept - 1 - i] = p;
    }
    for (int i = 0; i < mid_kept; i++) hak_free(mid_given[i]);
    hak_free(mine);
    return NULL;
}

TEST(mid_blocks_freed_here_are_reused_here) {
    for (int i = 0; i < MID_REUSE; i++) mid_given[i] = hak_malloc(MID_SIZE);
    struct hk_slab *s = hk_slab_of((uintptr_t)mid_given[0]);
    uint32_t before = hk_heap_slab_live(s);
    pthread_t t;
    pthread_create(&t, NULL, mid_free_then_allocate, NULL);
    pthread_join(t, NULL);
#ifdef HK_HARDENED
    CHECK(mid_next_ok == 0); /* no stash in the hardened build: the blocks went home */
#else
    CHECKF(mid_kept >= 2, "a room of %d", mid_kept);
    CHECKF(mid_next_ok == mid_kept, "%d of %d blocks handed out next", mid_next_ok, mid_kept);
#endif
    /* The thread's exit sent them home or onto their class's transfer list (transfer.h): the
     * owner's count is exact once the flush has taken those home and applied its inbox. */
    hk_heap_flush();
    CHECKF(hk_heap_slab_live(s) + MID_REUSE <= before, "live %u, %u before",
           hk_heap_slab_live(s), before);
}

/* A block of a class with a transfer list (transfer.h) that its freeing thread cannot keep
 * (its stash is full) serves the next refill of its class by any thread, while its owner does
 * not run: here the main thread, blocked in a join, owns 200 blocks; a thread that allocates
 * the class frees them all (its stash takes some) and exits, and a third thread's 50 mallocs
 * of the class get blocks of slabs the main thread still owns. Before transfer lists they
 * waited in its inbox, and a small block (8 KiB here) before they had lists for it. */
enum { XF_N = 200, XF_TAKE = 50 };
static void *xf_given[XF_N];
static struct hk_owner *xf_owner;
static size_t xf_size;
static int xf_theirs;

/* Blocks another thread allocated, for a thread of free_given to free. */
struct given {
    void **blocks;
    int n;
    size_t size;
};

/* A thread that allocates the class of arg's blocks (one block of it, kept throughout) and
 * frees them all, with no malloc between. */
static void *free_given(void *arg) {
    const struct given *g = arg;
    void *mine = hak_malloc(g->size); /* the thread allocates the class */
    for (int i = 0; i < g->n; i++) hak_free(g->blocks[i]);
    hak_free(mine);
    return NULL;
}

static void *xf_allocate(void *arg) {
    (void)arg;
    void *got[XF_TAKE];
    for (int i = 0; i < XF_TAKE; i++) {
        got[i] = hak_malloc(xf_size);
        memset(got[i], 0x5a, xf_size);
        struct hk_slab *s = hk_slab_of((uintptr_t)got[i]);
        xf_theirs += atomic_load_explicit(&s->owner, memory_order_relaxed) == xf_owner;
    }
    for (int i = 0; i < XF_TAKE; i++) hak_free(got[i]);
    return NULL;
}

/* The pattern above for blocks of size bytes: 1 if it went as it should. */
static int xf_serve_every_thread(size_t size) {
    xf_size = size;
    xf_theirs = 0;
    for (int i = 0; i < XF_N; i++) xf_given[i] = hak_malloc(size);
    xf_owner = hk_tls.heap->owner;
    struct hk_slab *s = hk_slab_of((uintptr_t)xf_given[0]);
    pthread_t t;
    struct given g = {xf_given, XF_N, size};
    pthread_create(&t, NULL, free_given, &g);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, xf_allocate, NULL);
    pthread_join(t, NULL);
    int ok = 1;
#ifdef HK_HARDENED
    ok = xf_theirs == 0; /* no transfer lists */
#else
    ok = xf_theirs >= XF_TAKE * 4 / 5;
#endif
    if (!ok) fprintf(stderr, "  %d of %d blocks from the owner's slabs\n", xf_theirs, XF_TAKE);
    /* Nothing waits anywhere once the owner has flushed: its slabs are empty. */
    hk_heap_flush();
    if (hk_heap_slab_live(s) != 0) {
        fprintf(stderr, "  %u blocks of the first slab live\n", hk_heap_slab_live(s));
        ok = 0;
    }
    return ok;
}

TEST(mid_blocks_a_thread_cannot_keep_serve_every_thread) {
    CHECK(xf_serve_every_thread(40 * 1024));
}

TEST(big_small_blocks_a_thread_cannot_keep_serve_every_thread) {
    CHECK(hk_class_of(8192) >= HK_XFER_FIRST && hk_class_of(8192) < HK_NSMALL);
    CHECK(xf_serve_every_thread(8192));
}

/* A thread that frees other threads' mid blocks of a class above 64 KiB keeps none of them in
 * its stash (room.h, hk_stash_mid_max), not 1 MiB of them, nor one: they go
 * to the class's transfer list, where a third thread's mallocs find them while the freeing
 * thread lives on without allocating (what a stash holds is memory no other thread can use:
 * shared_swap_big16 ran 1.12 times as fast, and peaked 14% lower, with a room of 2 blocks of
 * 100 KiB than with 9, and 1.09 times again with 1). */
enum { KEEP_N = 8 };
#define KEEP_SIZE (100 * 1024)
static void *keep_given[KEEP_N];
static atomic_int keep_freed, keep_done;
#ifndef HK_HARDENED
static int keep_room;
#endif

static void *keep_free_and_wait(void *arg) {
    (void)arg;
    void *mine = hak_malloc(KEEP_SIZE); /* the thread allocates the class */
#ifndef HK_HARDENED
    keep_room = (int)hk_stash_mid_max(hk_class_of(KEEP_SIZE));
#endif
    for (int i = 0; i < KEEP_N; i++) hak_free(keep_given[i]);
    atomic_store(&keep_freed, 1);
    while (!atomic_load(&keep_done)) sched_yield();
    hak_free(mine);
    return NULL;
}

static void *keep_allocate(void *arg) {
    int *theirs = arg;
    void *got[KEEP_N];
    for (int i = 0; i < KEEP_N; i++) {
        got[i] = hak_malloc(KEEP_SIZE);
        memset(got[i], 0x5a, KEEP_SIZE);
        struct hk_slab *s = hk_slab_of((uintptr_t)got[i]);
        *theirs += atomic_load_explicit(&s->owner, memory_order_relaxed) == xf_owner;
    }
    for (int i = 0; i < KEEP_N; i++) hak_free(got[i]);
    return NULL;
}

TEST(a_thread_keeps_no_big_mid_blocks_of_other_threads) {
    for (int i = 0; i < KEEP_N; i++) keep_given[i] = hak_malloc(KEEP_SIZE);
    xf_owner = hk_tls.heap->owner;
    struct hk_slab *s = hk_slab_of((uintptr_t)keep_given[0]);
    atomic_store(&keep_freed, 0);
    atomic_store(&keep_done, 0);
    pthread_t t, u;
    pthread_create(&t, NULL, keep_free_and_wait, NULL);
    while (!atomic_load(&keep_freed)) sched_yield();
    int theirs = 0;
    pthread_create(&u, NULL, keep_allocate, &theirs);
    pthread_join(u, NULL);
    atomic_store(&keep_done, 1);
    pthread_join(t, NULL);
#ifdef HK_HARDENED
    CHECK(theirs == 0); /* no stash and no transfer lists: the blocks went home */
#else
    CHECKF(keep_room == 0, "a stash of %d", keep_room);
    CHECKF(theirs >= KEEP_N - 1, "%d of %d blocks from the owner's slabs", theirs, KEEP_N);
#endif
    hk_heap_flush();
    CHECKF(hk_heap_slab_live(s) == 0, "%u blocks of the first slab live", hk_heap_slab_live(s));
}

#ifndef HK_HARDENED /* which puts no block on a transfer list */
/* A refill of a small class with a transfer list takes up to HK_XFER_TAKE_SMALL of its
 * blocks at once and leaves the rest for other threads; a refill of a mid class takes one
 * (transfer.h). A thread of its own refills, so that its cache of the class is empty. */
enum { XT_N = 8 };
static void *xt_blocks[XT_N];
static size_t xt_size;
static int xt_listed; /* the block its malloc returned was one of the list's */
static unsigned xt_left; /* blocks left on the list after its malloc */

/* Frees the blocks of list l (linked, marked free, off every list), as the program's. */
static unsigned xt_free_list(void *l) {
    unsigned n = 0;
    while (l) {
        void *next = hk_link_get(l);
        hk_mark_live(l);
        hak_free(l);
        n++;
        l = next;
    }
    return n;
}

static void *xt_refill(void *arg) {
    (void)arg;
    void *p = hak_malloc(xt_size);
    for (int i = 0; i < XT_N; i++) xt_listed |= p == xt_blocks[i];
    /* What is left on the list, counted and put back as it was. */
    unsigned c = hk_class_of(xt_size);
    void *l = hk_xfer_take(c, XT_N), *tail = l;
    xt_left = 0;
    for (void *x = l; x; x = hk_link_get(x)) xt_left++, tail = x;
    if (l && !hk_xfer_put(c, l, tail, xt_left)) xt_left = 0;
    hak_free(p);
    return NULL; /* its cache, with what else the refill took, goes home at its exit */
}

TEST(a_refill_takes_a_few_blocks_of_a_small_class_from_its_transfer_list) {
    size_t sizes[2] = {3072, 80 * 1024};
    for (int k = 0; k < 2; k++) {
        xt_size = sizes[k];
        unsigned c = hk_class_of(xt_size);
        CHECK(c >= HK_XFER_FIRST);
        CHECK(hk_xfer_take(c, 1) == NULL); /* no other test left blocks there */
        for (int i = 0; i < XT_N; i++) xt_blocks[i] = hak_malloc(xt_size);
        for (int i = 0; i < XT_N; i++) {
            hk_mark_free(xt_blocks[i]);
            CHECK(hk_xfer_put(c, xt_blocks[i], xt_blocks[i], 1));
        }
        xt_listed = 0;
        pthread_t t;
        pthread_create(&t, NULL, xt_refill, NULL);
        pthread_join(t, NULL);
        unsigned want = XT_N - (c < HK_NSMALL ? HK_XFER_TAKE_SMALL : 1);
        CHECK(xt_listed);
        CHECKF(xt_left == want, "%zu bytes: %u blocks left on the list, not %u", xt_size,
               xt_left, want);
        xt_free_list(hk_xfer_take(c, 2 * XT_N)); /* what the thread's exit sent there */
        hk_heap_flush(); /* and home */
    }
}
#endif

/* A transfer list that no refill takes from goes home whole after HK_XFER_IDLE_MS, as the
 * looks at it (each thread's tick, HK_XFER_LOOK_MS apart at least) measure; one that refills
 * take from stays. */
TEST(an_idle_transfer_list_goes_home) {
    void *b[3];
    for (int i = 0; i < 3; i++) b[i] = hak_malloc(48 * 1024); /* a refill takes from the list */
    unsigned c = hk_slab_of((uintptr_t)b[0])->cls; /* the hardened build's guards need room */
    for (int i = 0; i < 3; i++) {
        hk_mark_free(b[i]);
        CHECK(hk_xfer_put(c, b[i], b[i], 1));
    }
    _Static_assert(HK_XFER_LOOK_MS > 2 && HK_XFER_IDLE_MS > HK_XFER_LOOK_MS + 2, "the times");
    uint64_t t0 = hk_now_ms() + 1000; /* after any look the process has made */
    CHECK(hk_xfer_take_idle(t0, 0) == NULL); /* the first look: idle from now on */
    CHECK(hk_xfer_take_idle(t0 + HK_XFER_IDLE_MS - 1, 0) == NULL);
    CHECK(hk_xfer_take(c, 1) == b[2]);
    /* Too soon after the last look: none made, so the take is not seen yet ... */
    CHECK(hk_xfer_take_idle(t0 + HK_XFER_IDLE_MS + 1, 0) == NULL);
    /* ... and this look sees it: taken from since the last look (had the one before looked,
     * the list would be idle for HK_XFER_IDLE_MS + 1 here). */
    CHECK(hk_xfer_take_idle(t0 + 2 * HK_XFER_IDLE_MS + 2, 0) == NULL);
    void *l = hk_xfer_take_idle(t0 + 3 * HK_XFER_IDLE_MS + 3, 0);
    int n = 0, found = 0;
    for (void *x = l; x; x = hk_link_get(x)) n++, found += x == b[0] || x == b[1];
    CHECKF(n == 2 && found == 2, "%d blocks came home, %d of them the list's", n, found);
    CHECK(hk_xfer_take(c, 1) == NULL);
    for (int i = 0; i < 3; i++) {
        hk_mark_live(b[i]);
        hak_free(b[i]);
    }
}

/* A thread whose mallocs and frees of a class balance goes on reusing other threads' blocks:
 * the stash follows what the thread allocates (heap.h, "Reuse"). Counting only the blocks
 * stashed since the last refill stopped after 32 KiB (255 blocks of 64 bytes here). */
enum { BAL_N = 2000 };
static void *bal_given[BAL_N];
static int bal_reused;

static void *bal_free_one_allocate_one(void *arg) {
    (void)arg;
    /* This thread allocates the class, and its cache holds a slab's worth of its own blocks,
     * so that it never runs empty below. */
    static void *own[1024];
    for (int i = 0; i < 1024; i++) own[i] = hak_malloc(64);
    for (int i = 0; i < 1023; i++) hak_free(own[i]);
    void *mine = own[1023];
    for (int i = 0; i < BAL_N; i++) {
        hak_free(bal_given[i]);
        void *q = hak_malloc(64);
        bal_reused += q == bal_given[i];
        bal_given[i] = q;
    }
    for (int i = 0; i < BAL_N; i++) hak_free(bal_given[i]);
    hak_free(mine);
    return NULL;
}

TEST(a_balanced_thread_goes_on_reusing_other_threads_blocks) {
    for (int i = 0; i < BAL_N; i++) bal_given[i] = hak_malloc(64);
    pthread_t t;
    pthread_create(&t, NULL, bal_free_one_allocate_one, NULL);
    pthread_join(t, NULL);
#ifdef HK_HARDENED
    CHECKF(bal_reused == 0, "%d reused", bal_reused); /* no stash: the blocks went home */
#else
    CHECKF(bal_reused == BAL_N, "%d of %d blocks reused where they were freed", bal_reused,
           BAL_N);
#endif
}

/* A thread that allocates a class frees a burst of another live thread's blocks of it, many
 * more than its cache has room for, with no malloc between: its cache takes a room's worth
 * and free's second try sends the rest home in the thread's batches (hk_heap_free_home). Once
 * the thread has exited (its cache goes home too) and the owner has applied its inbox, every
 * block is free in its slab. */
enum { RM_N = 400, RM_SIZE = 1024 }; /* a room of 32 blocks */
static void *rm_blocks[RM_N];

/* Live blocks of the slabs that hold rm_blocks, as this thread sees them. */
static uint32_t rm_live(struct hk_slab **slabs, unsigned n) {
    uint32_t live = 0;
    for (unsigned i = 0; i < n; i++) live += hk_heap_slab_live(slabs[i]);
    return live;
}

TEST(a_burst_of_other_threads_blocks_beyond_the_room_goes_home) {
    static struct hk_slab *slabs[RM_N];
    unsigned ns = 0;
    for (int i = 0; i < RM_N; i++) {
        rm_blocks[i] = hak_malloc(RM_SIZE);
        struct hk_slab *s = hk_slab_of((uintptr_t)rm_blocks[i]);
        unsigned j = 0;
        while (j < ns && slabs[j] != s) j++;
        if (j == ns) slabs[ns++] = s;
    }
    uint32_t before = rm_live(slabs, ns);
    pthread_t t;
    struct given g = {rm_blocks, RM_N, RM_SIZE};
    pthread_create(&t, NULL, free_given, &g);
    pthread_join(t, NULL);
    hk_heap_flush(); /* applies the inbox */
    uint32_t after = rm_live(slabs, ns);
    CHECKF(before - after == RM_N, "%u of %d blocks came home (%u live before, %u after)",
           before - after, RM_N, before, after);
}

/* A thread frees blocks of a slab that this thread adopted from an exited one (data a thread
 * inherits): they go home, not into the freeing thread's stash, where each would stay a block
 * of another thread's slab for the rest of its life (heap.h, "Reuse"). */
enum { AD_N = 12, AD_SIZE = 3584 }; /* one slab, with the hardened build's guards too */
static void *ad_blocks[AD_N + 1];
static int ad_reused;

static void *ad_alloc_free_one_exit(void *arg) {
    (void)arg;
    for (int i = 0; i <= AD_N; i++) ad_blocks[i] = hak_malloc(AD_SIZE);
    hak_free(ad_blocks[0]); /* the orphan has a free block: it can be adopted */
    return NULL;
}

static void *ad_free_then_allocate(void *arg) {
    (void)arg;
    void *mine = hak_malloc(AD_SIZE); /* this thread allocates the class */
    for (int i = 1; i <= AD_N; i++) hak_free(ad_blocks[i]);
    void *got[AD_N];
    for (int i = 0; i < AD_N; i++) {
        got[i] = hak_malloc(AD_SIZE);
        for (int j = 1; j <= AD_N; j++) ad_reused += got[i] == ad_blocks[j];
    }
    for (int i = 0; i < AD_N; i++) hak_free(got[i]);
    hak_free(mine);
    return NULL;
}

TEST(blocks_of_adopted_slabs_go_home) {
    run_to_orphans(ad_alloc_free_one_exit, NULL);
    struct hk_slab *s = hk_slab_of((uintptr_t)ad_blocks[1]);
    void *x = hak_malloc(AD_SIZE); /* this thread's first block of the class adopts the orphan */
    CHECKF(hk_slab_of((uintptr_t)x) == s && s->nostash, "nostash %d", s->nostash);
    pthread_t t;
    pthread_create(&t, NULL, ad_free_then_allocate, NULL);
    pthread_join(t, NULL);
    CHECKF(ad_reused == 0, "%d of %d blocks reused by the freeing thread", ad_reused, AD_N);
    void *y = hak_malloc(26000); /* a refill of a class not used before applies the inbox */
    CHECKF(hk_heap_slab_live(s) == 1, "live %u", hk_heap_slab_live(s));
    hak_free(y);
    hak_free(x);
}

/* A thread that allocates a class frees blocks of an orphan of it (the full slab of an exited
 * thread, which nobody adopts): they go home to the orphan, not into the freeing thread's
 * stash (the second try tests the slab's nostash, set when the owner went). */
enum { OR_SIZE = 3584 };
static void *or_blocks[64];
static unsigned or_n;

static void *or_fill_one_slab_exit(void *arg) {
    (void)arg;
    struct hk_slab *s = NULL;
    for (or_n = 0; or_n < 64; or_n++) {
        or_blocks[or_n] = hak_malloc(OR_SIZE);
        if (!s) s = hk_slab_of((uintptr_t)or_blocks[or_n]);
        if (hk_slab_of((uintptr_t)or_blocks[or_n]) != s) {
            hak_free(or_blocks[or_n]); /* the next slab's: the first one is full */
            break;
        }
    }
    return NULL;
}

TEST(blocks_of_orphans_are_not_stashed) {
    run_to_orphans(or_fill_one_slab_exit, NULL);
    struct hk_slab *s = hk_slab_of((uintptr_t)or_blocks[0]);
    CHECKF(or_n > 4 && or_n < 64 && or_n == s->capacity, "%u blocks, capacity %u", or_n,
           s->capacity);
    CHECKF(atomic_load(&s->owner) == NULL && s->nostash, "owner %p nostash %d",
           (void *)atomic_load(&s->owner), s->nostash);
    void *mine = hak_malloc(OR_SIZE); /* this thread allocates the class (a slab of its own) */
    CHECK(hk_slab_of((uintptr_t)mine) != s);
    for (unsigned i = 0; i < or_n / 2; i++) hak_free(or_blocks[i]);
    void *got[32];
    int reused = 0;
    for (unsigned i = 0; i < or_n / 2; i++) {
        got[i] = hak_malloc(OR_SIZE);
        reused += hk_slab_of((uintptr_t)got[i]) == s;
    }
    CHECKF(reused == 0, "%d of the orphan's %u blocks came back from this thread's cache",
           reused, or_n / 2);
    for (unsigned i = 0; i < or_n / 2; i++) hak_free(got[i]);
    for (unsigned i = or_n / 2; i < or_n; i++) hak_free(or_blocks[i]);
    hak_free(mine);
}

/* --- two ways to free ------------------------------------------------------------------- */
/* A thread whose frees are mostly of other threads' blocks frees by slab metadata, one whose
 * frees are its own again frees by its owned-slab table (heap.h, "Two ways to free"), and
 * nothing is lost either way: every block another thread's cache held goes home. */
enum { TW_N = 20000, TW_MS = 60 };
static void *tw_blocks[TW_N];
static int tw_by_meta_after_others, tw_by_meta_after_own;
static atomic_int tw_bad;

static void *tw_free_others_then_own(void *arg) {
    (void)arg;
    /* The main thread's blocks, each freed and taken back from this thread's cache (the
     * thread allocates the class, so its cache takes them), for at least TW_MS (ticks come at
     * most every 10 ms) and 3 passes (however the machine spaces them): every free is of
     * another thread's slab. */
    void *mine = hak_malloc(64);
    uint64_t t0 = hk_now_ms();
    int passes = 0;
    do {
        for (int i = 0; i < TW_N; i++) {
            if (*(int *)tw_blocks[i] != i) atomic_fetch_add(&tw_bad, 1);
            hak_free(tw_blocks[i]);
            tw_blocks[i] = hak_malloc(64);
            *(int *)tw_blocks[i] = i;
        }
    } while (++passes < 3 || hk_now_ms() - t0 < TW_MS);
    tw_by_meta_after_others = hk_heap_frees_by_meta();
    for (int i = 0; i < TW_N; i++) hak_free(tw_blocks[i]);
    hak_free(mine);
    /* Then blocks of its own slabs (a class it never took another thread's blocks of), as
     * long, and for at least 60 passes. */
    static void *own[1000];
    t0 = hk_now_ms();
    passes = 0;
    do {
        for (int i = 0; i < 1000; i++) own[i] = hak_malloc(256);
        for (int i = 0; i < 1000; i++) hak_free(own[i]);
    } while (++passes < 60 || hk_now_ms() - t0 < TW_MS);
    tw_by_meta_after_own = hk_heap_frees_by_meta();
    return NULL;
}

/* Fills tw_blocks with this thread's blocks, each holding its index, and runs fn on a thread
 * of its own, which frees and replaces them; returns how many it found changed. */
static int tw_run(void *(*fn)(void *)) {
    for (int i = 0; i < TW_N; i++) {
        tw_blocks[i] = hak_malloc(64);
        *(int *)tw_blocks[i] = i;
    }
    pthread_t t;
    pthread_create(&t, NULL, fn, NULL);
    pthread_join(t, NULL);
    return atomic_load(&tw_bad);
}

TEST(a_thread_frees_by_slab_metadata_while_it_frees_others_blocks) {
    void *keep = hak_malloc(64);
    struct hk_slab *s = hk_slab_of((uintptr_t)keep);
    int bad = tw_run(tw_free_others_then_own);
    CHECKF(bad == 0, "%d blocks changed while they were live", bad);
#ifdef HK_HARDENED
    CHECK(tw_by_meta_after_others == 0); /* the hardened build stashes nothing */
#else
    CHECK(tw_by_meta_after_others == 1);
#endif
    CHECK(tw_by_meta_after_own == 0);
    hk_heap_flush(); /* the inbox of the blocks that came home */
    CHECKF(hk_heap_slab_live(s) == 1, "live %u", hk_heap_slab_live(s));
    hak_free(keep);
}

/* Freeing by slab metadata, the thread tells its own blocks from others' by one sample a
 * countdown of the second try's takes (heap.c, hk_heap_stash_tick). Frees that alternate
 * between the two miss its table half the time, so it must go on freeing by slab metadata:
 * samples that took every take for its own would have it leave and enter in turn. */
static int tw_alt_left;

static void *tw_free_in_turn(void *arg) {
    (void)arg;
    static void *own[TW_N];
    for (int i = 0; i < TW_N; i++) own[i] = hak_malloc(64);
    /* Each free is followed by the malloc that takes the block back from the cache, so the
     * blocks stay whose they were and the frees alternate exactly. */
    uint64_t t0 = hk_now_ms();
    int passes = 0;
    do {
        for (int i = 0; i < TW_N; i++) {
            if (*(int *)tw_blocks[i] != i) atomic_fetch_add(&tw_bad, 1);
            hak_free(tw_blocks[i]);
            tw_blocks[i] = hak_malloc(64);
            *(int *)tw_blocks[i] = i;
            hak_free(own[i]);
            own[i] = hak_malloc(64);
        }
        /* After the first TW_MS, every pass must find it freeing by slab metadata. */
        if (hk_now_ms() - t0 >= TW_MS) tw_alt_left += !hk_heap_frees_by_meta(), passes++;
    } while (passes < 40 || hk_now_ms() - t0 < 4 * TW_MS);
    for (int i = 0; i < TW_N; i++) hak_free(own[i]);
    return NULL;
}

TEST(frees_in_turn_of_own_and_others_blocks_keep_freeing_by_slab_metadata) {
    int bad = tw_run(tw_free_in_turn);
    CHECKF(bad == 0, "%d blocks changed while they were live", bad);
#ifndef HK_HARDENED
    CHECKF(tw_alt_left == 0, "%d passes found the thread freeing by its table", tw_alt_left);
#endif
    for (int i = 0; i < TW_N; i++) hak_free(tw_blocks[i]);
    hk_heap_flush();
}

/* --- footprint ---------------------------------------------------------------------------- */
static atomic_int brief_done;
/* Slabs threads hold of every class but c (a mid span counts once). */
static size_t slabs_held_except(const struct hak_stats *s, unsigned c) {
    size_t n = 0;
    for (size_t k = 0; k < s->nclass; k++)
        if (k != c) n += s->class_slabs_held[k];
    return n;
}

static void *touch_many_classes(void *arg) {
    (void)arg;
    /* One block of each of 36 classes, freed at once: a slab of each stays current. */
    for (size_t n = 16; n <= 16384; n += n / 4 > 16 ? n / 4 : 16) hak_free(hak_malloc(n));
    /* Then work in one class only, on slow paths (refills); its own slabs, which come and go
     * with its waves, are not counted. A quiet class's slab goes after a purge delay, and is
     * kept as the thread's for another one at most: the wait is three delays and 2 s more,
     * the delay read each time (ACE lengthens it after pages released too early were wanted
     * again, which the tests before this one may have done: 5 s were not always enough), and
     * 60 s at most. */
    void *first = hak_malloc(4096);
    unsigned c = hk_slab_of((uintptr_t)first)->cls; /* 4 KiB, or more when hardened */
    hak_free(first);
    struct hak_stats a = stats(), b = a;
    uint64_t t0 = hk_now_ms();
    for (;;) {
        void *v[SLOW_WAVE];
        for (int i = 0; i < SLOW_WAVE; i++) v[i] = hak_malloc(4096);
        for (int i = 0; i < SLOW_WAVE; i++) hak_free(v[i]);
        usleep(10000);
        b = stats();
        if (slabs_held_except(&b, c) + 20 < slabs_held_except(&a, c)) break;
        uint64_t waited = hk_now_ms() - t0;
        if (waited > 3 * hk_pol_purge_delay() + 2000 || waited > 60000) break;
    }
    CHECKF(slabs_held_except(&b, c) + 20 < slabs_held_except(&a, c), "slabs held %zu, %zu before",
           slabs_held_except(&b, c), slabs_held_except(&a, c));
    atomic_store(&brief_done, 1);
    return NULL;
}

TEST(classes_used_briefly_give_their_slabs_back) {
    pthread_t t;
    pthread_create(&t, NULL, touch_many_classes, NULL);
    pthread_join(t, NULL);
    CHECK(atomic_load(&brief_done));
}

/* --- shared slabs ---------------------------------------------------------------------- */
#ifndef HK_HARDENED
/* Threads started one after another, each allocating one block of sh_size bytes and holding
 * it until released: more than HK_SHARE_THREADS heaps at once, so that the last ones take
 * their first blocks from the class's shared slab (orphan.h). */
enum { SH_THREADS = HK_SHARE_THREADS + 8, SH_LATE = 6 };
static void *sh_block[SH_THREADS];
static size_t sh_size;
static _Atomic int sh_allocated, sh_release;
/* Each member's pages of its heap record past the first that are resident (mincore: touched,
 * read or written), after its malloc and after its free, and whether it holds a slab. */
static int sh_rest[SH_THREADS][2], sh_slabbed[SH_THREADS];
static struct hk_owner *sh_owner[SH_THREADS];
static struct hk_heap *sh_record[SH_THREADS];

static int sh_rest_resident(void) {
    unsigned char in[16];
    size_t size = sizeof(struct hk_heap), pages = (size + 4095) / 4096;
    if (pages > sizeof in || mincore(hk_tls.heap, size, in) != 0) return -1;
    int n = 0;
    for (size_t i = 1; i < pages; i++) n += in[i] & 1;
    return n;
}

static void *sh_member(void *arg) {
    intptr_t i = (intptr_t)arg;
    sh_block[i] = hak_malloc(sh_size);
    memset(sh_block[i], (int)i + 1, sh_size);
    sh_rest[i][0] = sh_rest_resident();
    sh_slabbed[i] = hk_tls.heap->slabbed != 0;
    sh_owner[i] = hk_tls.heap->owner;
    sh_record[i] = hk_tls.heap;
    atomic_fetch_add(&sh_allocated, 1);
    while (!atomic_load(&sh_release)) usleep(100);
    const unsigned char *b = sh_block[i];
    for (size_t k = 0; k < sh_size; k++)
        if (b[k] != (unsigned char)(i + 1)) return NULL; /* another thread wrote to it */
    hak_free(sh_block[i]);
    sh_rest[i][1] = sh_rest_resident();
    return (void *)1;
}

/* Starts the members, one at a time; each has allocated when this returns. The members
 * started, SH_THREADS unless the system refused a thread. */
static int sh_start(pthread_t *t, size_t size) {
    sh_size = size;
    atomic_store(&sh_allocated, 0);
    atomic_store(&sh_release, 0);
    for (intptr_t i = 0; i < SH_THREADS; i++) {
        if (pthread_create(&t[i], NULL, sh_member, (void *)i) != 0) return (int)i;
        while (atomic_load(&sh_allocated) <= i) usleep(100);
    }
    return SH_THREADS;
}

/* Lets the n members free their blocks and exit; whether every block kept its contents. */
static int sh_finish(pthread_t *t, int n) {
    int ok = 1;
    atomic_store(&sh_release, 1);
    for (int i = 0; i < n; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        ok &= r == (void *)1;
    }
    return ok;
}

/* sh_start: 1 when every member started; else a failed check, the members let go, and 0. */
static int sh_start_all(pthread_t *t, size_t size, int *n) {
    *n = sh_start(t, size);
    if (*n == SH_THREADS) return 1;
    CHECKF(0, "only %d threads started", *n);
    sh_finish(t, *n);
    return 0;
}

TEST(many_threads_take_their_first_blocks_from_a_shared_slab) {
    pthread_t t[SH_THREADS];
    int n;
    if (!sh_start_all(t, 48, &n)) return;
    /* The first threads have slabs of their own. */
    struct hk_slab *first = hk_slab_of((uintptr_t)sh_block[0]);
    CHECK(atomic_load(&first->owner) != NULL);
    /* The last ones share one, which no thread owns; each took whole cache lines (4 blocks of
     * 48 bytes), so no two of them write to one line. */
    struct hk_slab *s = hk_slab_of((uintptr_t)sh_block[SH_THREADS - 1]);
    CHECKF(atomic_load(&s->owner) == NULL && s->list == HK_LIST_SHARED,
           "the last thread's block is in a slab of owner %p, list %d",
           (void *)atomic_load(&s->owner), s->list);
    for (int i = SH_THREADS - SH_LATE; i < SH_THREADS; i++) {
        uintptr_t a = (uintptr_t)sh_block[i];
        CHECKF(hk_slab_of(a) == s, "thread %d's block is in another slab", i);
        for (int j = SH_THREADS - SH_LATE; j < i; j++) {
            uintptr_t b = (uintptr_t)sh_block[j];
            CHECKF((a >> 6) != (b >> 6) && ((a + 47) >> 6) != (b >> 6) &&
                       (a >> 6) != ((b + 47) >> 6),
                   "threads %d and %d have blocks in one cache line", i, j);
        }
    }
    uint32_t used = s->used;
    CHECKF(used >= SH_LATE && used % 4 == 0, "the shared slab counts %u blocks", used);
    CHECK(sh_finish(t, n));
    /* Every block came back: the slab has none live, and it goes back to the pool once empty
     * for the purge delay (the first look notes since when). */
    CHECK(s->used == 0);
    uint64_t now = hk_now_ms();
    hk_orphan_share_decay(now, 0);
    CHECK(s->list == HK_LIST_SHARED);
    hk_orphan_share_decay(now + hk_pol_purge_delay(), 0);
    CHECKF(hk_pool_has_free_slab(s), "the empty shared slab stayed (list %d)", s->list);
}

/* Whether record o is a member's that owns no slab. */
static int sh_light(const struct hk_owner *o) {
    for (int i = 0; i < SH_THREADS; i++)
        if (sh_owner[i] == o && !sh_slabbed[i]) return 1;
    return 0;
}

/* The pages of owner records' cold parts (owner.h) on which lie only the cold parts of
 * members that own no slab: how many there are, and in *resident how many are resident. */
static int sh_light_cold_pages(int *resident) {
    const uintptr_t size = sizeof(struct hk_owner_cold);
    int pages = 0;
    *resident = 0;
    for (int i = 0; i < SH_THREADS; i++) {
        if (sh_slabbed[i] || !sh_owner[i]) continue;
        uintptr_t from = (uintptr_t)sh_owner[i]->cold;
        for (uintptr_t pg = from & ~(uintptr_t)4095; pg < from + size; pg += 4096) {
            int only_light = 1, first = 1;
            for (struct hk_owner *o = hk_owner_first(); o; o = o->next_all) {
                uintptr_t c = (uintptr_t)o->cold;
                if (c + size <= pg || c >= pg + 4096) continue; /* not on this page */
                if (!sh_light(o)) only_light = 0;
                if (c < from) first = 0; /* counted with an earlier member's part */
            }
            unsigned char in;
            if (!only_light || !first || mincore((void *)pg, 4096, &in) != 0) continue;
            pages++;
            *resident += in & 1;
        }
    }
    return pages;
}

/* A thread that holds no slab of its own (its blocks are shared) reads and writes only the
 * first page of its heap record (heap.h), and nothing of its owner record's cold part
 * (owner.h), neither while it lives nor when its record is given up: a thousand such threads
 * then keep 4 KiB each for their heap records, not 12, and 192 bytes for their owner records,
 * not 3 KiB. Run first, while every record is new: one used again by a thread that owned
 * slabs was cleared, and is resident. */
TEST(a_thread_that_owns_no_slab_touches_one_page_of_its_record) {
    pthread_t t[SH_THREADS];
    int n, light = 0, cold_pages, cold_resident;
    if (!sh_start_all(t, 48, &n)) return;
    /* Under HAKMEM_STATS every thread counts into its cold part. */
    if (!hk_counting) {
        cold_pages = sh_light_cold_pages(&cold_resident);
        CHECKF(cold_pages > 0 && cold_resident == 0,
               "%d of the %d pages of owner records' cold parts that only threads without "
               "slabs have are resident",
               cold_resident, cold_pages);
    }
    CHECK(sh_finish(t, n));
    /* Their records, parked, are given up (as no thread took them) and recycled. */
    hk_heap_give_up_all();
    if (!hk_counting) {
        cold_pages = sh_light_cold_pages(&cold_resident);
        CHECKF(cold_resident == 0,
               "after the threads' exit, %d of those %d pages are resident", cold_resident,
               cold_pages);
    }
    for (int i = 0; i < SH_THREADS; i++) {
        if (sh_slabbed[i]) {
            /* One that owns a slab writes the rest: its lists, its owned-slab table. */
            CHECKF(sh_rest[i][0] > 0, "thread %d owns a slab, and %d pages are resident", i,
                   sh_rest[i][0]);
            continue;
        }
        light++;
        CHECKF(sh_rest[i][0] == 0 && sh_rest[i][1] == 0,
               "thread %d owns no slab, and %d, then %d of its record's pages past the first "
               "are resident",
               i, sh_rest[i][0], sh_rest[i][1]);
    }
    CHECKF(light >= SH_LATE, "%d threads own no slab", light);
    /* A second round: its threads that own slabs take the heap records that threads owning
     * slabs wrote past their first page, resident already, not the others. */
    struct hk_heap *written[SH_THREADS];
    int nw = 0;
    for (int i = 0; i < SH_THREADS; i++)
        if (sh_slabbed[i]) written[nw++] = sh_record[i];
    if (!sh_start_all(t, 48, &n)) return;
    int owners = 0, fresh = 0;
    for (int i = 0; i < SH_THREADS; i++) {
        if (!sh_slabbed[i]) continue;
        owners++;
        int found = 0;
        for (int k = 0; k < nw; k++) found |= written[k] == sh_record[i];
        fresh += !found;
    }
    CHECKF(owners > 0 && fresh == 0,
           "%d of the second round's %d threads that own slabs took a record no such thread "
           "had written",
           fresh, owners);
    CHECK(sh_finish(t, n));
    hk_heap_give_up_all(); /* the tests after this one find no parked record */
}

TEST(a_shared_slab_carved_to_its_end_is_an_orphan_like_any_other) {
    /* Blocks of 16 KiB, 4 to a slab: the late threads fill more than one. */
    pthread_t t[SH_THREADS];
    int n;
    if (!sh_start_all(t, 16384, &n)) return;
    struct hk_slab *spent = NULL, *serving = NULL;
    for (int i = SH_THREADS - SH_LATE; i < SH_THREADS; i++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)sh_block[i]);
        CHECK(atomic_load(&s->owner) == NULL);
        if (s->list == HK_LIST_ORPHAN_FULL) spent = s;
        if (s->list == HK_LIST_SHARED) serving = s;
    }
    CHECKF(spent && serving, "no spent (%p) or no serving (%p) shared slab", (void *)spent,
           (void *)serving);
    CHECK(sh_finish(t, n));
    /* The spent one, its blocks all back, is a spare for the class's next shared slab
     * (orphan.h); it and the serving one go back at the flush (as malloc_trim). */
    if (spent) CHECKF(spent->list == HK_LIST_SHARED_SPARE, "the spent slab is on list %d",
                      spent->list);
    hk_heap_flush();
    if (spent) CHECK(hk_pool_has_free_slab(spent));
    if (serving) CHECK(hk_pool_has_free_slab(serving));
}

TEST(a_spent_shared_slab_serves_as_shared_again_not_as_a_threads_own) {
    /* Blocks of 16 KiB, 4 to a slab: the late threads spend one shared slab and start
     * another. */
    pthread_t t[SH_THREADS];
    int n;
    if (!sh_start_all(t, 16384, &n)) return;
    struct hk_slab *spent = NULL;
    for (int i = SH_THREADS - SH_LATE; i < SH_THREADS; i++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)sh_block[i]);
        if (s->list == HK_LIST_ORPHAN_FULL) spent = s;
    }
    CHECKF(spent != NULL, "no spent shared slab");
    CHECK(sh_finish(t, n));
    hk_heap_give_up_all(); /* the exited threads' records: not taken over by the next ones */
    /* Again: the threads that take slabs of their own take none of the spent one, whose
     * pages all hold blocks, and the late threads' shared blocks come from it. */
    if (!sh_start_all(t, 16384, &n)) return;
    int own = 0, shared_there = 0;
    for (int i = 0; i < SH_THREADS; i++) {
        struct hk_slab *s = hk_slab_of((uintptr_t)sh_block[i]);
        if (s != spent) continue;
        if (atomic_load(&s->owner) != NULL) own++;
        else shared_there++;
    }
    CHECKF(own == 0 && shared_there > 0,
           "of the second round's blocks, %d are in the spent slab as a thread's own and %d "
           "as shared blocks",
           own, shared_there);
    CHECK(sh_finish(t, n));
    hk_heap_flush();
}

/* Shared slabs of the classes above 1 KiB: a thread's first block of one is one block of the
 * class's shared slab, the slab's count exactly the members' blocks in it. A run of the blocks
 * that fill whole cache lines would give a thread 4 blocks of 4,368 bytes (a multiple of 16,
 * not of 64) for the one it asked, 13 KiB it may never use; for 16-byte multiples of 21,840
 * bytes, 3 to a slab, the run never fitted, and the late threads' mallocs took slab after
 * slab without end. */
TEST(big_classes_share_a_block_at_a_time) {
    static const size_t sizes[] = {1088, 4368, 9344, 13056, 21824, 32768};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        pthread_t t[SH_THREADS];
        int n;
        if (!sh_start_all(t, sizes[k], &n)) return;
        struct hk_slab *seen[SH_LATE];
        int nseen = 0;
        for (int i = SH_THREADS - SH_LATE; i < SH_THREADS; i++) {
            struct hk_slab *s = hk_slab_of((uintptr_t)sh_block[i]);
            CHECKF(atomic_load(&s->owner) == NULL && s->bsize == sizes[k],
                   "%zu bytes: thread %d's block is in a slab of owner %p, %u-byte blocks",
                   sizes[k], i, (void *)atomic_load(&s->owner), s->bsize);
            int j = 0;
            while (j < nseen && seen[j] != s) j++;
            if (j == nseen) seen[nseen++] = s;
        }
        uint32_t used = 0, held = 0;
        for (int j = 0; j < nseen; j++) {
            used += seen[j]->used;
            for (int i = 0; i < SH_THREADS; i++)
                held += hk_slab_of((uintptr_t)sh_block[i]) == seen[j];
        }
        CHECKF(used == held, "%zu bytes: the shared slabs count %u blocks for %u members' blocks",
               sizes[k], used, held);
        CHECK(sh_finish(t, n));
        hk_heap_give_up_all();
        hk_heap_flush();
    }
}

/* A thread that allocates more of a class than its shared blocks, then exits; and one that
 * allocates one block, and says whether it came from a shared slab. */
static void *og_outgrow(void *arg) {
    (void)arg;
    void *b[16];
    for (int i = 0; i < 16; i++) b[i] = hak_malloc(48);
    for (int i = 0; i < 16; i++) hak_free(b[i]);
    return NULL;
}
static void *og_one(void *arg) {
    (void)arg;
    void *p = hak_malloc(48);
    int shared = atomic_load(&hk_slab_of((uintptr_t)p)->owner) == NULL;
    hak_free(p);
    return (void *)(intptr_t)(shared + 1);
}
static int og_run(void *(*fn)(void *)) {
    pthread_t t;
    void *r = NULL;
    if (pthread_create(&t, NULL, fn, NULL) != 0 || pthread_join(t, &r) != 0) return 0;
    return (int)(intptr_t)r;
}

TEST(a_thread_after_one_that_outgrew_its_shared_blocks_takes_none) {
    pthread_t t[SH_THREADS];
    int n;
    if (!sh_start_all(t, 1024, &n)) return; /* threads are many from here on */
    hk_heap_give_up_all(); /* none parked from the tests before */
    /* Threads come and go, each taking over the heap of the one before (the only one parked):
     * one block, shared; then a thread that outgrows the class's shared blocks; then the class
     * is no class the next one shares. */
    CHECKF(og_run(og_one) == 2, "a thread's first block of a class was not shared");
    og_run(og_outgrow);
    CHECKF(og_run(og_one) == 1, "the block of the thread after it came from a shared slab");
    CHECK(sh_finish(t, n));
}

/* A block of a shared slab that its thread frees goes home at once, and the next thread's
 * block of the class is that one: a thread that frees its blocks and then waits (a worker
 * between jobs) leaves nothing the next threads cannot have. It was held in the waiting
 * thread's batch of orphans' blocks. Blocks of 640 bytes fill whole cache lines, so one that
 * comes back is handed out alone; the waiting thread keeps another, so the slab is not
 * carved again from its start. */
static void *sr_kept, *sr_freed_block;
static _Atomic int sr_state, sr_go;

static void *sr_free_one_and_wait(void *arg) {
    (void)arg;
    sr_kept = hak_malloc(640);
    sr_freed_block = hak_malloc(640);
    int shared = atomic_load(&hk_slab_of((uintptr_t)sr_freed_block)->owner) == NULL;
    hak_free(sr_freed_block);
    atomic_store(&sr_state, shared ? 1 : 2);
    while (!atomic_load(&sr_go)) usleep(100);
    hak_free(sr_kept);
    return NULL;
}

static void *sr_take(void *arg) {
    (void)arg;
    void *p = hak_malloc(640);
    intptr_t same = p == sr_freed_block;
    hak_free(p);
    return (void *)(same + 1);
}

TEST(a_shared_block_freed_by_a_thread_that_waits_serves_the_next_thread) {
    pthread_t t[SH_THREADS], w;
    int n;
    if (!sh_start_all(t, 1024, &n)) return; /* threads are many from here on */
    atomic_store(&sr_state, 0);
    atomic_store(&sr_go, 0);
    pthread_create(&w, NULL, sr_free_one_and_wait, NULL);
    while (!atomic_load(&sr_state)) usleep(100);
    CHECKF(atomic_load(&sr_state) == 1, "the waiting thread's blocks were not shared ones");
    CHECKF(og_run(sr_take) == 2, "the next thread's block is not the one freed");
    atomic_store(&sr_go, 1);
    pthread_join(w, NULL);
    CHECK(sh_finish(t, n));
}
#endif

/* --- orphans --------------------------------------------------------------------------- */
static void *alloc_and_exit(void *arg) {
    size_t n = (size_t)(uintptr_t)arg;
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(n);
    return NULL;
}

TEST(slabs_of_exited_thread_are_released_when_freed) {
    struct hak_stats a = stats();
    run_to_orphans(alloc_and_exit, (void *)(uintptr_t)96);
    struct hak_stats b = stats();
    CHECK(b.slab_abandon > a.slab_abandon);
    for (int i = 0; i < NB; i++) hak_free(blocks[i]);
#ifndef HK_HARDENED
    /* They travel in the thread's orphan batch, applied a batch at a time: what waits there
     * until the thread's next refill (or a flush) stays below the batch's bound. */
    CHECKF(hk_tls.heap->orphan_n < HK_ORPHAN_BATCH_BLOCKS, "%u blocks wait", hk_tls.heap->orphan_n);
#endif
    hk_heap_flush();
    struct hak_stats c = stats();
    CHECKF(c.slabs_active_now <= a.slabs_active_now, "active slabs %zu, before %zu",
           c.slabs_active_now, a.slabs_active_now);
}

/* A heap torn down at its thread's exit and set up again by a later key destructor's malloc
 * starts from an owned-slab table of its own, empty: the slabs the thread owned before its
 * exit are not in it (they went to the pool or the orphans), and what the destructor
 * allocates and frees goes through it as on any thread. */
enum { RS_N = 48 };
static pthread_key_t rs_key;
static struct hk_slab *rs_before[RS_N];
static size_t rs_table_at_exit, rs_table_after;
static int rs_stale, rs_bad, rs_ran;

static void rs_destructor(void *arg) {
    (void)arg;
    rs_ran = 1;
    rs_table_at_exit = hk_heap_table_size(); /* hakmem's own destructor ran first */
    void *q[RS_N];
    for (int i = 0; i < RS_N; i++) {
        q[i] = hak_malloc(16 + 16 * (size_t)(i % 8));
        memset(q[i], 0x5a, 16);
    }
    rs_table_after = hk_heap_table_size();
    for (int i = 0; i < RS_N; i++) {
        int mine = 0;
        for (int j = 0; j < RS_N; j++) mine |= hk_slab_of((uintptr_t)q[j]) == rs_before[i];
        if (!mine && ht_has_entry(rs_before[i])) rs_stale++;
    }
    for (int i = 0; i < RS_N; i++) {
        if (((unsigned char *)q[i])[15] != 0x5a) rs_bad++;
        hak_free(q[i]);
    }
}

static void *alloc_then_exit_with_a_key(void *arg) {
    (void)arg;
    void *p[RS_N];
    for (int i = 0; i < RS_N; i++) {
        p[i] = hak_malloc(16 + 16 * (size_t)(i % 8));
        rs_before[i] = hk_slab_of((uintptr_t)p[i]);
    }
    for (int i = 0; i < RS_N; i += 2) hak_free(p[i]); /* the rest are orphans at the exit */
    for (int i = 1; i < RS_N; i += 2) blocks[i / 2] = p[i];
    pthread_setspecific(rs_key, (void *)1);
    return NULL;
}

TEST(a_heap_set_up_again_after_exit_starts_clean) {
    /* Made after hakmem's key (its first slow path, long ago): its destructor runs after. */
    CHECK(pthread_key_create(&rs_key, rs_destructor) == 0);
    pthread_t t;
    pthread_create(&t, NULL, alloc_then_exit_with_a_key, NULL);
    pthread_join(t, NULL);
    CHECK(rs_ran);
    CHECKF(rs_table_at_exit == 1, "%zu entries in the table of a torn-down heap",
           rs_table_at_exit);
    CHECKF(rs_table_after == HK_OWNED, "%zu entries after the heap was set up again",
           rs_table_after);
    CHECKF(rs_stale == 0, "%d slabs of the heap before its exit still have an entry", rs_stale);
    CHECK(rs_bad == 0);
    for (int i = 0; i < RS_N / 2; i++) hak_free(blocks[i]);
    pthread_key_delete(rs_key);
}

/* --- handover: an exited thread's heap goes whole to the next thread ---------------------- */
enum { HO_N = 600, HO_SIZE = 200 };
static void *ho_blocks[HO_N];
static int ho_owned, ho_taken;
static size_t ho_acquired; /* new memory taken by the mallocs after the frees (slabs) */

static void *ho_alloc_free_half_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < HO_N; i++) ho_blocks[i] = hak_malloc(HO_SIZE);
    for (int i = 0; i < HO_N; i += 2) hak_free(ho_blocks[i]), ho_blocks[i] = NULL;
    return NULL;
}

static void *ho_take_and_free(void *arg) {
    (void)arg;
    void *x = hak_malloc(16); /* sets the heap up: it takes the handed-over heap */
    ho_owned = 0;
    for (int i = 1; i < HO_N; i += 2)
        ho_owned += atomic_load_explicit(&hk_slab_of((uintptr_t)ho_blocks[i])->owner,
                                         memory_order_relaxed) == hk_tls.heap->owner;
    /* Its own blocks now: freed on the thread's own paths, and reused by its mallocs. */
    for (int i = 1; i < HO_N; i += 2) hak_free(ho_blocks[i]);
    void *y[HO_N / 2];
    ho_taken = 0;
    struct hak_stats a = stats();
    for (int i = 0; i < HO_N / 2; i++) {
        y[i] = hak_malloc(HO_SIZE);
        for (int j = 1; j < HO_N; j += 2) ho_taken += y[i] == ho_blocks[j];
    }
    struct hak_stats b = stats();
    /* Stage 1 would be a slab of the class that emptied and came back: no new memory. */
    ho_acquired = (b.acquire_stage2 + b.acquire_stage3_cache + b.acquire_stage3_mmap) -
                  (a.acquire_stage2 + a.acquire_stage3_cache + a.acquire_stage3_mmap);
    for (int i = 0; i < HO_N / 2; i++) hak_free(y[i]);
    hak_free(x);
    return NULL;
}

/* A thread allocates HO_N blocks, frees half and exits; then `next` runs in a new thread, with
 * parked heaps held from time (hk_heap_hold). The counts before the first thread, and
 * (mid) between the two. */
static struct hak_stats ho_hand_over(void *(*next)(void *), struct hak_stats *mid) {
    hk_heap_give_up_all(); /* none from the tests before */
    hk_heap_hold(HK_HOLD_PARKED);
    struct hak_stats a = stats();
    pthread_t t;
    pthread_create(&t, NULL, ho_alloc_free_half_exit, NULL);
    pthread_join(t, NULL);
    *mid = stats();
    pthread_create(&t, NULL, next, NULL);
    pthread_join(t, NULL);
    hk_heap_hold(0);
    return a;
}

TEST(an_exited_threads_heap_goes_whole_to_the_next_thread) {
    struct hak_stats b, a = ho_hand_over(ho_take_and_free, &b);
    CHECKF(b.slab_abandon == a.slab_abandon, "%zu slabs abandoned at the exit",
           b.slab_abandon - a.slab_abandon);
    struct hak_stats c = stats();
    CHECKF(c.heaps_taken_over == a.heaps_taken_over + 1, "%zu heaps taken over",
           c.heaps_taken_over - a.heaps_taken_over);
    CHECKF(ho_owned == HO_N / 2, "%d of %d live blocks in slabs the new thread owns", ho_owned,
           HO_N / 2);
    /* As many blocks as it freed come back from the slabs it took over: no new memory. */
    CHECKF(ho_acquired == 0 && ho_taken > 0, "%zu slabs of new memory, %d freed blocks reused",
           ho_acquired, ho_taken);
    hk_heap_give_up_all();
}

/* A heap taken over keeps its lists as they are, and its slabs have their table entries from
 * the take-over on: their first frees by the new thread take free's fast path (entered at
 * those frees instead, larson with a new thread every 1,000 steps ran 2-4% slower). Its
 * blocks all come home. */
static int ho_entered_first, ho_entered_then, ho_slabs, ho_exact;

static void *ho_take_and_enter(void *arg) {
    (void)arg;
    void *x = hak_malloc(16); /* sets the heap up: it takes the handed-over heap */
    struct hk_slab *slab[HO_N];
    int n = 0;
    ho_entered_first = ho_entered_then = 0;
    ho_exact = 1;
    for (int i = 1; i < HO_N; i += 2) {
        struct hk_slab *s = hk_slab_of((uintptr_t)ho_blocks[i]);
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= slab[j] == s;
        if (seen) continue;
        slab[n++] = s;
        ho_entered_first += hk_heap_has_entry(s);
        hak_free(ho_blocks[i]); /* the slab's first free by this thread */
        ho_blocks[i] = NULL;
        ho_entered_then += hk_heap_has_entry(s);
    }
    ho_slabs = n;
    hk_heap_flush(); /* the cache's blocks home: the counts exact */
    for (int j = 0; j < n; j++) {
        uint32_t held = 0;
        for (int i = 1; i < HO_N; i += 2)
            held += ho_blocks[i] && hk_slab_of((uintptr_t)ho_blocks[i]) == slab[j];
        ho_exact &= hk_heap_slab_live(slab[j]) == held;
    }
    for (int i = 1; i < HO_N; i += 2) hak_free(ho_blocks[i]);
    hak_free(x);
    return NULL;
}

TEST(a_heap_taken_over_has_its_slabs_entered_at_once) {
    struct hak_stats mid, a = ho_hand_over(ho_take_and_enter, &mid);
    struct hak_stats b = stats();
    CHECKF(b.heaps_taken_over == a.heaps_taken_over + 1, "%zu heaps taken over",
           b.heaps_taken_over - a.heaps_taken_over);
    CHECK(ho_slabs >= 2);
    CHECKF(ho_entered_first == ho_slabs && ho_entered_then == ho_slabs,
           "%d of %d slabs entered at the take-over, %d after their first free",
           ho_entered_first, ho_slabs, ho_entered_then);
    CHECK(ho_exact);
    hk_heap_give_up_all();
}

static void *ho_alloc_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < HO_N; i++) ho_blocks[i] = hak_malloc(HO_SIZE);
    return NULL;
}

/* A heap that no thread takes is given up after a while, at a tick of any thread: its slabs
 * become orphans, which the blocks' frees then empty; and remote frees made into it while
 * it waited are applied, not lost. */
TEST(a_heap_nobody_takes_is_given_up_and_loses_nothing) {
    hk_heap_give_up_all();
    hk_heap_trim(); /* this thread's empty current slabs go too, as at the end */
    struct hak_stats a = stats();
    pthread_t t;
    pthread_create(&t, NULL, ho_alloc_exit, NULL);
    pthread_join(t, NULL);
    /* Half the blocks freed while the heap waits: remote frees into its open inbox. */
    for (int i = 0; i < HO_N; i += 2) hak_free(ho_blocks[i]), ho_blocks[i] = NULL;
    /* This thread's ticks give it up once it has waited long enough; refills (which send
     * this thread's batches of those frees first) read the clock. */
    static void *p[4096];
    uint64_t t0 = hk_now_ms();
    while (stats().heaps_given_up == a.heaps_given_up && hk_now_ms() - t0 < 2000) {
        for (int i = 0; i < 4096; i++) p[i] = hak_malloc(16);
        for (int i = 0; i < 4096; i++) hak_free(p[i]);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    struct hak_stats b = stats();
    CHECKF(b.heaps_given_up == a.heaps_given_up + 1, "%zu heaps given up",
           b.heaps_given_up - a.heaps_given_up);
    CHECK(b.slab_abandon > a.slab_abandon);
    for (int i = 1; i < HO_N; i += 2) hak_free(ho_blocks[i]);
    hk_heap_trim();
    struct hak_stats c = stats();
    CHECKF(c.slabs_active_now <= a.slabs_active_now, "active slabs %zu, before %zu",
           c.slabs_active_now, a.slabs_active_now);
}

/* A thread whose first call frees a block of an exited thread's parked heap takes that heap
 * over, not the oldest one: a successor that takes apart what its predecessor left (larson's
 * lanes) then frees it as its own. */
static void *hh_a[64], *hh_b[64];
static int hh_own_a, hh_own_b;

static atomic_int hh_b_ready, hh_b_go;

/* Set up while a's thread lives, so that neither takes the other's heap over; exits first. */
static void *hh_alloc_b(void *arg) {
    (void)arg;
    for (int i = 0; i < 64; i++) hh_b[i] = hak_malloc(80);
    atomic_store(&hh_b_ready, 1);
    while (!atomic_load(&hh_b_go)) usleep(100);
    return NULL;
}

/* Exits after b's thread has: its heap is parked last, the newest. */
static void *hh_alloc_a(void *tb) {
    for (int i = 0; i < 64; i++) hh_a[i] = hak_malloc(80);
    atomic_store(&hh_b_go, 1);
    pthread_join(*(pthread_t *)tb, NULL);
    return NULL;
}

/* Notes which of the parked heaps' slabs the calling thread owns now. */
static void hh_note_owners(void) {
    struct hk_owner *me = hk_tls.heap->owner;
    hh_own_a = atomic_load_explicit(&hk_slab_of((uintptr_t)hh_a[1])->owner,
                                    memory_order_relaxed) == me;
    hh_own_b = atomic_load_explicit(&hk_slab_of((uintptr_t)hh_b[0])->owner,
                                    memory_order_relaxed) == me;
}

static void *hh_free_a_first(void *arg) {
    (void)arg;
    hak_free(hh_a[0]); /* the thread's first call: its heap is set up here */
    hh_note_owners();
    for (int i = 1; i < 64; i++) hak_free(hh_a[i]);
    return NULL;
}

static void *hh_malloc_first(void *arg) {
    (void)arg;
    void *p = hak_malloc(80); /* the thread's first call: its heap is set up here */
    hh_note_owners();
    hak_free(p);
    return NULL;
}

/* Parks b's heap, then a's (b's the oldest, a's the newest, and no other; both held from
 * time), then runs fn in a new thread, which must take one of them over. */
static void hh_after_parking(void *(*fn)(void *)) {
    hk_heap_give_up_all();
    hk_heap_hold(HK_HOLD_PARKED);
    atomic_store(&hh_b_ready, 0);
    atomic_store(&hh_b_go, 0);
    pthread_t t, tb;
    pthread_create(&tb, NULL, hh_alloc_b, NULL);
    while (!atomic_load(&hh_b_ready)) usleep(100);
    pthread_create(&t, NULL, hh_alloc_a, &tb);
    pthread_join(t, NULL);
    struct hak_stats a = stats();
    pthread_create(&t, NULL, fn, NULL);
    pthread_join(t, NULL);
    hk_heap_hold(0);
    struct hak_stats b = stats();
    CHECKF(b.heaps_taken_over == a.heaps_taken_over + 1, "%zu heaps taken over",
           b.heaps_taken_over - a.heaps_taken_over);
}

TEST(a_thread_that_first_frees_a_parked_heaps_block_takes_that_heap_over) {
    hh_after_parking(hh_free_a_first);
    CHECK(hh_own_a && !hh_own_b);
    for (int i = 0; i < 64; i++) hak_free(hh_b[i]);
    hk_heap_give_up_all();
}

/* A thread whose first call is a malloc takes over the oldest parked heap. Taking the newest,
 * where threads start and exit all the time, left the oldest to wait out HK_PARK_MS while
 * newer ones were taken, and to be given up, its slabs orphaned: larson with 16 lanes on 2
 * cores gave up 85 heaps and abandoned 9,895 slabs in a second (18 and 2,295 now). */
TEST(a_new_thread_takes_over_the_oldest_parked_heap) {
    hh_after_parking(hh_malloc_first);
    CHECKF(hh_own_b && !hh_own_a, "the new thread owns %s", hh_own_a ? "the newest heap's slabs"
                                                                   : "neither heap's slabs");
    for (int i = 0; i < 64; i++) hak_free(hh_a[i]), hak_free(hh_b[i]);
    hk_heap_give_up_all();
}

enum { TI_N = 60000, TI_SIZE = 48 };
static void *ti_blocks[TI_N];

static void *ti_alloc_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < TI_N; i++) {
        ti_blocks[i] = hak_malloc(TI_SIZE);
        memset(ti_blocks[i], 0, TI_SIZE);
        memcpy(ti_blocks[i], &i, sizeof i);
    }
    return NULL;
}

/* The blocks of ti_alloc_exit, freed by a thread of their own that ends after it has
 * measured (ti_measured), so that its heap, which never allocated their class, keeps none of
 * their slabs whatever the tests before did with the main thread's. */
static struct hak_stats ti_after_frees, ti_after_flush;
static int ti_tags_ok;

/* Between a thread that frees (it sets its heap up, then waits twice) and one that allocates
 * and exits (exit_then_free). */
static pthread_barrier_t ef_bar;

/* Runs freer in a thread that sets its heap up first, then alloc in a thread that exits, whose
 * heap is parked then (and held from time), and lets freer go on once it has. Returns the report taken before
 * alloc's thread started, having checked that that thread left at least `bytes` of slabs. */
static struct hak_stats exit_then_free(void *(*alloc)(void *), void *(*freer)(void *),
                                       size_t bytes) {
    pthread_barrier_init(&ef_bar, NULL, 2);
    hk_heap_hold(HK_HOLD_PARKED);
    pthread_t f, t;
    pthread_create(&f, NULL, freer, NULL);
    pthread_barrier_wait(&ef_bar);
    struct hak_stats a = stats();
    pthread_create(&t, NULL, alloc, NULL);
    pthread_join(t, NULL);
    struct hak_stats b = stats();
    CHECK(b.slabs_active_now >= a.slabs_active_now + bytes / 65536);
    pthread_barrier_wait(&ef_bar);
    pthread_join(f, NULL);
    hk_heap_hold(0);
    pthread_barrier_destroy(&ef_bar);
    return a;
}

/* The freer's start (exit_then_free): its heap set up first, with a block of `first` bytes (a
 * class the blocks it frees later are not of; a thread that sets its heap up later takes over
 * a parked heap whole), then it waits until the other thread has exited. */
static void ef_wait_for_exit(size_t first) {
    hak_free(hak_malloc(first));
    pthread_barrier_wait(&ef_bar);
    pthread_barrier_wait(&ef_bar);
}

/* Frees ti_alloc_exit's blocks in an order that visits every slab again and again, as a hash
 * table's teardown does, pausing 2 ms after each `pause` frees (0: never); 1 if every block
 * held what it was given. */
static int ti_free_blocks(long pause) {
    int ok = 1;
    for (long i = 0, k = 0; i < TI_N; i++, k = (k + 7919) % TI_N) {
        int tag;
        memcpy(&tag, ti_blocks[k], sizeof tag);
        if (tag != k || ((unsigned char *)ti_blocks[k])[TI_SIZE - 1] != 0) ok = 0;
        hak_free(ti_blocks[k]);
        if (pause && i % pause == pause - 1) usleep(2000);
    }
    return ok;
}

static void *ti_free_all(void *arg) {
    (void)arg;
    ef_wait_for_exit(4000);
    ti_tags_ok = ti_free_blocks(0);
    ti_after_frees = stats();
    hk_heap_flush();
    ti_after_flush = stats();
    return NULL;
}

/* A thread that frees what an exited thread left (a worker's result) takes the parked heap
 * in once its batches have brought the heap 4,096 blocks: the slabs become its own, the
 * blocks already sent are applied, and the rest are freed on its own paths. It never
 * allocates the class, so its cache keeps only a few of them: the slabs empty as the frees
 * come, without a flush, and none is kept. (Freed by the main thread, whose earlier tests
 * allocated the class, the emptied slabs were kept in about one run in three under TSan.) */
TEST(a_thread_that_frees_an_exited_threads_blocks_takes_its_heap_in) {
    hk_heap_give_up_all();
    hk_heap_trim();
    struct hak_stats a = exit_then_free(ti_alloc_exit, ti_free_all, TI_N * TI_SIZE);
    CHECK(ti_tags_ok);
    struct hak_stats c = ti_after_frees;
    CHECKF(c.heaps_taken_in == a.heaps_taken_in + 1, "%zu heaps taken in",
           c.heaps_taken_in - a.heaps_taken_in);
    CHECKF(c.heaps_given_up == a.heaps_given_up, "%zu heaps given up",
           c.heaps_given_up - a.heaps_given_up);
    CHECKF(c.slabs_active_now <= a.slabs_active_now + 10, "active slabs %zu, before %zu",
           c.slabs_active_now, a.slabs_active_now);
    struct hak_stats d = ti_after_flush;
    CHECKF(d.slabs_active_now <= a.slabs_active_now, "active slabs %zu, before %zu",
           d.slabs_active_now, a.slabs_active_now);
}

/* Once a thread has taken an exited thread's heap in, the blocks it goes on freeing are its
 * own, and count as such where it chooses between the two ways to free (heap.h, "Two ways to
 * free"): it frees by its table again, whichever path its frees took meanwhile. Counted as
 * other threads' blocks, they kept it freeing by slab metadata to the end (teardown with a
 * new thread a round, under callgrind: 121.6 instead of 100.2 instructions an operation, in
 * a pair of runs). */
static int tb_tags_ok, tb_by_meta_at_end;

static void *tb_free_with_pauses(void *arg) {
    (void)arg;
    ef_wait_for_exit(4000);
    /* As ti_free_all, with pauses, so that ticks come (at most every 10 ms) while it frees. */
    tb_tags_ok = ti_free_blocks(2000);
    tb_by_meta_at_end = hk_heap_frees_by_meta();
    hk_heap_flush();
    return NULL;
}

TEST(a_thread_that_took_a_heap_in_frees_by_its_table_again) {
    hk_heap_give_up_all();
    hk_heap_trim();
    struct hak_stats a = exit_then_free(ti_alloc_exit, tb_free_with_pauses, TI_N * TI_SIZE);
    CHECK(tb_tags_ok);
    struct hak_stats b = stats();
    CHECKF(b.heaps_taken_in == a.heaps_taken_in + 1, "%zu heaps taken in",
           b.heaps_taken_in - a.heaps_taken_in);
    CHECKF(tb_by_meta_at_end == 0, "it still frees by slab metadata");
}

/* A thread that frees big blocks of an exited thread, parked, takes its heap in once they
 * come to 2 MiB, as it would after 4,096 small ones: the spans they emptied go back to the
 * pool then, not after the record has waited out HK_PARK_MS for a thread to take it over. */
enum { PB_N = 16, PB_SIZE = 256 << 10 };
static void *pb_blocks[PB_N];
static struct hak_stats pb_after_frees;

static void *pb_alloc_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < PB_N; i++) {
        pb_blocks[i] = hak_malloc(PB_SIZE);
        memset(pb_blocks[i], i, PB_SIZE);
    }
    return NULL;
}

static void *pb_free_all(void *arg) {
    (void)arg;
    ef_wait_for_exit(100); /* it never allocates the blocks' class, so it keeps none */
    for (int i = 0; i < PB_N; i++) hak_free(pb_blocks[i]);
    pb_after_frees = stats();
    return NULL;
}

TEST(a_thread_that_frees_an_exited_threads_big_blocks_takes_its_heap_in) {
    hk_heap_give_up_all();
    struct hak_stats a = exit_then_free(pb_alloc_exit, pb_free_all, (size_t)PB_N * PB_SIZE);
    struct hak_stats c = pb_after_frees;
    CHECKF(c.heaps_taken_in == a.heaps_taken_in + 1, "%zu heaps taken in, %zu given up",
           c.heaps_taken_in - a.heaps_taken_in, c.heaps_given_up - a.heaps_given_up);
    CHECKF(c.slabs_active_now <= a.slabs_active_now + 8, "active slabs %zu, before %zu",
           c.slabs_active_now, a.slabs_active_now);
}

/* A thread that takes apart what several exited threads left, freeing into their heaps by
 * turns (a pool's results, freed at the end), takes each heap in: no run of its frees brings
 * one heap half of what gives it up, but it alone brought them any. Blocks of 16 KiB, so that
 * each heap is flooded (2 MiB, 128 blocks) within 160 of its frees. The parked heaps are held
 * from time (hk_heap_hold), as in each test here that checks who takes one: in a CI
 * run on a loaded machine, the freer's tick gave all four up before it had flooded one. */
enum { TB_THREADS = 4, TB_N = 160, TB_SIZE = 16384 };
static void *tb_blocks[TB_THREADS][TB_N];
static struct hak_stats tb_after_frees;
static int tb_tags_ok;
static pthread_barrier_t tb_started, tb_exited;

static void *tb_alloc_exit(void *arg) {
    void **b = arg;
    b[0] = hak_malloc(TB_SIZE); /* its heap set up before any of the others exits */
    pthread_barrier_wait(&tb_started);
    for (int i = 0; i < TB_N; i++) {
        if (i) b[i] = hak_malloc(TB_SIZE);
        memcpy(b[i], &i, sizeof i);
    }
    return NULL;
}

static void *tb_free_all(void *arg) {
    (void)arg;
    hak_free(hak_malloc(4000)); /* its heap set up first, with a class of its own */
    pthread_barrier_wait(&tb_exited);
    pthread_barrier_wait(&tb_exited);
    tb_tags_ok = 1;
    for (int i = 0; i < TB_N; i++)
        for (int w = 0; w < TB_THREADS; w++) {
            int tag;
            memcpy(&tag, tb_blocks[w][i], sizeof tag);
            if (tag != i) tb_tags_ok = 0;
            hak_free(tb_blocks[w][i]);
        }
    tb_after_frees = stats();
    return NULL;
}

TEST(a_thread_that_frees_several_exited_threads_blocks_by_turns_takes_each_heap_in) {
    hk_heap_give_up_all();
    hk_heap_trim();
    pthread_barrier_init(&tb_started, NULL, TB_THREADS);
    pthread_barrier_init(&tb_exited, NULL, 2);
    hk_heap_hold(HK_HOLD_PARKED);
    pthread_t f, t[TB_THREADS];
    pthread_create(&f, NULL, tb_free_all, NULL);
    pthread_barrier_wait(&tb_exited);
    struct hak_stats a = stats();
    for (int w = 0; w < TB_THREADS; w++) pthread_create(&t[w], NULL, tb_alloc_exit, tb_blocks[w]);
    for (int w = 0; w < TB_THREADS; w++) pthread_join(t[w], NULL);
    pthread_barrier_wait(&tb_exited);
    pthread_join(f, NULL);
    hk_heap_hold(0);
    pthread_barrier_destroy(&tb_started);
    pthread_barrier_destroy(&tb_exited);
    CHECK(tb_tags_ok);
    struct hak_stats c = tb_after_frees;
    CHECKF(c.heaps_taken_over == a.heaps_taken_over, "%zu heaps taken over",
           c.heaps_taken_over - a.heaps_taken_over);
    CHECKF(c.heaps_taken_in == a.heaps_taken_in + TB_THREADS &&
               c.heaps_given_up == a.heaps_given_up,
           "%zu heaps taken in, %zu given up", c.heaps_taken_in - a.heaps_taken_in,
           c.heaps_given_up - a.heaps_given_up);
    CHECKF(c.slabs_active_now <= a.slabs_active_now + 8, "active slabs %zu, before %zu",
           c.slabs_active_now, a.slabs_active_now);
}

static void *alloc_half_free_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(176);
    for (int i = 0; i < NB; i += 2) hak_free(blocks[i]), blocks[i] = NULL;
    return NULL;
}

TEST(orphans_with_free_blocks_are_adopted) {
    run_to_orphans(alloc_half_free_exit, NULL);
    struct hak_stats a = stats();
    void *mine[NB / 2];
    for (int i = 0; i < NB / 2; i++) mine[i] = hak_malloc(176);
    struct hak_stats b = stats();
    CHECK(b.slab_adopt > a.slab_adopt);
    CHECK(b.acquire_stage3_mmap == a.acquire_stage3_mmap);
    for (int i = 0; i < NB / 2; i++) hak_free(mine[i]);
    for (int i = 1; i < NB; i += 2) hak_free(blocks[i]);
}

/* --- thread churn ---------------------------------------------------------------------- */
#define LEFT 200
static void *left_over[LEFT];

static void *churn_round(void *arg) {
    uint64_t r = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 7;
    void *mine[1000];
    for (int i = 0; i < LEFT; i++) hak_free(left_over[i]); /* the previous thread's blocks */
    for (int i = 0; i < 1000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        mine[i] = hak_malloc(16 + r % 2000);
        memset(mine[i], 1, 16);
    }
    for (int i = 0; i < 1000 - LEFT; i++) hak_free(mine[i]);
    memcpy(left_over, mine + 1000 - LEFT, sizeof left_over);
    return NULL;
}

TEST(thread_churn_keeps_memory_flat) {
    size_t after_warmup = 0;
    for (uintptr_t round = 1; round <= 400; round++) {
        pthread_t t;
        pthread_create(&t, NULL, churn_round, (void *)round);
        pthread_join(t, NULL);
        if (round == 50) after_warmup = stats().mapped_bytes_now;
    }
    size_t end = stats().mapped_bytes_now;
    CHECKF(end <= after_warmup + (4u << 20), "mapped %zu after 50 rounds, %zu after 400",
           after_warmup, end);
    for (int i = 0; i < LEFT; i++) hak_free(left_over[i]);
}

/* --- producer / consumer --------------------------------------------------------------- */
#define RING 1024
static _Atomic(void *) ring[RING];
static atomic_int producer_done;

static void *consumer(void *arg) {
    (void)arg;
    size_t got = 0;
    for (;;) {
        int done = atomic_load(&producer_done);
        int any = 0;
        for (int i = 0; i < RING; i++) {
            void *p = atomic_exchange(&ring[i], NULL);
            if (p) hak_free(p), got++, any = 1;
        }
        if (done && !any) break;
    }
    return (void *)got;
}

/* A thread whose first call frees a mid block frees it before it has a heap record, on
 * hk_heap_none (heap.c), which nothing may write: ae919a9 wrote the countdown of kept mid
 * frees there, and such a free died of SIGSEGV (a consumer's first free of a producer's
 * 100 KB block). The block goes home to its span. */
static void *free_first(void *p) {
    hak_free(p);
    return (void *)1;
}

TEST(a_thread_whose_first_call_frees_a_mid_block) {
    size_t sizes[] = {40000, 100000, 1000000};
    for (unsigned i = 0; i < 3; i++) {
        void *p = hak_malloc(sizes[i]), *ok = NULL;
        struct hk_slab *s = hk_slab_of((uintptr_t)p);
        hk_heap_flush();
        uint32_t live = hk_heap_slab_live(s);
        pthread_t t;
        pthread_create(&t, NULL, free_first, p);
        pthread_join(t, &ok);
        hk_heap_flush(); /* the inbox, where the free went */
        CHECKF(ok && hk_heap_slab_live(s) + 1 == live, "%zu bytes: live %u, before the free %u",
               sizes[i], hk_heap_slab_live(s), live);
    }
}

TEST(producer_consumer_every_free_remote) {
    struct hak_stats a = stats();
    pthread_t c;
    pthread_create(&c, NULL, consumer, NULL);
    size_t made = 0;
    for (int n = 0; n < 400000; n++) {
        void *p = hak_malloc(32 + (size_t)(n % 500));
        int i = n % RING;
        while (atomic_load(&ring[i]) != NULL) sched_yield();
        atomic_store(&ring[i], p);
        made++;
    }
    atomic_store(&producer_done, 1);
    void *got;
    pthread_join(c, &got);
    CHECK((size_t)got == made);
    /* The producer reclaims the consumer's frees: memory stays bounded. */
    struct hak_stats b = stats();
    CHECKF(b.mapped_bytes_now <= a.mapped_bytes_now + (8u << 20), "mapped %zu -> %zu",
           a.mapped_bytes_now, b.mapped_bytes_now);
}

/* A producer's mid spans, emptied by a consumer's frees, serve it again without a trip to the
 * pool; a span the thread empties itself is not kept (where the soft cap is 0). */
#define NMID 8
static void *mids[NMID];

static void *free_mids(void *arg) {
    (void)arg;
    for (int i = 0; i < NMID; i++) hak_free(mids[i]);
    return NULL; /* its batch goes home at exit */
}

TEST(a_producer_takes_back_the_spans_its_consumer_emptied) {
    for (int i = 0; i < NMID; i++) mids[i] = hak_malloc(200000);
    struct hk_slab *span = hk_slab_of((uintptr_t)mids[0]);
    unsigned c = span->cls;
    CHECK(c >= HK_NSMALL);
    pthread_t t;
    pthread_create(&t, NULL, free_mids, NULL);
    pthread_join(t, NULL);
    struct hak_stats a = stats();
    void *p = hak_malloc(200000); /* the refill applies the frees: every span empties */
    struct hak_stats b = stats();
    int ours = 0;
    for (int i = 0; i < NMID; i++) ours |= hk_slab_of((uintptr_t)p) == hk_slab_of((uintptr_t)mids[i]);
    CHECK(ours);
    CHECKF(b.acquire_stage1 + b.acquire_stage2 + b.acquire_stage3_cache + b.acquire_stage3_mmap ==
               a.acquire_stage1 + a.acquire_stage2 + a.acquire_stage3_cache + a.acquire_stage3_mmap,
           "stage 1 %zu -> %zu, stage 2 %zu -> %zu", a.acquire_stage1, b.acquire_stage1,
           a.acquire_stage2, b.acquire_stage2);
    hak_free(p); /* an own free empties the span again: kept only within the soft cap */
    if (hk_pol_soft_cap(c) == 0) CHECK(hk_tls.heap->nretained[c] == 0);
}

/* --- fork -------------------------------------------------------------------------------- */
static atomic_int stop_spinner;
static void *spinner(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_spinner)) hak_free(hak_malloc(128));
    return NULL;
}

/* --- the large tier's arenas ------------------------------------------------------------ */
/* Whether blocks p and q, both n bytes long, share a byte. */
static int overlap(const void *p, const void *q, size_t n) {
    return (const char *)p < (const char *)q + n && (const char *)q < (const char *)p + n;
}

/* The counters at the start of a test that needs n large arenas or more (it runs with
 * HAKMEM_LARGE_ARENAS=n or more), which it checks. */
static struct hak_stats stats_with_arenas(size_t n) {
    struct hak_stats a = stats();
    CHECKF(a.large_arenas >= n, "%zu large arenas: run with HAKMEM_LARGE_ARENAS=%zu or more",
           a.large_arenas, n);
    return a;
}

/* The arena (1..) of live large block p, or 0 if p is none. */
static unsigned arena_of(const void *p) {
    unsigned k = 0;
    return hk_large_lookup(p, NULL, &k) == HK_LARGE_LIVE ? k : 0;
}

/* Run with HAKMEM_LARGE_ARENAS of 2 or more. A thread (moved to an arena of its own) takes
 * large blocks from its own arena first, a block goes back to the arena that made it whichever
 * thread frees it, and an arena whose free memory fits no request takes a free extent that
 * does from another arena before mapping more. */
#define BIG ((size_t)3 << 20)
#define HUGE_BLOCK ((size_t)96 << 20) /* longer than anything free in the main thread's arena */
static void *big_mine, *big_again, *big_huge;
static unsigned big_main_arena, big_arena, big_again_arena;
static pthread_barrier_t big_bar;

static void *big_worker(void *arg) {
    (void)arg;
    hk_large_arena_move(); /* as if it met another thread in its arena */
    big_mine = hak_malloc(BIG);
    big_arena = arena_of(big_mine);
    if (big_arena != big_main_arena) {
        memset(big_mine, 2, BIG);
        big_huge = hak_malloc(HUGE_BLOCK);
        hak_free(big_huge); /* free in this arena only */
    }
    pthread_barrier_wait(&big_bar); /* main looks at the arena */
    if (big_arena == big_main_arena) { /* the same arena as main's: let another thread try */
        hak_free(big_mine);
        return NULL;
    }
    pthread_barrier_wait(&big_bar); /* main frees big_mine, then takes blocks */
    pthread_barrier_wait(&big_bar);
    big_again = hak_malloc(BIG);
    big_again_arena = arena_of(big_again);
    hak_free(big_again);
    return NULL;
}

TEST(large_blocks_go_back_to_their_arena) {
    struct hak_stats a = stats_with_arenas(2);
    void *m = hak_malloc(BIG);
    memset(m, 1, BIG);
    big_main_arena = arena_of(m);
    CHECK(big_main_arena != 0);
    pthread_barrier_init(&big_bar, NULL, 2);
    pthread_t t;
    big_arena = big_main_arena;
    for (unsigned i = 0; i < a.large_arenas && big_arena == big_main_arena; i++) {
        pthread_create(&t, NULL, big_worker, NULL);
        pthread_barrier_wait(&big_bar);
        if (big_arena == big_main_arena) pthread_join(t, NULL);
    }
    CHECKF(big_arena != big_main_arena, "every thread got the main thread's arena %u",
           big_main_arena);
    if (big_arena == big_main_arena) return;
    pthread_barrier_wait(&big_bar);
    hak_free(m);
    hak_free(big_mine); /* from this thread: back to the worker's arena */
    CHECKF(arena_of(big_mine) == 0, "a freed block is still live");
    /* This thread's own free block serves it, not the worker's. */
    void *mine = hak_malloc(BIG);
    CHECKF(arena_of(mine) == big_main_arena && mine != big_mine,
           "got %p of arena %u, the main thread's arena is %u", mine,
           arena_of(mine), big_main_arena);
    /* Nothing free here fits this one: the worker's free extent moves to this arena and
     * serves it. */
    size_t steals = stats().large_steals;
    void *huge = hak_malloc(HUGE_BLOCK);
    /* Overlapping it, not at its start: a freed block this long gives its pages back at
     * once, and a block is cut from a released extent's start. */
    CHECKF(overlap(huge, big_huge, HUGE_BLOCK) && arena_of(huge) == big_main_arena,
           "got %p of arena %u, not the worker's free memory at %p in this thread's arena %u",
           huge, arena_of(huge), big_huge, big_main_arena);
    CHECKF(stats().large_steals == steals + 1, "%zu extents moved, %zu before",
           stats().large_steals, steals);
    hak_free(huge);
    hak_free(mine);
    pthread_barrier_wait(&big_bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&big_bar);
    CHECKF(big_again_arena == big_arena, "the worker got a block of arena %u, not of its own %u",
           big_again_arena, big_arena);
    struct hak_stats b = stats();
    CHECKF(b.large_now == a.large_now, "%zu large blocks live, %zu before", b.large_now,
           a.large_now);
}

/* Threads share the first arena until they meet there: threads that follow each other, and
 * threads that run together but never ask at the same time, take their blocks from the main
 * thread's arena (one heap: what one frees, the next reuses). */
static pthread_barrier_t arena_bar;
static pthread_mutex_t arena_turn = PTHREAD_MUTEX_INITIALIZER;
static int arena_bar_on;
static void *arena_probe(void *arg) {
    if (arena_bar_on) pthread_mutex_lock(&arena_turn); /* one request at a time */
    void *p = hak_malloc(BIG);
    *(unsigned *)arg = arena_of(p);
    hak_free(p);
    if (arena_bar_on) {
        pthread_mutex_unlock(&arena_turn);
        pthread_barrier_wait(&arena_bar); /* both bound before either exits */
    }
    return NULL;
}

TEST(threads_share_an_arena_until_they_meet) {
    (void)stats_with_arenas(2);
    void *m = hak_malloc(BIG); /* the main thread bound to an arena */
    unsigned main_arena = arena_of(m), seq[4], two[2];
    pthread_t t[2];
    arena_bar_on = 0;
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[0], NULL, arena_probe, &seq[i]);
        pthread_join(t[0], NULL);
    }
    CHECKF(main_arena == 1, "the main thread is in arena %u, not the first", main_arena);
    for (int i = 0; i < 4; i++)
        CHECKF(seq[i] == main_arena, "thread %d took arena %u, not the main thread's %u", i,
               seq[i], main_arena);
    arena_bar_on = 1;
    pthread_barrier_init(&arena_bar, NULL, 2);
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, arena_probe, &two[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&arena_bar);
    CHECKF(two[0] == main_arena && two[1] == main_arena,
           "threads running together, asking in turn, took arenas %u and %u (main's %u)", two[0],
           two[1], main_arena);
    hak_free(m);
}

/* A thread whose large requests keep meeting another thread's in its arena moves to another
 * arena and stays; one that meets now and then does not. A meeting is made here by holding
 * every arena's lock (hk_large_lock_all, fork's) while the thread allocates: it finds its lock
 * taken, and waits (where it moves: for the new arena's lock) until they are let go. The
 * thread meets once, then makes HK_ARENA_MEET_EVERY requests that meet nobody, which cancel
 * that meeting, then meets HK_ARENA_MEETS - 1 times (not enough), then once more. */
#define MEETINGS (HK_ARENA_MEETS + 1)
static _Atomic int meet_trying;
static _Atomic pid_t meet_tid;
static unsigned meet_arena[MEETINGS + 2];
static pthread_barrier_t meet_bar;

/* A request of the thread, which the main thread makes meet its own if `held`. */
static unsigned meet_request(int held) {
    if (held) {
        pthread_barrier_wait(&meet_bar); /* the main thread takes every arena's lock */
        pthread_barrier_wait(&meet_bar);
        atomic_store(&meet_trying, 1);
    }
    void *p = hak_malloc(BIG);
    unsigned k = arena_of(p);
    hak_free(p);
    if (held) {
        atomic_store(&meet_trying, 0);
        pthread_barrier_wait(&meet_bar); /* the locks were let go */
    }
    return k;
}

static void *meet_worker(void *arg) {
    (void)arg;
    atomic_store(&meet_tid, (pid_t)syscall(SYS_gettid));
    meet_arena[0] = meet_request(0);
    meet_arena[1] = meet_request(1);
    for (int i = 0; i < HK_ARENA_MEET_EVERY; i++) (void)meet_request(0);
    for (int i = 2; i <= MEETINGS; i++) meet_arena[i] = meet_request(1);
    meet_arena[MEETINGS + 1] = meet_request(0);
    return NULL;
}

/* Whether thread tid of this process sleeps (state S in /proc: waiting on a lock). Called with
 * the arenas' locks held: it must not allocate (stdio's buffers would, and a malloc that ran
 * the decay tick then waited for those locks), hence open and read. */
static int sleeping(pid_t tid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    const char *e = strrchr(buf, ')'); /* the name may hold spaces */
    return e && e[1] == ' ' && e[2] == 'S';
}

TEST(a_thread_whose_requests_keep_meeting_others_moves) {
    (void)stats_with_arenas(2);
    void *m = hak_malloc(BIG);
    unsigned main_arena = arena_of(m);
    hak_free(m);
    atomic_store(&meet_trying, 0);
    pthread_barrier_init(&meet_bar, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, meet_worker, NULL);
    for (int i = 0; i < MEETINGS; i++) {
        pthread_barrier_wait(&meet_bar);
        hk_large_lock_all();
        pthread_barrier_wait(&meet_bar);
        /* Once it tries, it sleeps only on an arena's lock (10 s at most). */
        while (!atomic_load(&meet_trying)) sched_yield();
        for (int j = 0; j < 10000 && !sleeping(atomic_load(&meet_tid)); j++) usleep(1000);
        hk_large_unlock_all();
        pthread_barrier_wait(&meet_bar);
    }
    pthread_join(t, NULL);
    pthread_barrier_destroy(&meet_bar);
    CHECKF(main_arena == 1 && meet_arena[0] == 1,
           "the main thread in arena %u and the new one in %u, not both in the first",
           main_arena, meet_arena[0]);
    for (int i = 1; i < MEETINGS; i++)
        CHECKF(meet_arena[i] == 1, "meeting %d of %d moved the thread to arena %u", i,
               MEETINGS, meet_arena[i]);
    CHECKF(meet_arena[MEETINGS] != 0 && meet_arena[MEETINGS] != 1,
           "after %d meetings in a row the thread took arena %u, the first", HK_ARENA_MEETS,
           meet_arena[MEETINGS]);
    CHECKF(meet_arena[MEETINGS + 1] == meet_arena[MEETINGS],
           "the thread went back to arena %u from %u", meet_arena[MEETINGS + 1],
           meet_arena[MEETINGS]);
}

/* Threads that meet spread over the arenas: as many threads as there are arenas (the main
 * thread among them), all in the first, each moved in turn as a meeting would move it, end in
 * an arena each. A move goes only where it leaves both arenas with fewer threads than the one
 * it left had: a thread alone in its arena stays. Run with HAKMEM_LARGE_ARENAS above 8 to see
 * more than 8 arenas: 16 threads on 16 cores shared 8 arenas two by two, each pair queuing
 * on one lock, when 8 was the most there could be. */
#define ARENA_THREADS_MAX 64
static pthread_barrier_t arena_all_bar;
static void *arena_holder(void *arg) {
    void *p = hak_malloc(BIG); /* bound to the first arena */
    hak_free(p);
    pthread_barrier_wait(&arena_all_bar); /* every thread bound before any moves */
    pthread_mutex_lock(&arena_turn);
    hk_large_arena_move();
    p = hak_malloc(BIG);
    *(unsigned *)arg = arena_of(p);
    hk_large_arena_move(); /* alone in its arena now: stays */
    void *q = hak_malloc(BIG);
    if (arena_of(q) != *(unsigned *)arg) *(unsigned *)arg = 0;
    pthread_mutex_unlock(&arena_turn);
    pthread_barrier_wait(&arena_all_bar); /* every thread moved before any exits */
    hak_free(q);
    hak_free(p);
    return NULL;
}

TEST(threads_that_meet_spread_over_the_arenas) {
    struct hak_stats a = stats_with_arenas(2);
    const char *env = getenv("HAKMEM_LARGE_ARENAS");
    unsigned long want = env ? strtoul(env, NULL, 10) : 0;
    CHECKF(want == 0 || a.large_arenas == want, "%zu large arenas, HAKMEM_LARGE_ARENAS=%lu",
           a.large_arenas, want);
    size_t n = a.large_arenas < ARENA_THREADS_MAX ? a.large_arenas : ARENA_THREADS_MAX;
    if (n < 2) return;
    void *m = hak_malloc(BIG);
    unsigned got[ARENA_THREADS_MAX];
    got[0] = arena_of(m);
    pthread_t t[ARENA_THREADS_MAX];
    pthread_barrier_init(&arena_all_bar, NULL, (unsigned)n - 1);
    for (size_t i = 1; i < n; i++) pthread_create(&t[i], NULL, arena_holder, &got[i]);
    for (size_t i = 1; i < n; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&arena_all_bar);
    hak_free(m);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            CHECKF(got[i] != got[j] && got[i] != 0,
                   "threads %zu and %zu of %zu took arenas %u and %u after moving", j, i, n,
                   got[j], got[i]);
}

/* Threads swap large blocks through shared slots, each freeing what others made: every block
 * keeps its contents and goes back (under TSan: the arenas and the page map race-free). */
#define BIG_SLOTS 8
#define BIG_STEPS 150
static _Atomic(unsigned char *) big_slots[BIG_SLOTS];

static void *big_swapper(void *arg) {
    uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < BIG_STEPS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = ((size_t)1 << 20) + 4096 + (size_t)(x % (3u << 20));
        unsigned char *p = hak_malloc(n);
        if (!p) return (void *)1;
        unsigned char tag = (unsigned char)(x >> 32);
        memcpy(p, &n, sizeof n);
        p[sizeof n] = tag;
        p[n - 1] = tag;
        p = atomic_exchange(&big_slots[(x >> 40) % BIG_SLOTS], p);
        if (p) {
            size_t m;
            memcpy(&m, p, sizeof m);
            if (p[m - 1] != p[sizeof m]) return (void *)1;
            hak_free(p);
        }
    }
    return NULL;
}

TEST(large_blocks_swapped_between_threads_lose_nothing) {
    struct hak_stats a = stats();
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, big_swapper, (void *)(i + 1));
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += r != NULL;
    }
    CHECKF(bad == 0, "%d threads found a block damaged or got none", bad);
    for (int i = 0; i < BIG_SLOTS; i++) hak_free(atomic_exchange(&big_slots[i], NULL));
    struct hak_stats b = stats();
    CHECKF(b.large_now == a.large_now, "%zu large blocks live, %zu before", b.large_now,
           a.large_now);
}

/* Run with HAKMEM_LARGE_ARENAS of 2 or more. A thread that frees blocks of another thread's
 * arena leaves each free in one of that arena's slots, for whoever next takes its lock: more
 * frees than there are slots take the lock and make them all, the thread exits with the rest
 * waiting, and the arena's next block (here, the main thread's) makes those first, so nothing
 * is lost and the memory serves the arena's own threads again. */
#define QUEUED_BLOCKS 40 /* more than an arena's slots (HK_PEND) */
static void *queued[QUEUED_BLOCKS];
static unsigned queued_arena;

static void *free_queued(void *arg) {
    (void)arg;
    hk_large_arena_move();
    void *own = hak_malloc(BIG); /* this thread's own arena */
    queued_arena = arena_of(own);
    hak_free(own);
    if (queued_arena == big_main_arena) return NULL;
    for (int i = 0; i < QUEUED_BLOCKS; i++) hak_free(queued[i]);
    return NULL;
}

TEST(frees_left_for_an_arenas_lock_are_made) {
    struct hak_stats a = stats_with_arenas(2);
    void *m = hak_malloc(BIG); /* the main thread bound to an arena */
    big_main_arena = arena_of(m);
    hak_free(m);
    for (int i = 0; i < QUEUED_BLOCKS; i++) {
        queued[i] = hak_malloc(((size_t)1 << 20) + 4096 * (size_t)(i + 1));
        memset(queued[i], i, 4096);
    }
    pthread_t t;
    pthread_create(&t, NULL, free_queued, NULL);
    pthread_join(t, NULL);
    CHECKF(queued_arena != big_main_arena && queued_arena != 0,
           "the freeing thread took the main thread's arena %u", big_main_arena);
    /* The last 7 wait in the slots: this block's lock holder makes them first. The memory of
     * the frees serves the arena's own thread again. */
    void *again = hak_malloc(((size_t)1 << 20) + 4096);
    int reused = 0;
    for (int i = 0; i < QUEUED_BLOCKS; i++)
        reused |= (char *)again >= (char *)queued[i] &&
                  (char *)again < (char *)queued[i] + ((size_t)1 << 20) + 4096 * (size_t)(i + 1);
    CHECKF(reused && arena_of(again) == big_main_arena,
           "got %p of arena %u, none of the blocks freed on the other thread", again,
           arena_of(again));
    hak_free(again);
    struct hak_stats b = stats();
    CHECKF(b.large_now == a.large_now, "%zu large blocks live, %zu before", b.large_now,
           a.large_now);
    CHECKF(b.large_queued_frees - a.large_queued_frees >= QUEUED_BLOCKS - 1 &&
               b.large_queued_frees - a.large_queued_frees <= QUEUED_BLOCKS,
           "%zu frees left for the lock's holder, of %d by another arena's thread",
           b.large_queued_frees - a.large_queued_frees, QUEUED_BLOCKS);
}
/* A block freed into another arena's slots still serves a thread of another arena that finds
 * no room in its own: that arena's frees are made before its free memory is looked at. */
#define WAITING_BLOCK ((size_t)256 << 20) /* longer than anything free in main's arena */
static void *waiting_block;
static pthread_barrier_t waiting_bar;

static void *hold_an_arena(void *arg) {
    (void)arg;
    hk_large_arena_move();
    waiting_block = hak_malloc(WAITING_BLOCK); /* this thread's arena, held until the end */
    memset(waiting_block, 1, 4096);
    pthread_barrier_wait(&waiting_bar);
    pthread_barrier_wait(&waiting_bar);
    return NULL;
}

TEST(a_free_waiting_in_slots_still_serves_other_arenas) {
    struct hak_stats a = stats_with_arenas(2);
    void *m = hak_malloc(BIG);
    unsigned main_arena = arena_of(m);
    hak_free(m);
    pthread_barrier_init(&waiting_bar, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, hold_an_arena, NULL);
    pthread_barrier_wait(&waiting_bar);
    unsigned held = arena_of(waiting_block);
    CHECKF(held != 0 && held != main_arena, "the thread took the main thread's arena %u",
           main_arena);
    hak_free(waiting_block); /* another arena's block: it waits in that arena's slots */
    void *again = hak_malloc(WAITING_BLOCK);
    CHECKF(overlap(again, waiting_block, WAITING_BLOCK) && arena_of(again) == main_arena,
           "got %p of arena %u, not the memory freed at %p, moved into this thread's arena %u",
           again, arena_of(again), waiting_block, main_arena);
    hak_free(again);
    pthread_barrier_wait(&waiting_bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&waiting_bar);
    struct hak_stats b = stats();
    CHECKF(b.large_now == a.large_now, "%zu large blocks live, %zu before", b.large_now,
           a.large_now);
}

TEST(fork_while_other_thread_allocates) {
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    int ok = 1;
    for (int i = 0; i < 20 && ok; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int j = 0; j < 10000; j++) hak_free(hak_malloc((size_t)(j % 3000) + 1));
            void *big = hak_malloc(1 << 20);
            hak_free(big);
            _exit(0);
        }
        int st;
        ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    atomic_store(&stop_spinner, 1);
    pthread_join(t, NULL);
    CHECK(ok);
}

/* glibc carves a thread's static TLS (every module's, hakmem's among them) out of the stack
 * the thread asks for, and pthread_create fails with EINVAL where it cannot hold it: with its
 * heap in TLS (30 KiB) hakmem refused every thread of 32 KiB of stack or less (Node.js's
 * inspector thread asks for 16 KiB). A thread of the smallest stack starts, keeps most of it
 * (malloc's slow paths below 4 KiB of the thread's own frames, where the dynamic linker may
 * resolve a symbol on the way, saving AVX-512 state: 3 KiB), and allocates and frees in
 * every tier, its own blocks and another thread's. */
static void *small_stack_given; /* a block the main thread allocated, freed by the thread */

static HK_NOINLINE int small_stack_deep(int depth) {
    volatile char frame[1024];
    frame[0] = (char)depth;
    if (depth > 0) return small_stack_deep(depth - 1) + frame[0] - (char)depth;
    int ok = 1;
    for (size_t n = 8; n <= ((size_t)2 << 20); n *= 2) {
        char *p = hak_malloc(n);
        ok &= p != NULL;
        if (!p) break;
        p[0] = p[n - 1] = 7;
        ok &= p[0] == 7 && p[n - 1] == 7;
        hak_free(p);
    }
    return ok;
}

static void *small_stack_body(void *arg) {
    (void)arg;
    int ok = small_stack_deep(3); /* 4 frames of 1 KiB and more */
    hak_free(small_stack_given);
    void *q[64];
    for (int i = 0; i < 64; i++) ok &= (q[i] = hak_malloc(48)) != NULL;
    for (int i = 0; i < 64; i++) hak_free(q[i]);
    return ok ? (void *)1 : NULL;
}

TEST(threads_with_the_smallest_stack_start_and_allocate) {
    for (int round = 0; round < 3; round++) {
        small_stack_given = hak_malloc(100);
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN);
        pthread_t t;
        int rc = pthread_create(&t, &a, small_stack_body, NULL);
        pthread_attr_destroy(&a);
        CHECKF(rc == 0, "pthread_create with a stack of %zu bytes: %s", (size_t)PTHREAD_STACK_MIN,
               strerror(rc));
        if (rc) {
            hak_free(small_stack_given);
            return;
        }
        void *ok = NULL;
        pthread_join(t, &ok);
        CHECK(ok != NULL);
    }
}

/* A thread of the smallest stack may ask for the report (malloc_stats, or exit() with
 * HAKMEM_STATS set runs it on the exiting thread): the report's text (32 KiB) was built on
 * the stack, 40 KiB of frame under 16 KiB of stack, written over the guard page into
 * whatever lay below. In a child, with the report sent to /dev/null: a crash is the child's,
 * and reported here. */
static void *small_stack_report(void *arg) {
    (void)arg;
    volatile char frame[2048];
    frame[0] = 1;
    struct hak_stats *s = hak_malloc(sizeof *s);
    if (!s) return NULL;
    hak_stats_get(s);
    int ok = s->threads_started >= 1 && frame[0] == 1;
    hak_free(s);
    hak_stats_print();
    return ok ? (void *)1 : NULL;
}

TEST(a_thread_of_the_smallest_stack_prints_the_report) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 2) < 0) _exit(3);
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN);
        pthread_t t;
        if (pthread_create(&t, &a, small_stack_report, NULL) != 0) _exit(4);
        void *ok = NULL;
        pthread_join(t, &ok);
        _exit(ok ? 0 : 5);
    }
    int st = 0;
    CHECKF(pid > 0 && waitpid(pid, &st, 0) == pid, "fork or waitpid failed");
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child %s %d",
           WIFEXITED(st) ? "exited with" : "was killed by signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

int main(void) {
    TEST_MAIN_BEGIN("threads");
#ifndef HK_HARDENED
    RUN(a_thread_that_owns_no_slab_touches_one_page_of_its_record); /* first: see there */
#endif
    RUN(threads_with_the_smallest_stack_start_and_allocate);
    RUN(a_thread_of_the_smallest_stack_prints_the_report);
    RUN(remote_frees_are_reclaimed_by_owner);
    RUN(thread_exit_hands_over_its_waiting_batches);
    RUN(orphan_blocks_adopted_meanwhile_reach_the_new_owner);
    RUN(a_thread_that_only_frees_batches_them);
    RUN(remote_frees_into_a_blocked_owner_are_applied);
    RUN(a_helper_leaves_the_owned_table_alone);
    RUN(classes_used_briefly_give_their_slabs_back);
    RUN(blocks_freed_here_are_reused_here);
    RUN(mid_blocks_freed_here_are_reused_here);
    RUN(mid_blocks_a_thread_cannot_keep_serve_every_thread);
    RUN(a_thread_keeps_no_big_mid_blocks_of_other_threads);
    RUN(big_small_blocks_a_thread_cannot_keep_serve_every_thread);
    RUN(an_idle_transfer_list_goes_home);
#ifndef HK_HARDENED
    RUN(a_refill_takes_a_few_blocks_of_a_small_class_from_its_transfer_list);
#endif
    RUN(a_balanced_thread_goes_on_reusing_other_threads_blocks);
    RUN(a_burst_of_other_threads_blocks_beyond_the_room_goes_home);
    RUN(blocks_of_adopted_slabs_go_home);
    RUN(blocks_of_orphans_are_not_stashed);
    RUN(a_thread_frees_by_slab_metadata_while_it_frees_others_blocks);
    RUN(frees_in_turn_of_own_and_others_blocks_keep_freeing_by_slab_metadata);
#ifndef HK_HARDENED
    RUN(many_threads_take_their_first_blocks_from_a_shared_slab);
    RUN(a_shared_slab_carved_to_its_end_is_an_orphan_like_any_other);
    RUN(a_spent_shared_slab_serves_as_shared_again_not_as_a_threads_own);
    RUN(big_classes_share_a_block_at_a_time);
    RUN(a_thread_after_one_that_outgrew_its_shared_blocks_takes_none);
    RUN(a_shared_block_freed_by_a_thread_that_waits_serves_the_next_thread);
#endif
    RUN(slabs_of_exited_thread_are_released_when_freed);
    RUN(orphans_with_free_blocks_are_adopted);
    RUN(a_heap_set_up_again_after_exit_starts_clean);
    RUN(an_exited_threads_heap_goes_whole_to_the_next_thread);
    RUN(a_heap_taken_over_has_its_slabs_entered_at_once);
    RUN(a_heap_nobody_takes_is_given_up_and_loses_nothing);
    RUN(a_thread_that_frees_an_exited_threads_blocks_takes_its_heap_in);
    RUN(a_thread_that_frees_an_exited_threads_big_blocks_takes_its_heap_in);
    RUN(a_thread_that_took_a_heap_in_frees_by_its_table_again);
    RUN(a_thread_that_frees_several_exited_threads_blocks_by_turns_takes_each_heap_in);
    RUN(a_thread_that_first_frees_a_parked_heaps_block_takes_that_heap_over);
    RUN(a_new_thread_takes_over_the_oldest_parked_heap);
    RUN(thread_churn_keeps_memory_flat);
    RUN(a_thread_whose_first_call_frees_a_mid_block);
    RUN(producer_consumer_every_free_remote);
    RUN(a_producer_takes_back_the_spans_its_consumer_emptied);
    RUN(large_blocks_go_back_to_their_arena);
    RUN(large_blocks_swapped_between_threads_lose_nothing);
    RUN(frees_left_for_an_arenas_lock_are_made);
    RUN(a_free_waiting_in_slots_still_serves_other_arenas);
    RUN(threads_share_an_arena_until_they_meet);
    RUN(a_thread_whose_requests_keep_meeting_others_moves);
    RUN(threads_that_meet_spread_over_the_arenas);
    RUN(fork_while_other_thread_allocates);
    /* Last: the pages its owner's emptied spans give back, wanted again by the tests after it,
     * lengthen ACE's purge delay, which classes_used_briefly_give_their_slabs_back waits for. */
    RUN(a_blocked_owner_is_helped_while_frees_keep_coming);
#ifndef HK_HARDENED
    RUN(an_idle_owners_partial_slabs_serve_other_threads);
    RUN(an_owner_idle_after_one_burst_lets_its_slabs_go);
#endif
    RUN(a_thread_freeing_orphans_while_helped_loses_nothing);
    TEST_MAIN_END();
}
