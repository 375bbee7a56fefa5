/* Carving: a slab's blocks that were never handed out become a thread's cache, a batch at a
 * time (about 16 KiB of small blocks; a thread's first carves of a class smaller), linked in
 * address order (the hardened build: in random order, each with its "free" trailer). The
 * slab's carved count, its limit and the owned-slab entry's limit grow to cover them, and
 * the pages a fresh slab's carve is about to write are filled in one call. Called by the
 * slab's owner, on its refill (heap.c), into which it is inlined: out of line, it cost
 * thread_churn 3 instructions an operation. */
#ifndef HK_CARVE_H
#define HK_CARVE_H

#include "block.h"
#include "guard.h"
#include "heap.h"
#include "os.h"
#include "owned.h"

/* Blocks carved per refill: about 16 KiB of small blocks, at least 8, so pages are touched
 * roughly as blocks are handed out rather than all at once; mid blocks one at a time. At most
 * HK_CARVE_MAX, a carve of the smallest class. */
#define HK_CARVE_MAX (16384u / 16)
static inline uint32_t hk_carve_batch(uint32_t bsize) {
    uint32_t n = (uint32_t)(16384 / bsize);
    if (n >= 8) return n;
    return bsize <= HK_SMALL_MAX ? 8 : 1;
}

#ifdef HK_HARDENED
/* The hardened build hands a batch out in random order, so that where the next block lands
 * cannot be predicted from where the last one did; each block gets its "free" trailer. */
static inline void *hk_carve_list(struct hk_heap *h, char *p, uint32_t n, uint32_t bs) {
    /* 2 KiB of stack: a slab's worth of indices (8 KiB) overflowed a thread of the smallest
     * stack (PTHREAD_STACK_MIN) that had used 4 KiB of it. */
    uint16_t order[HK_CARVE_MAX];
    HK_ASSERT(n <= HK_CARVE_MAX);
    for (uint32_t i = 0; i < n; i++) order[i] = (uint16_t)i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)(hk_heap_random(h) % i);
        uint16_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    void *head = NULL;
    for (uint32_t i = 0; i < n; i++) {
        char *b = p + (size_t)order[i] * bs;
        hk_guard_trailer_set(b, bs, HK_GUARD_FREE);
        hk_block_push(&head, b);
    }
    return head;
}
#else
/* Links a batch in address order: blocks are handed out as they lie. */
static inline void *hk_carve_list(struct hk_heap *h, char *p, uint32_t n, uint32_t bs) {
    (void)h;
    void *head = NULL;
    for (uint32_t i = n; i-- > 0;) hk_block_push(&head, p + (size_t)i * bs);
    return head;
}
#endif

/* A thread's first carve of a class takes 8 blocks, or as many as one page holds where that
 * is fewer (at least one), and each one after it twice as many, up to the whole batch: a
 * thread that allocates a few blocks of a class leaves few carved and unused in its cache,
 * where its exit has to walk them back to their slab (with 16 KiB a carve, 5.6% of
 * mixed_churn's samples were that walk), and touches few pages for them: a thread holding a
 * block of each class from 16 B to 2 KiB by powers of two touched 12 pages of slabs with 8
 * blocks first, and touches 8 (bench/crowd). */
static inline void hk_heap_carve(struct hk_heap *h, struct hk_slab *s, unsigned c) {
    uint32_t bs = s->bsize, n = hk_carve_batch(bs), left = s->capacity - s->carved;
    if (c < HK_NSMALL) {
        uint32_t first = bs >= HK_PAGE_SIZE ? 1 : bs > HK_PAGE_SIZE / 8 ? HK_PAGE_SIZE / bs : 8;
        if ((first << h->carves[c]) < n) n = first << h->carves[c]++;
    }
    if (n > left) n = left;
    char *p = hk_slab_base(s) + (size_t)s->carved * bs;
    /* A fresh slab's pages past the last carve hold nothing: the links written below would
     * fault them in one by one. Filled in one call instead (os.c, hk_os_populate), from the
     * first page the last carve did not touch to the one this one ends in; none where this
     * carve ends in the page the last one ended in (the first carves of a class of small
     * blocks: 6 calls for one page of 16-byte blocks, 12 for the page of a 200-byte one). Not
     * for blocks larger than a page: the carve writes only their first words, and the
     * program may never touch the rest. */
    if (s->fresh && bs <= HK_PAGE_SIZE) {
        char *from = (char *)hk_align_up((uintptr_t)p, HK_PAGE_SIZE), *end = p + (size_t)n * bs;
        if (end > from) hk_os_populate(from, (size_t)(end - from));
    }
    /* The carve's first block, which the malloc that refilled pops (a carve links its blocks
     * in address order; the hardened build's shuffled order pops it only by chance). */
    if (s->fresh) h->zero_block = p;
    h->free[c] = hk_carve_list(h, p, n, bs);
    __atomic_store_n(&s->carved, s->carved + n, __ATOMIC_RELAXED); /* read by other threads */
    __atomic_store_n(&s->lim, s->carved * bs, __ATOMIC_RELAXED);
    s->used = s->carved;
    /* Free's fast path takes what was carved, nothing beyond. */
    hk_owned_carved(h, s);
}


#endif
