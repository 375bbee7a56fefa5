/* Threads: remote frees are reclaimed by the owner, a thread's slabs outlive it as orphans
 * until freed or adopted, threads created and joined forever keep memory flat, and fork in a
 * threaded program leaves a working allocator on both sides. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "hakmem.h"
#include "heap.h"

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
    pthread_t t;
    pthread_create(&t, NULL, free_all, NULL);
    pthread_join(t, NULL);
    struct hak_stats b = stats();
    CHECK(b.remote_free >= a.remote_free + NB);
    /* The owner applies them on its next refill: the same memory serves the next round. */
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(64);
    struct hak_stats c = stats();
    CHECK(c.acquire_stage3_mmap == b.acquire_stage3_mmap);
    CHECK(c.slabs_active_now <= b.slabs_active_now);
    CHECK(first->state == HK_SLOT_ACTIVE);
    for (int i = 0; i < NB; i++) hak_free(blocks[i]);
}

/* --- orphans --------------------------------------------------------------------------- */
static void *alloc_and_exit(void *arg) {
    size_t n = (size_t)(uintptr_t)arg;
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(n);
    return NULL;
}

TEST(slabs_of_exited_thread_are_released_when_freed) {
    struct hak_stats a = stats();
    pthread_t t;
    pthread_create(&t, NULL, alloc_and_exit, (void *)(uintptr_t)96);
    pthread_join(t, NULL);
    struct hak_stats b = stats();
    CHECK(b.slab_abandon > a.slab_abandon);
    for (int i = 0; i < NB; i++) hak_free(blocks[i]);
    struct hak_stats c = stats();
    CHECKF(c.slabs_active_now <= a.slabs_active_now, "active slabs %zu, before %zu",
           c.slabs_active_now, a.slabs_active_now);
}

static void *alloc_half_free_exit(void *arg) {
    (void)arg;
    for (int i = 0; i < NB; i++) blocks[i] = hak_malloc(176);
    for (int i = 0; i < NB; i += 2) hak_free(blocks[i]), blocks[i] = NULL;
    return NULL;
}

TEST(orphans_with_free_blocks_are_adopted) {
    pthread_t t;
    pthread_create(&t, NULL, alloc_half_free_exit, NULL);
    pthread_join(t, NULL);
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

/* --- fork -------------------------------------------------------------------------------- */
static atomic_int stop_spinner;
static void *spinner(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_spinner)) hak_free(hak_malloc(128));
    return NULL;
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

int main(void) {
    TEST_MAIN_BEGIN("threads");
    RUN(remote_frees_are_reclaimed_by_owner);
    RUN(slabs_of_exited_thread_are_released_when_freed);
    RUN(orphans_with_free_blocks_are_adopted);
    RUN(thread_churn_keeps_memory_flat);
    RUN(producer_consumer_every_free_remote);
    RUN(fork_while_other_thread_allocates);
    TEST_MAIN_END();
}
