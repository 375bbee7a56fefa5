/* The large tier: requests above the mid tier (1 MiB), and blocks aligned beyond a slot; a
 * malloc of a mid class of one block a span that its resident free memory holds (malloc.c,
 * hk_mid_borrow); and
 * the page heap under the pool, whose SuperSlabs are cut from it (HK_LARGE_INNER) and go back
 * to it, so that the memory a program frees in one size range serves the next in another.
 *
 * It is a page heap. Memory comes from the OS in mappings of at least 4 MiB and an eighth of
 * what the tier has mapped (it grows geometrically, as a heap does) and is handed out in
 * page-granular extents; a freed extent stays mapped, merges with its free neighbours and
 * serves later requests of any size that fits (resident memory first, else best fit), split
 * as needed. So a program that frees
 * and allocates big blocks in a loop makes no system call and takes no page fault once warm.
 * Each free extent knows
 *   - whether it is all zero (fresh from the OS, or released): exact, so calloc clears only
 *     blocks that may hold old data;
 *   - where its resident ("dirty") pages may be: a span [dlo, dhi) outside which every page
 *     is untouched, and how many bytes of it may be resident (an estimate kept by
 *     conservation: a freed block adds its length, merges add up, a split shares the count
 *     out in proportion to the span each piece holds).
 * A block is cut from the start or the end of its extent, whichever covers more of the
 * span, so it reuses resident pages rather than faulting in fresh ones beside them. Dirty
 * extents idle for the purge delay have their pages released (madvise, the span only); while
 * the dirty bytes exceed the policy's large budget, the oldest have the top of their span
 * released, as much as is over; a freed block of HK_HUGE (32 MiB) or more, while its arena
 * holds as much live, has its pages released at once unless huge blocks were reused in the
 * last two purge delays; an extent with none left, idle for the unmap delay (the untouched
 * rest of a mapping: since it was mapped), is unmapped. A request that no free extent fits
 * gets a new mapping, into which the resident spans of free extents are moved first (mremap:
 * page tables move, nothing is copied; each span where it lies in its 2 MiB stretch, so that
 * whole page tables move), so
 * free memory split between live blocks serves it without fresh pages and the footprint
 * follows the live size. Live blocks are found by address in a hash table, so
 * free() and realloc() need no header and a pointer that is not a live block's start is
 * recognised. realloc grows in place into a free neighbour, shrinks in place, and otherwise
 * copies the block into resident free memory that fits where there is some, else moves its
 * pages to new address space with mremap, copying nothing.
 *
 * The tier is split into arenas, each such a page heap under a lock of its own (system calls
 * run outside it), so threads that allocate big blocks at once do not queue on one mutex
 * (one per CPU; one in all on two CPUs or fewer, where the split costs more than the waits).
 * Every thread starts in the first arena; one whose requests keep finding the lock of its
 * arena held moves to the arena with the fewest threads (hk_large_arena_move), so threads
 * whose requests meet spread out and the others share one heap; a block goes
 * back to the arena that made it, found from its address in the page map (pagemap.h). A thread
 * that frees a block of another thread's arena, or finds the lock taken, leaves the free in
 * one of the arena's slots with a compare-and-swap, and whoever next holds the lock (an
 * allocation, a free, the decay tick) makes it; only when every slot is full does it wait. An
 * arena whose free memory fits no request takes a free extent that does from another arena
 * before it maps more, so memory moves to where it is asked for and none is stranded. One
 * budget holds for the dirty bytes of all arenas together. */
#ifndef HK_LARGE_H
#define HK_LARGE_H

#include "common.h"

/* A huge block: one this long goes back to the OS at its free (above), and is never filled at
 * its malloc (fill.h). */
#define HK_HUGE ((size_t)32 << 20)

/* Sets the number of arenas (0: one per CPU the process may run on where that is more than
 * two, else one; at most HK_LARGE_ARENAS_MAX, config.h). Called once, at start-up, before any
 * block is made. */
void hk_large_init(unsigned n) HK_INTERNAL;

/* hk_large_alloc's flags. */
enum {
    HK_LARGE_INNER = 1,  /* a SuperSlab (superslab.c): counted apart from the program's blocks,
                          * freed by hk_large_free_inner, invisible to hk_large_lookup */
    HK_LARGE_NO_MAP = 2, /* from free memory only: NULL, errno untouched, where none fits */
    /* hk_large_alloc only: from free memory holding the block's worth of resident pages
     * (untouched free memory faults as a new mapping does): NULL, errno untouched, where none
     * does. */
    HK_LARGE_RESIDENT = 4,
};
/* What hk_large_alloc tells of the bytes of the block it returns. */
enum {
    HK_LARGE_ZERO = 1,      /* every byte is known to be zero */
    HK_LARGE_UNMARKED = 2,  /* its first word pair holds no free mark (block.h): no small or
                             * mid block lay in its memory since its pages were last released
                             * (large.c, an extent's marks), or every byte is known zero */
};
/* A block of at least n bytes aligned to align (a power of two), or NULL with errno ENOMEM.
 * *zeroed gets HK_LARGE_ZERO and HK_LARGE_UNMARKED where they hold. */
void *hk_large_alloc(size_t n, size_t align, unsigned *zeroed, unsigned flags) HK_INTERNAL;
/* Frees p: 1 if it was a live large block, 0 if it is no large block at all, -1 if it is the
 * start of a free extent (a double free). Also 1 where the free was left in a slot for the
 * next holder of the arena's lock (a block of another thread's arena, or a lock that was
 * taken): that holder reports the misuse then, if it was one (hk_large_refused). */
int hk_large_free(void *p) HK_INTERNAL;
/* Reports a free of p by op that hk_large_free refused with r (0 or -1). */
void hk_large_refused(const char *op, void *p, int r) HK_INTERNAL HK_COLD;
/* Frees p, a live block made with HK_LARGE_INNER, of which at most dirty bytes may be
 * resident (the pool released the rest). */
void hk_large_free_inner(void *p, size_t dirty) HK_INTERNAL;
/* What address p is to the large tier: HK_LARGE_LIVE, a live block's start (*len its usable
 * length and *arena its arena, 1.., where not NULL); HK_LARGE_FREED, where a block was and is
 * no more (the start of a free extent, or a block freed lately: a use after free, not a
 * foreign pointer); 0, neither. */
enum { HK_LARGE_FREED = -1, HK_LARGE_LIVE = 1 };
int hk_large_lookup(const void *p, size_t *len, unsigned *arena) HK_INTERNAL;
/* Resizes large block p to n bytes in place, by copying into resident free memory, or by
 * mremap (not with HK_LARGE_NO_MAP); NULL (p intact) if it cannot. */
void *hk_large_realloc(void *p, size_t n, unsigned flags) HK_INTERNAL;
/* Releases what is due at time now (see above); with force, every free extent's pages and
 * mappings. Returns the bytes given back to the OS. */
size_t hk_large_decay(uint64_t now, int force) HK_INTERNAL;

/* What ACE measures: cumulative counts, and the peak of live bytes and the drawdown since the
 * last call (which starts the next window; ACE is its only caller). */
struct hk_large_demand {
    uint64_t refault_bytes; /* bytes served from extents released not long before */
    size_t peak_live_bytes; /* highest live bytes since the last call */
    size_t peak_foot_bytes; /* the most live and dirty free bytes together as a block was
                             * cut since the last call (the live bytes, if none was) */
    size_t drawn_bytes;     /* the deepest drawdown of the dirty free bytes by reuse since the
                             * last call: how much resident free memory was taken back */
};
void hk_large_demand(struct hk_large_demand *out) HK_INTERNAL;

/* Moves the calling thread, for good, to the arena with the fewest threads, where that has
 * fewer than the thread's own arena would keep without it; else leaves it where it is. A
 * thread's allocation does this where it finds the lock of its arena held for the
 * HK_ARENA_MEETS-th time, less one for each HK_ARENA_MEET_EVERY that found it free. */
void hk_large_arena_move(void) HK_INTERNAL;
#define HK_ARENA_MEETS 4
#define HK_ARENA_MEET_EVERY 32

struct hak_stats;
void hk_large_stats(struct hak_stats *out) HK_INTERNAL;
void hk_large_lock_all(void) HK_INTERNAL;
void hk_large_unlock_all(void) HK_INTERNAL;
/* In the child of fork, where only the forking thread lives: only it is bound to an arena. */
void hk_large_forked_child(void) HK_INTERNAL;

#endif
