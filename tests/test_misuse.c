/* Commits one kind of misuse, named by argv[1]; tests/misuse.sh runs it under LD_PRELOAD and
 * checks that hakmem reports it in one line and aborts (or carries on, if told to). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Every misuse below is deliberate. */
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *m = argv[1];
    int local = 0;
    char *volatile p = malloc(64);
    if (!strcmp(m, "free-stack")) {
        free(&local);
    } else if (!strcmp(m, "free-mmap")) {
        void *q = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        free(q);
    } else if (!strcmp(m, "free-misaligned")) {
        free(p + 8);
    } else if (!strcmp(m, "free-interior")) {
        /* Inside a live block of the thread's current slab: the fast path's own ground. */
        char *volatile q = malloc(256);
        free(q + 64);
    } else if (!strcmp(m, "free-interior-48")) {
        /* A class whose size is no power of two; 16-byte aligned, yet no block start. */
        char *volatile q = malloc(48);
        free(q + 16);
    } else if (!strcmp(m, "free-uncarved")) {
        /* Beyond what the current slab has carved so far. */
        char *volatile q = malloc(1000); /* its slab carves 16 blocks of 1 KiB at a time */
        free((char *)((uintptr_t)q & ~(uintptr_t)0xffff) + 1024 * 60);
    } else if (!strcmp(m, "free-interior-owned")) {
        /* Inside a block of a slab the thread owns that is no longer its current one. */
        char *first = malloc(512);
        for (int i = 0; i < 1000; i++) (void)!malloc(512); /* a 64 KiB slab holds 128 */
        free(first + 256);
    } else if (!strcmp(m, "double-free")) {
        free(p);
        free(p);
    } else if (!strcmp(m, "double-free-mid")) {
        char *volatile mid = malloc(100000);
        free(mid);
        free(mid);
    } else if (!strcmp(m, "double-free-large")) {
        char *volatile big = malloc(8 << 20);
        free(big);
        free(big);
    } else if (!strcmp(m, "free-interior-mid")) {
        char *volatile mid = malloc(300000);
        free(mid + 4096);
    } else if (!strcmp(m, "free-interior-large")) {
        char *volatile big = malloc(8 << 20);
        free(big + 4096);
    } else if (!strcmp(m, "realloc-foreign")) {
        p = realloc(&local, 100);
    } else if (!strcmp(m, "usable-size-foreign")) {
        printf("%zu\n", malloc_usable_size(&local));
    } else {
        return 2;
    }
    puts("survived");
    return 0;
}
