/* Out of memory: under RLIMIT_AS every mmap beyond the limit fails. For each tier, allocate
 * until hakmem says no, then check that it said so properly (NULL with ENOMEM, or ENOMEM from
 * posix_memalign), that every block it did hand out is intact, that a failed realloc left its
 * block alone, and that once memory is freed allocation succeeds again: no abort, no deadlock,
 * no lost block. Run as its own process (the limit stays for the process's life); not under
 * the sanitizers, whose shadow memory needs more address space than any limit leaves. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "check.h"
#include "hakmem.h"

#define MAX_BLOCKS 100000 /* for the thread test's array */
#define HEADROOM ((size_t)192 << 20) /* address space left to hakmem above its start */

static void *blocks[MAX_BLOCKS];

/* Address space in use now (the VmSize line of /proc/self/status), in bytes. */
static size_t vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

static unsigned char tag(size_t i) { return (unsigned char)(i * 131 + 7); }

/* The blocks of a test are chained through their first word (no array bounds the count);
 * the byte after it, the last byte and one byte per page carry the block's tag: enough to see
 * a block handed out twice or overwritten. */
static void fill(void *p, size_t n, unsigned char t) {
    unsigned char *c = p;
    for (size_t o = sizeof(void *); o < n; o += 4096) c[o] = t;
    c[n - 1] = t;
}

static int intact(const void *p, size_t n, unsigned char t) {
    const unsigned char *c = p;
    for (size_t o = sizeof(void *); o < n; o += 4096)
        if (c[o] != t) return 0;
    return c[n - 1] == t;
}

static int all_zero(const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return 0;
    return 1;
}

enum { PLAIN, CALLOC, ALIGNED, POSIX_ALIGNED };

static void *allocate(int how, size_t n, size_t align, int *err) {
    void *p = NULL;
    errno = 0;
    switch (how) {
    case PLAIN: p = hak_malloc(n); break;
    case CALLOC: p = hak_calloc(1, n); break;
    case ALIGNED: p = hak_aligned_alloc(align, n); break;
    case POSIX_ALIGNED: {
        int r = hak_posix_memalign(&p, align, n);
        *err = r;
        return r ? NULL : p;
    }
    }
    *err = errno;
    return p;
}

/* Fills memory with blocks of n bytes until allocation fails; checks the failure and the
 * blocks; frees them; checks that allocation works again. Twice, so that the tier is seen to
 * be consistent after its first exhaustion. */
static void exhaust(int how, size_t n, size_t align) {
    for (int round = 0; round < 2; round++) {
        size_t count = 0;
        int err = 0;
        void *p, *head = NULL;
        while ((p = allocate(how, n, align, &err)) != NULL) {
            CHECKF(align == 0 || ((uintptr_t)p & (align - 1)) == 0, "misaligned %p", p);
            if (how == CALLOC) CHECKF(all_zero(p, n), "calloc block %zu not zeroed", count);
            fill(p, n, tag(count));
            *(void **)p = head;
            head = p;
            count++;
        }
        CHECKF(err == ENOMEM, "failure gave error %d, not ENOMEM", err);
        CHECKF(count > 0, "no block of %zu bytes at all", n);
        for (size_t i = count; head; head = p) {
            p = *(void **)head;
            i--;
            CHECKF(intact(head, n, tag(i)), "block %zu of %zu damaged", i, count);
            hak_free(head);
        }
        hak_trim(); /* what is cached goes back: a fresh start for the next tier */
        p = allocate(how, n, align, &err);
        CHECKF(p != NULL, "no block of %zu bytes after everything was freed", n);
        hak_free(p);
    }
}

TEST(small_blocks) { exhaust(PLAIN, 64, 0); }
TEST(small_blocks_16) { exhaust(PLAIN, 16, 0); }
TEST(small_calloc) { exhaust(CALLOC, 3000, 0); }
TEST(mid_blocks) { exhaust(PLAIN, 200 << 10, 0); }
TEST(large_blocks) { exhaust(PLAIN, 5 << 20, 0); }
TEST(large_calloc) { exhaust(CALLOC, 3 << 20, 0); }
TEST(aligned_mid) { exhaust(ALIGNED, 100 << 10, 64 << 10); }
TEST(aligned_large) { exhaust(POSIX_ALIGNED, 1 << 20, 2 << 20); }

/* Memory nearly full: realloc that cannot be served returns NULL with ENOMEM and leaves the
 * block as it was, in every tier and across tiers. */
TEST(failed_realloc_keeps_the_block) {
    size_t from[] = {100, 20000, 300 << 10, 3 << 20};
    for (size_t k = 0; k < sizeof from / sizeof from[0]; k++) {
        unsigned char *p = hak_malloc(from[k]);
        CHECK(p != NULL);
        if (!p) continue;
        memset(p, 0xa5, from[k]);
        errno = 0;
        void *q = hak_realloc(p, (size_t)1 << 40); /* far beyond the limit */
        CHECKF(q == NULL && errno == ENOMEM, "realloc(%zu -> 1 TiB) gave %p, errno %d",
               from[k], q, errno);
        int same = 1;
        for (size_t i = 0; i < from[k]; i++) same &= p[i] == 0xa5;
        CHECKF(same, "realloc failure changed the %zu-byte block", from[k]);
        q = hak_realloc(p, from[k] * 2); /* and it can still grow normally */
        CHECK(q != NULL);
        hak_free(q ? q : p);
    }
}

/* Exhausted memory in one thread must not block another: a thread started after the limit was
 * reached (its stack mapped before) allocates, gets NULL or a block, and exits. */
static void *alloc_in_thread(void *arg) {
    (void)arg;
    void *v[64];
    int got = 0;
    for (int i = 0; i < 64; i++)
        if ((v[i] = hak_malloc(4096)) != NULL) got++;
    for (int i = 0; i < 64; i++) hak_free(v[i]);
    return (void *)(intptr_t)got;
}

TEST(threads_when_memory_is_exhausted) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 1 << 20);
    /* Fill memory with large blocks, start a thread, let it try, free. */
    size_t count = 0;
    void *p;
    while (count < MAX_BLOCKS && (p = hak_malloc(1 << 20)) != NULL) blocks[count++] = p;
    pthread_t t;
    int r = pthread_create(&t, &at, alloc_in_thread, NULL);
    if (r == 0) {
        void *got;
        pthread_join(t, &got);
    }
    for (size_t i = 0; i < count; i++) hak_free(blocks[i]);
    hak_trim();
    p = hak_malloc(1 << 20);
    CHECK(p != NULL);
    hak_free(p);
    pthread_attr_destroy(&at);
}

int main(void) {
    TEST_MAIN_BEGIN("oom");
    /* Make the heap and stdio ready, then cap the address space a little above what is used. */
    hak_free(hak_malloc(1));
    printf("%s", "");
    struct rlimit rl = {.rlim_cur = vm_size() + HEADROOM, .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        printf("FAIL: oom setrlimit\n");
        return 1;
    }
    RUN(small_blocks);
    RUN(small_blocks_16);
    RUN(small_calloc);
    RUN(mid_blocks);
    RUN(large_blocks);
    RUN(large_calloc);
    RUN(aligned_mid);
    RUN(aligned_large);
    RUN(failed_realloc_keeps_the_block);
    RUN(threads_when_memory_is_exhausted);
    TEST_MAIN_END();
}
