/* API conformance with glibc's semantics. Built twice: against the hak_* API (linked with the
 * library), and with -DUSE_LIBC_NAMES against the standard names, to run under LD_PRELOAD;
 * that build also checks that the pointers it gets really come from hakmem. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "hakmem.h"

/* C23 names that glibc 2.36 neither declares nor defines: weak, so the preload build links
 * and binds them to hakmem's at run time. */
void free_sized(void *, size_t) __attribute__((weak));
void free_aligned_sized(void *, size_t, size_t) __attribute__((weak));

/* Sizes kept opaque so the compiler does not reject the impossible requests at build time. */
static volatile size_t v_size_max = SIZE_MAX, v_ptrdiff_over = (size_t)PTRDIFF_MAX + 1;
static volatile size_t v_half = SIZE_MAX / 2, v_quarter = SIZE_MAX / 4, v_2_33 = (size_t)1 << 33;

#ifdef USE_LIBC_NAMES
#define A(name) name
#define USABLE malloc_usable_size
static int (*owns)(const void *);
#else
#define A(name) hak_##name
#define USABLE hak_usable_size
#define owns hak_owns
#endif

static int aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

TEST(blocks_aligned_and_usable_for_every_size) {
    for (size_t n = 1; n <= 70000; n += (n < 2048 ? 1 : 97)) {
        char *p = A(malloc)(n);
        CHECKF(p != NULL, "n=%zu", n);
        if (!p) return;
        CHECKF(n < 16 || aligned(p, 16), "n=%zu p=%p", n, (void *)p);
        CHECKF(USABLE(p) >= n, "n=%zu usable=%zu", n, USABLE(p));
        CHECK(owns(p));
        p[0] = 1;
        p[n - 1] = 2;
        A(free)(p);
    }
}

TEST(malloc_zero_gives_unique_pointers) {
    void *a = A(malloc)(0), *b = A(malloc)(0);
    CHECK(a != NULL && b != NULL && a != b);
    A(free)(a);
    A(free)(b);
}

TEST(free_null_does_nothing) {
    A(free)(NULL);
    CHECK(USABLE(NULL) == 0);
}

TEST(impossible_sizes_give_enomem) {
    errno = 0;
    CHECK(A(malloc)(v_size_max) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(A(malloc)(v_ptrdiff_over) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(A(calloc)(v_half, 3) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(A(calloc)(v_2_33, v_2_33) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(A(reallocarray)(NULL, v_half, 3) == NULL && errno == ENOMEM);
    char *p = A(malloc)(10);
    strcpy(p, "intact");
    char *volatile keep = p; /* a failed realloc leaves the block alone: still usable */
    errno = 0;
    CHECK(A(realloc)(p, v_size_max) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(A(reallocarray)(keep, v_quarter, 8) == NULL && errno == ENOMEM);
    CHECK(strcmp(keep, "intact") == 0);
    A(free)(keep);
}

TEST(calloc_zeroes) {
    static const size_t sizes[] = {1, 16, 100, 1000, 5000, 40000, 300000};
    for (unsigned i = 0; i < 7; i++) {
        /* Dirty a block of the same size first so calloc has to clear a reused one. */
        char *d = A(malloc)(sizes[i]);
        memset(d, 0xff, sizes[i]);
        A(free)(d);
        unsigned char *p = A(calloc)(1, sizes[i]);
        CHECK(p != NULL);
        size_t nz = 0;
        for (size_t j = 0; j < sizes[i]; j++) nz += p[j] != 0;
        CHECKF(nz == 0, "size %zu has %zu non-zero bytes", sizes[i], nz);
        A(free)(p);
    }
    void *z = A(calloc)(0, 5);
    CHECK(z != NULL);
    A(free)(z);
}

TEST(realloc_semantics) {
    char *p = A(realloc)(NULL, 40); /* realloc(NULL, n) is malloc(n) */
    CHECK(p != NULL);
    memset(p, 'a', 40);
    for (size_t j = 0; j < 40; j += 7) p[j] = 'b';
    char *q = A(realloc)(p, 44); /* same class: stays in place */
    CHECK(q == p);
    size_t sizes[] = {100, 1000, 20000, 100000, 3000000, 500000, 2000, 30};
    size_t have = 40;
    for (unsigned i = 0; i < 8; i++) {
        char *r = A(realloc)(q, sizes[i]);
        CHECK(r != NULL);
        size_t keep = have < sizes[i] ? have : sizes[i];
        size_t bad = 0;
        for (size_t j = 0; j < keep; j++) bad += r[j] != (char)('a' + (j % 7 == 0));
        CHECKF(bad == 0, "to %zu: %zu bytes changed", sizes[i], bad);
        memset(r, 'a', sizes[i]);
        for (size_t j = 0; j < sizes[i]; j += 7) r[j] = 'b';
        have = sizes[i];
        q = r;
    }
    errno = 0;
    CHECK(A(realloc)(q, 0) == NULL); /* glibc: frees the block */
}

/* A program told a block's usable size may fill all of it (redis sizes its strings so):
 * realloc must keep every usable byte then, in every tier; shrinking in place and growing
 * again keeps what the program wrote. */
TEST(realloc_keeps_the_usable_bytes) {
    size_t sizes[] = {100, 3000, 40000, 70000, 300000, 700000, 2000000};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = A(malloc)(sizes[i]);
        size_t u = USABLE(p);
        CHECK(u >= sizes[i]);
        for (size_t j = 0; j < u; j++) p[j] = (unsigned char)(j * 7 + i);
        unsigned char *q = A(realloc)(p, u * 2 + 1000);
        CHECK(q != NULL);
        size_t bad = 0;
        for (size_t j = 0; j < u; j++) bad += q[j] != (unsigned char)(j * 7 + i);
        CHECKF(bad == 0, "%zu: %zu of the %zu usable bytes lost by realloc", sizes[i], bad, u);
        /* halve in place, write the new size, grow again */
        size_t half = (u * 2 + 1000) / 2;
        unsigned char *r = A(realloc)(q, half);
        CHECK(r != NULL);
        for (size_t j = 0; j < half; j++) r[j] = (unsigned char)(j * 3 + i);
        unsigned char *s = A(realloc)(r, half * 4);
        CHECK(s != NULL);
        bad = 0;
        for (size_t j = 0; j < half; j++) bad += s[j] != (unsigned char)(j * 3 + i);
        CHECKF(bad == 0, "%zu: %zu of %zu bytes lost after a shrink", sizes[i], bad, half);
        A(free)(s);
    }
}

TEST(posix_memalign_checks_alignment) {
    void *p = (void *)1;
    CHECK(A(posix_memalign)(&p, 0, 10) == EINVAL);
    CHECK(A(posix_memalign)(&p, 3, 10) == EINVAL);
    CHECK(A(posix_memalign)(&p, 4, 10) == EINVAL); /* not a multiple of sizeof(void *) */
    CHECK(A(posix_memalign)(&p, 24, 10) == EINVAL);
    CHECK(p == (void *)1); /* untouched on error */
    CHECK(A(posix_memalign)(&p, 8, v_size_max) == ENOMEM);
    for (size_t a = 8; a <= ((size_t)4 << 20); a <<= 1) {
        for (size_t n = 0; n < 3 * a && n < 200000; n += a / 2 + 1) {
            CHECK(A(posix_memalign)(&p, a, n) == 0);
            CHECKF(aligned(p, a), "align %zu n %zu p %p", a, n, p);
            CHECK(USABLE(p) >= n);
            memset(p, 1, n);
            A(free)(p);
        }
    }
}

TEST(aligned_alloc_memalign_valloc_pvalloc) {
    errno = 0;
    CHECK(A(aligned_alloc)(24, 48) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(A(aligned_alloc)(0, 48) == NULL && errno == EINVAL);
    void *p = A(aligned_alloc)(256, 512);
    CHECK(p && aligned(p, 256));
    A(free)(p);
    p = A(memalign)(48, 100); /* glibc rounds the alignment up to 64 */
    CHECK(p && aligned(p, 64));
    A(free)(p);
    p = A(memalign)(65536, 10);
    CHECK(p && aligned(p, 65536));
    A(free)(p);
    /* glibc: an alignment above SIZE_MAX / 2 + 1 is EINVAL; up to it, one that cannot be met
     * is ENOMEM, rounded up to a power of two first. */
    size_t top = ((size_t)-1 >> 1) + 1;
    errno = 0;
    CHECK(A(memalign)(top, 10) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(A(memalign)(top / 2 + 1, 10) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(A(memalign)(top + 1, 10) == NULL && errno == EINVAL);
    long page = sysconf(_SC_PAGESIZE);
    p = A(valloc)(10);
    CHECK(p && aligned(p, (size_t)page));
    A(free)(p);
    p = A(pvalloc)(10);
    CHECK(p && aligned(p, (size_t)page) && USABLE(p) >= (size_t)page);
    A(free)(p);
    p = A(pvalloc)(0);
    CHECK(p && USABLE(p) >= (size_t)page);
    A(free)(p);
    errno = 0;
    CHECK(A(pvalloc)(v_size_max - 10) == NULL && errno == ENOMEM);
}

/* A block aligned to a cache line costs at most a quarter more than one not aligned: from 4 to
 * 32 KiB too, where the first class that is a multiple of 64 bytes serves it (classes there
 * that were not sent it to the next power of two: 8 KiB for 4,200 bytes). */
TEST(aligned_to_a_cache_line_costs_about_what_unaligned_does) {
    for (size_t n = 4000; n <= 33000; n += 40) {
        void *a = NULL, *b = A(malloc)(n);
        CHECK(A(posix_memalign)(&a, 64, n) == 0 && a && b && aligned(a, 64));
        size_t ua = USABLE(a), ub = USABLE(b);
        CHECKF(ua <= ub + ub / 4, "%zu bytes: %zu aligned, %zu not", n, ua, ub);
        A(free)(a);
        A(free)(b);
    }
}

TEST(sized_frees) {
#ifdef USE_LIBC_NAMES
    CHECK(free_sized != NULL && free_aligned_sized != NULL);
    if (!free_sized || !free_aligned_sized) return;
#endif
    /* A sized free with the size asked for frees the block (the thread's cache hands it out
     * next) and reports nothing; a size larger than the block's is a misuse both builds
     * report (tests/misuse.sh), so these must stay within what the build could flag. */
    static const size_t sizes[] = {1, 16, 17, 100, 1000, 4096, 5000, 32768};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = A(malloc)(sizes[i]);
        A(free_sized)(p, sizes[i]);
        void *q = A(malloc)(sizes[i]);
        CHECKF(q == p, "free_sized(%zu) did not free the block", sizes[i]);
        A(free)(q);
    }
    /* After a realloc that shrank the block in place, the size asked for is the new one. */
    char *r = A(malloc)(1000), *r2 = A(realloc)(r, 900);
    CHECK(r2 != NULL);
    A(free_sized)(r2, 900);
    void *p = A(aligned_alloc)(128, 300);
    A(free_aligned_sized)(p, 128, 300);
    void *q = A(aligned_alloc)(128, 300);
    CHECK(q == p);
    A(free_aligned_sized)(q, 128, 300);
    p = A(malloc)(100000);
    A(free_sized)(p, 100000);
    p = A(malloc)(1 << 20);
    A(free_sized)(p, 1 << 20);
}

#ifdef USE_LIBC_NAMES
TEST(glibc_extras_answer_harmlessly) {
    CHECK(mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1);
    void *p = malloc(1000);
    struct mallinfo2 mi = mallinfo2();
    CHECK(mi.arena > 0);
    free(p);
    /* glibc: 1 when memory went back to the OS, 0 when none could; right after a trim
     * nothing is left to release. */
    int r = malloc_trim(0);
    CHECK(r == 0 || r == 1);
    CHECK(malloc_trim(0) == 0);
}

TEST(cxx_style_and_libc_internal_users) {
    /* strdup, getline and qsort's buffer go through the interposed malloc and come back. */
    char *s = strdup("hello");
    CHECK(s && owns(s));
    free(s);
    FILE *f = fopen("/proc/self/status", "r");
    char *line = NULL;
    size_t cap = 0;
    CHECK(f && getline(&line, &cap, f) > 0);
    CHECK(owns(line));
    free(line);
    fclose(f);
}
#endif

int main(void) {
#ifdef USE_LIBC_NAMES
    owns = (int (*)(const void *))dlsym(RTLD_DEFAULT, "hak_owns");
    if (!owns) {
        printf("FAIL: api_preload hakmem is not loaded (run with LD_PRELOAD=libhakmem.so)\n");
        return 1;
    }
    TEST_MAIN_BEGIN("api_preload");
#else
    TEST_MAIN_BEGIN("api");
#endif
    RUN(blocks_aligned_and_usable_for_every_size);
    RUN(malloc_zero_gives_unique_pointers);
    RUN(free_null_does_nothing);
    RUN(impossible_sizes_give_enomem);
    RUN(calloc_zeroes);
    RUN(realloc_semantics);
    RUN(realloc_keeps_the_usable_bytes);
    RUN(posix_memalign_checks_alignment);
    RUN(aligned_alloc_memalign_valloc_pvalloc);
    RUN(aligned_to_a_cache_line_costs_about_what_unaligned_does);
    RUN(sized_frees);
#ifdef USE_LIBC_NAMES
    RUN(glibc_extras_answer_harmlessly);
    RUN(cxx_style_and_libc_internal_users);
#endif
    TEST_MAIN_END();
}
