/* The layout of a free small or mid block, and the per-process secrets that protect it.
 *
 * Every free block of a slab (in a thread's cache, on its slab's free list or in an owner's
 * inbox of remote frees) holds two words:
 *   word 0: the link to the next free block;
 *   word 1: the free mark, hk_secret.mark.
 * malloc clears the mark of every block it hands out, so a block that carries it is, almost
 * certainly, free already: free() checks it to catch double frees of any block, not only of
 * the one freed last (glibc's tcache does the same with its "key"). The mark is taken as
 * proof: a free block may wait where no list shows it (in another thread's batch of remote
 * frees), and a live block holds the mark's value, random per process, only if the program
 * copied it there from freed memory.
 *
 * The hardened build (HK_HARDENED) stores the link encoded: XORed with a second secret
 * and with the address of the word that holds it, so that a heap overflow or a write after
 * free that overwrites a free block cannot point malloc at an address of its choosing; links
 * are checked when popped (heap.h). Secrets come from getrandom at start-up (hk_block_init). */
#ifndef HK_BLOCK_H
#define HK_BLOCK_H

#include "common.h"

struct hk_secret {
    uintptr_t mark; /* the free mark (never 0) */
    uintptr_t link; /* the hardened build's link key */
    uint64_t guard; /* the hardened build's canary and trailer key (guard.h) */
};

extern struct hk_secret hk_secret HK_INTERNAL;

/* Draws the secrets; once, at start-up, before any block is carved. */
void hk_block_init(void) HK_INTERNAL;

#ifdef HK_HARDENED
static inline void *hk_link_get(const void *b) {
    uintptr_t v = *(const uintptr_t *)b;
    return (void *)(v ^ hk_secret.link ^ ((uintptr_t)b >> 12));
}
static inline void hk_link_set(void *b, const void *next) {
    *(uintptr_t *)b = (uintptr_t)next ^ hk_secret.link ^ ((uintptr_t)b >> 12);
}
#else
static inline void *hk_link_get(const void *b) { return *(void *const *)b; }
static inline void hk_link_set(void *b, const void *next) { *(const void **)b = next; }
#endif

/* The free mark: set when a block becomes free, cleared when malloc hands it out. The
 * hardened build has none: its trailers (guard.h) tell a free block from a live one. */
#ifdef HK_HARDENED
static inline void hk_mark_free(void *b) { (void)b; }
static inline void hk_mark_live(void *b) { (void)b; }
static inline int hk_marked_free(const void *b) {
    (void)b;
    return 0;
}
#else
static inline void hk_mark_free(void *b) { ((uintptr_t *)b)[1] = hk_secret.mark; }
static inline void hk_mark_live(void *b) { ((uintptr_t *)b)[1] = 0; }
static inline int hk_marked_free(const void *b) {
    return ((const uintptr_t *)b)[1] == hk_secret.mark;
}
#endif

/* The free mark's value, for a path that checks and sets it in one go (loaded once), with
 * the check and the store that take it. */
static inline uintptr_t hk_free_mark(void) { return hk_secret.mark; }
#ifdef HK_HARDENED
static inline int hk_marked_as(const void *b, uintptr_t mark) {
    (void)b, (void)mark;
    return 0;
}
static inline void hk_mark_as(void *b, uintptr_t mark) { (void)b, (void)mark; }
#else
static inline int hk_marked_as(const void *b, uintptr_t mark) {
    return ((const uintptr_t *)b)[1] == mark;
}
static inline void hk_mark_as(void *b, uintptr_t mark) { ((uintptr_t *)b)[1] = mark; }
#endif

/* Starts loading `next`, the free block a pop has just made the head of its list, whose link
 * the next pop will read. A list of blocks last touched long ago or by another core (a refilled
 * slab's free list, blocks another thread freed) otherwise makes each pop wait for a cache miss
 * of its own: the links form one chain of dependent loads. A prefetch never faults, so NULL or
 * a corrupt link costs nothing. On shared_swap (2 threads) malloc's share of the samples fell
 * from 12-15% to 5%; docs/BENCHMARKS.md has the timings. */
static inline void hk_block_prefetch(const void *next) { __builtin_prefetch(next); }

/* Pushes block b onto the list at *head, marking it free. */
static inline void hk_block_push(void **head, void *b) {
    hk_link_set(b, *head);
    hk_mark_free(b);
    *head = b;
}

/* Whether b is among the first max blocks of the list at head (for confirming a suspected
 * double free; max bounds the walk should the list be corrupt). */
static inline int hk_list_has(const void *head, const void *b, uint32_t max) {
    for (; head && max; head = hk_link_get(head), max--)
        if (head == b) return 1;
    return 0;
}

#endif
