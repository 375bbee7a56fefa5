/* Heap misuse, one kind per run: `test_misuse CASE` commits the misuse named CASE and then
 * prints "survived"; `test_misuse --list` prints every case with its kind. It links against
 * plain libc, so that any allocator can be put under it with LD_PRELOAD:
 *   tests/misuse.sh         checks what the default and hardened builds of hakmem report;
 *   tests/misuse_matrix.sh  runs every case under every allocator (docs/RELIABILITY.md).
 * After the misuse, a case goes on allocating and freeing a little, as a program would: some
 * errors are only visible to an allocator at its next call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Every misuse below is deliberate. */
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Wmismatched-dealloc"

static char *volatile sink;
static int global_object;

/* A program's next few calls, after the misuse. */
static void carry_on(size_t n) {
    for (int r = 0; r < 3; r++) {
        char *v[8];
        for (int i = 0; i < 8; i++) {
            v[i] = malloc(n);
            if (v[i]) memset(v[i], 0x5a, n);
        }
        for (int i = 0; i < 8; i++) free(v[i]);
    }
}

static char *fresh(size_t n) {
    char *p = malloc(n);
    memset(p, 'a', n);
    return p;
}

/* A fresh block with another block before it: the hardened build finds a write before a
 * block in the trailer of the block before, and a block at the start of a 64 KiB slab (its
 * carve order is random) has none. */
static char *fresh_inner(size_t n) {
    char *p = fresh(n);
    while (((uintptr_t)p & 0xffff) == 0) p = fresh(n);
    return p;
}

/* --- invalid frees ---------------------------------------------------------------------------- */

static void free_stack(void) {
    int local = 0;
    sink = (char *)&local;
    free(sink);
}
static void free_global(void) { free(&global_object); }
static void free_literal(void) { free((void *)"a string literal"); }
static void free_mmap(void) {
    free(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
}
static void free_misaligned(void) { free(fresh(64) + 8); }
static void free_interior(void) { free(fresh(256) + 64); } /* the current slab: fast path */
static void free_interior_48(void) { free(fresh(48) + 16); } /* 16-aligned, no block start */
static void free_uncarved(void) {
    char *q = fresh(1000); /* its slab carves 16 blocks of 1 KiB at a time */
    free((char *)((uintptr_t)q & ~(uintptr_t)0xffff) + 1024 * 60);
}
static void free_interior_owned(void) {
    char *first = fresh(512);
    for (int i = 0; i < 1000; i++) sink = malloc(512); /* a 64 KiB slab holds 128 */
    free(first + 256);
}
static void free_interior_mid(void) { free(fresh(300000) + 4096); }
static void free_interior_large(void) { free(fresh(8 << 20) + 4096); }
static void free_end(void) {
    char *p = fresh(100);
    free(p + malloc_usable_size(p));
}
static void free_unallocated_heap(void) {
    /* 1 MiB beyond a live block: inside the allocator's memory, never handed out */
    char *p = fresh(32);
    free(p + (1 << 20));
}
static void realloc_foreign(void) {
    int local = 0;
    sink = (char *)&local;
    sink = realloc(sink, 100);
}
static void realloc_interior(void) { sink = realloc(fresh(200) + 32, 400); }
static void usable_size_foreign(void) {
    int local = 0;
    sink = (char *)&local;
    printf("%zu\n", malloc_usable_size(sink));
}

/* --- double frees ------------------------------------------------------------------------------ */

static void double_free(void) {
    char *p = fresh(64);
    free(p);
    free(p);
}
static void double_free_later(void) {
    char *a = fresh(64), *b = fresh(64);
    free(a);
    free(b);
    free(a); /* not the block freed last */
}
static void double_free_many_between(void) {
    char *a = fresh(40), *v[100];
    for (int i = 0; i < 100; i++) v[i] = fresh(40);
    free(a);
    for (int i = 0; i < 100; i++) free(v[i]);
    free(a);
}
static void double_free_not_current(void) {
    char *first = fresh(128);
    for (int i = 0; i < 2000; i++) sink = fresh(128); /* several slabs later */
    free(first);
    free(first);
}
static void double_free_after_reuse_cycle(void) {
    /* freed, the slab fills up again without it, then the second free */
    char *p = fresh(96);
    free(p);
    for (int i = 0; i < 50; i++) free(fresh(96));
    free(p);
}
static void double_free_mid(void) {
    char *p = fresh(100000);
    free(p);
    free(p);
}
static void double_free_mid_later(void) {
    char *a = fresh(70000), *b = fresh(70000);
    free(a);
    free(b);
    free(a);
}
static void double_free_large(void) {
    char *p = fresh(8 << 20);
    free(p);
    free(p);
}
static void double_free_large_later(void) {
    char *a = fresh(3 << 20), *b = fresh(3 << 20);
    free(a);
    free(b);
    free(a);
}
static void double_free_calloc(void) {
    char *p = calloc(10, 10);
    sink = p;
    free(p);
    free(p);
}
static void double_free_aligned(void) {
    void *p = NULL;
    if (posix_memalign(&p, 256, 300)) return;
    free(p);
    free(p);
}
static void double_free_after_realloc(void) {
    char *p = fresh(32);
    char *q = realloc(p, 4000); /* moves */
    sink = q;
    free(p);
}
static void double_free_realloc_zero(void) {
    char *p = fresh(32);
    sink = realloc(p, 0); /* frees, as glibc does */
    free(p);
}
static void *free_it(void *p) {
    free(p);
    return NULL;
}
static void *free_it_twice(void *p) {
    free(p);
    free(p);
    return NULL;
}
/* Runs fn(arg) on a thread of its own, to its end. */
static void on_another_thread(void *(*fn)(void *), void *arg) {
    pthread_t t;
    pthread_create(&t, NULL, fn, arg);
    pthread_join(t, NULL);
}
static void double_free_remote(void) {
    /* another thread frees the main thread's block twice */
    char *p = fresh(64);
    char *keep = fresh(64);
    on_another_thread(free_it_twice, p);
    sink = keep;
}
static void double_free_remote_then_owner(void) {
    char *p = fresh(64);
    pthread_t t;
    pthread_create(&t, NULL, free_it, p);
    pthread_join(t, NULL);
    free(p); /* the owner frees what another thread freed already */
}
/* The same with a large block, by a thread that takes its large blocks from an arena of its
 * own: its frees wait in the block's arena for the next holder of that arena's lock, which
 * finds the second one a double free (here the main thread's next large block; with one
 * arena, the free finds it at once). */
static void *free_large_twice(void *p) {
    char *own = fresh(2 << 20);
    free_it_twice(p);
    free(own);
    return NULL;
}
static void double_free_large_remote(void) {
    char *p = fresh(3 << 20);
    on_another_thread(free_large_twice, p);
    free(fresh(3 << 20));
}
/* The same misuse by a thread that allocates the class itself: its frees of other threads'
 * blocks go into its own cache (the stash), on a path of their own. */
static void *stash_free_twice(void *p) {
    char *own = malloc(64); /* the class in use here too */
    free_it_twice(p);
    sink = own;
    return NULL;
}
static void double_free_remote_stashed(void) {
    char *p = fresh(64);
    char *keep = fresh(64);
    on_another_thread(stash_free_twice, p);
    sink = keep;
}
static void *stash_free_one(void *p) {
    char *own = malloc(64);
    free_it(p);
    sink = own;
    return NULL;
}
static void free_interior_remote_stashed(void) {
    on_another_thread(stash_free_one, fresh(64) + 16); /* 16-aligned, no block start */
}
static void free_uncarved_remote_stashed(void) {
    char *q = fresh(64); /* its slab carves a batch of blocks at a time, not all 1024 */
    on_another_thread(stash_free_one, (char *)((uintptr_t)q & ~(uintptr_t)0xffff) + 64 * 1000);
}
static void *alloc_pair(void *out) {
    char **v = out;
    v[0] = fresh(64);
    v[1] = fresh(64); /* keeps the slab alive after the thread exits */
    free(v[0]);
    return NULL;
}
static void double_free_exited_thread(void) {
    char *v[2];
    pthread_t t;
    pthread_create(&t, NULL, alloc_pair, v);
    pthread_join(t, NULL);
    free(v[0]); /* freed by a thread that has exited since */
}
static void realloc_freed(void) {
    char *p = fresh(64);
    free(p);
    sink = realloc(p, 128);
}
static void usable_size_freed(void) {
    char *p = fresh(64);
    free(p);
    printf("%zu\n", malloc_usable_size(p));
}
static void realloc_freed_large(void) {
    char *p = fresh(3 << 20);
    free(p);
    sink = realloc(p, 128);
}
static void usable_size_freed_large(void) {
    char *p = fresh(40 << 20); /* huge: its pages went back at the free */
    free(p);
    printf("%zu\n", malloc_usable_size(p));
}

/* --- overflows (writes past the end) ------------------------------------------------------------ */

static void overflow_1(void) {
    char *p = fresh(24);
    p[24] = 'x';
    free(p);
}
static void overflow_1_odd(void) {
    char *p = fresh(37);
    p[37] = 'x';
    free(p);
}
static void overflow_8(void) {
    char *p = fresh(40);
    memset(p + 40, 'x', 8);
    free(p);
}
static void overflow_32(void) {
    char *p = fresh(64);
    memset(p + 64, 'x', 32);
    free(p);
}
static void overflow_into_free_neighbour(void) {
    char *p = fresh(48), *q = fresh(48);
    free(q);
    memset(p, 'x', 48 + 16); /* the next block is free: its first words */
    carry_on(48);
    free(p);
}
static void overflow_strcpy(void) {
    const char *s = "twelve chars";
    char *p = malloc(strlen(s)); /* the classic: no room for the terminator */
    strcpy(p, s);
    free(p);
}
static void overflow_memcpy(void) {
    char src[200];
    memset(src, 'y', sizeof src);
    char *p = malloc(150);
    memcpy(p, src, 151);
    free(p);
}
static void overflow_elements(void) {
    int *a = malloc(10); /* bytes meant as elements */
    for (int i = 0; i < 10; i++) a[i] = i;
    free(a);
}
static void overflow_mid_1(void) {
    char *p = fresh(50000);
    p[50000] = 'x';
    free(p);
}
static void overflow_calloc_1(void) {
    char *p = calloc(1, 100);
    sink = p;
    p[100] = 'x';
    free(p);
}
static void overflow_after_shrink(void) {
    char *p = fresh(200);
    p = realloc(p, 100); /* shrinks in place */
    memset(p, 'x', 110);
    free(p);
}
static void overflow_realloc(void) {
    char *p = fresh(30);
    p[30] = 'x';
    sink = realloc(p, 60); /* realloc reads the block: the overflow is visible here */
}
static void overflow_64_then_malloc(void) {
    char *p = fresh(64);
    memset(p + 64, 'x', 64);
    carry_on(64);
    free(p);
}

/* --- underflows (writes before the start) ------------------------------------------------------- */

static void underflow_1(void) {
    char *p = fresh_inner(64);
    p[-1] = 'x';
    free(p);
}
static void underflow_8(void) {
    char *p = fresh_inner(64);
    memset(p - 8, 'x', 8);
    free(p);
}
static void underflow_32(void) {
    char *p = fresh_inner(64);
    memset(p - 32, 'x', 32);
    free(p);
}
static void underflow_mid(void) {
    char *p = fresh(50000);
    char *q = fresh(50000);
    q[-1] = 'x';
    free(q);
    free(p);
}

/* --- use after free ---------------------------------------------------------------------------- */

static void uaf_write_first_word(void) {
    char *p = fresh(64);
    free(p);
    memset(p, 'A', 8); /* the free list's link */
    carry_on(64);
}
static void uaf_write_whole(void) {
    char *p = fresh(128);
    free(p);
    memset(p, 'B', 128);
    carry_on(128);
}
static void uaf_write_string(void) {
    char *p = fresh(32);
    free(p);
    strcpy(p, "dangling");
    carry_on(32);
}
static void uaf_write_then_free(void) {
    char *p = fresh(64);
    free(p);
    p[20] = 'C'; /* past the allocator's words */
    free(p);
}
static void uaf_write_remote(void) {
    char *p = fresh(64);
    pthread_t t;
    pthread_create(&t, NULL, free_it, p);
    pthread_join(t, NULL);
    memset(p, 'D', 16);
    carry_on(64);
}
/* A write to a block waiting in the freeing thread's batch for orphans (the blocks of slabs
 * whose thread exited, src/heap.h): the thread that allocated them exits, a trim gives its
 * heap up, and the main thread's free of one of them joins its batch; the write breaks that
 * block's link and mark, which the batch, handed over at the next malloc's refill, must not
 * follow. */
static void *alloc_orphans(void *out) {
    char **v = out;
    for (int i = 0; i < 4; i++) v[i] = fresh(64);
    return NULL;
}
static void uaf_write_orphan(void) {
    char *v[4];
    pthread_t t;
    pthread_create(&t, NULL, alloc_orphans, v);
    pthread_join(t, NULL);
    malloc_trim(0); /* no thread takes the exited thread's heap: its slab is an orphan */
    free(v[0]);
    memset(v[0], 'E', 16);
    carry_on(64);
}
/* A write to a block waiting on its class's transfer list (src/transfer.h): a thread that
 * allocates the class frees 40 of another thread's blocks of n bytes, more than its stash
 * holds, and the rest (all of them once it exits) join the list (a mid block alone, a small
 * one in a batch gathered by the freeing thread); the write breaks the last one's link, which
 * a later malloc of the class must not follow. */
enum { LISTED = 40 };
static char *listed[LISTED];
static size_t listed_size;
static void *free_listed(void *arg) {
    (void)arg;
    char *mine = fresh(listed_size); /* the thread allocates the class */
    for (int i = 0; i < LISTED; i++) free(listed[i]);
    free(mine);
    return NULL;
}
static void uaf_write_listed_of(size_t n) {
    listed_size = n;
    for (int i = 0; i < LISTED; i++) listed[i] = fresh(n);
    on_another_thread(free_listed, NULL);
    memset(listed[LISTED - 1], 'F', 8);
    for (int i = 0; i < LISTED; i++) listed[i] = fresh(n);
    for (int i = 0; i < LISTED; i++) free(listed[i]);
    carry_on(n);
}
static void uaf_write_mid_listed(void) { uaf_write_listed_of(40 * 1024); }
static void uaf_write_listed(void) { uaf_write_listed_of(8192); }
static void uaf_write_mid(void) {
    char *p = fresh(100000);
    free(p);
    memset(p, 'E', 64);
    carry_on(100000);
}

/* --- mismatched calls -------------------------------------------------------------------------- */

/* C23's free_sized and free_aligned_sized, where the allocator has them (glibc 2.36 has not). */
static void *lookup(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        puts("not applicable");
        exit(77);
    }
    return f;
}
static void free_sized_wrong(void) {
    void (*fs)(void *, size_t) = (void (*)(void *, size_t))lookup("free_sized");
    fs(fresh(100), 1000);
}
static void free_aligned_sized_wrong(void) {
    void (*fas)(void *, size_t, size_t) =
        (void (*)(void *, size_t, size_t))lookup("free_aligned_sized");
    char *p = aligned_alloc(64, 128);
    fas(p, 64, 4096);
}

struct misuse {
    const char *name, *kind;
    void (*run)(void);
};

#define C(name, kind) {#name, kind, name}
static const struct misuse cases[] = {
    C(free_stack, "invalid-free"),
    C(free_global, "invalid-free"),
    C(free_literal, "invalid-free"),
    C(free_mmap, "invalid-free"),
    C(free_misaligned, "invalid-free"),
    C(free_interior, "invalid-free"),
    C(free_interior_48, "invalid-free"),
    C(free_uncarved, "invalid-free"),
    C(free_interior_owned, "invalid-free"),
    C(free_interior_mid, "invalid-free"),
    C(free_interior_large, "invalid-free"),
    C(free_end, "invalid-free"),
    C(free_unallocated_heap, "invalid-free"),
    C(realloc_foreign, "invalid-free"),
    C(realloc_interior, "invalid-free"),
    C(usable_size_foreign, "invalid-free"),
    C(double_free, "double-free"),
    C(double_free_later, "double-free"),
    C(double_free_many_between, "double-free"),
    C(double_free_not_current, "double-free"),
    C(double_free_after_reuse_cycle, "double-free"),
    C(double_free_mid, "double-free"),
    C(double_free_mid_later, "double-free"),
    C(double_free_large, "double-free"),
    C(double_free_large_later, "double-free"),
    C(double_free_calloc, "double-free"),
    C(double_free_aligned, "double-free"),
    C(double_free_after_realloc, "double-free"),
    C(double_free_realloc_zero, "double-free"),
    C(double_free_remote, "double-free"),
    C(double_free_remote_then_owner, "double-free"),
    C(double_free_remote_stashed, "double-free"),
    C(double_free_large_remote, "double-free"),
    C(free_interior_remote_stashed, "invalid-free"),
    C(free_uncarved_remote_stashed, "invalid-free"),
    C(double_free_exited_thread, "double-free"),
    C(realloc_freed, "double-free"),
    C(usable_size_freed, "double-free"),
    C(realloc_freed_large, "double-free"),
    C(usable_size_freed_large, "double-free"),
    C(overflow_1, "overflow"),
    C(overflow_1_odd, "overflow"),
    C(overflow_8, "overflow"),
    C(overflow_32, "overflow"),
    C(overflow_into_free_neighbour, "overflow"),
    C(overflow_strcpy, "overflow"),
    C(overflow_memcpy, "overflow"),
    C(overflow_elements, "overflow"),
    C(overflow_mid_1, "overflow"),
    C(overflow_calloc_1, "overflow"),
    C(overflow_after_shrink, "overflow"),
    C(overflow_realloc, "overflow"),
    C(overflow_64_then_malloc, "overflow"),
    C(underflow_1, "underflow"),
    C(underflow_8, "underflow"),
    C(underflow_32, "underflow"),
    C(underflow_mid, "underflow"),
    C(uaf_write_first_word, "use-after-free"),
    C(uaf_write_whole, "use-after-free"),
    C(uaf_write_string, "use-after-free"),
    C(uaf_write_then_free, "use-after-free"),
    C(uaf_write_remote, "use-after-free"),
    C(uaf_write_orphan, "use-after-free"),
    C(uaf_write_mid, "use-after-free"),
    C(uaf_write_mid_listed, "use-after-free"),
    C(uaf_write_listed, "use-after-free"),
    C(free_sized_wrong, "mismatch"),
    C(free_aligned_sized_wrong, "mismatch"),
};

int main(int argc, char **argv) {
    size_t n = sizeof cases / sizeof cases[0];
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < n; i++) printf("%s %s\n", cases[i].name, cases[i].kind);
        return 0;
    }
    if (argc != 2) return 2;
    /* The case names use '-' on the command line, '_' in the code. */
    char want[64];
    snprintf(want, sizeof want, "%s", argv[1]);
    for (char *c = want; *c; c++)
        if (*c == '-') *c = '_';
    for (size_t i = 0; i < n; i++) {
        if (strcmp(cases[i].name, want)) continue;
        sink = malloc(64); /* the allocator is in use before the misuse */
        cases[i].run();
        carry_on(64);
        puts("survived");
        return 0;
    }
    fprintf(stderr, "test_misuse: no case %s\n", argv[1]);
    return 2;
}
