/* Rooms: how many blocks each class's cache in a thread heap may take from free before free's
 * slow path looks at it (heap.h, "Reuse"). A refill sets a class's room to its full room;
 * every free into the cache takes 1 (free's fast path counts down room[c]); malloc's fast
 * path counts what it takes apart (taken[c]); when the counter runs out, hk_room_make_up
 * gives back what malloc took, and if nothing was taken the cache goes home (heap.c,
 * hk_heap_cache_full). A class's full room grows for a thread that allocates it in waves
 * longer than the room (hk_room_grow) and goes back to its first size when the class goes
 * quiet (hk_room_reset). While the thread's rooms beat (heap.h, HK_ROOM_BEAT), a room is put
 * on free's counter in parts. These are the thread's own fields: only the owner changes them,
 * on its slow paths. Not in the hardened build, whose caches hold the current slab's blocks
 * only, but for hk_room_reset. */
#ifndef HK_ROOM_H
#define HK_ROOM_H

#include "heap.h"

/* A cache's room (heap.h, "Reuse") after a refill: HK_ROOM_BYTES of its class's blocks,
 * HK_ROOM_MIN to HK_ROOM_MAX of them. */
#define HK_ROOM_BYTES 32768u
#define HK_ROOM_MIN 8u
#define HK_ROOM_MAX 1024u
/* After a walk of a class it frees without reusing (heap.h, "Reuse"), a small class's
 * room is an eighth of its full room, and at most HK_ROOM_TORN blocks (heap.c,
 * hk_heap_cache_full). The next walk reads each block's link again. An eighth is up to 256
 * blocks of 16 bytes (512 while the room is grown), and a structure of blocks of several
 * classes, freed in turn, filled the caches with some 700 blocks of 16 to 128 bytes before
 * each one's walk, more lines than a core's first-level cache holds, so the walks read them
 * from the second. With 32, about 250: teardown 500000 4 16 128 random 42 ran 1.04 times as
 * fast (11 interleaved runs; 1.03 with 2,000,000 blocks, 1.02 with blocks of 16 to 1,024
 * bytes), and blocks of one class (32 bytes, whose eighth is 128) at the same speed. With 16:
 * 1.07, 1.02, 1.03, and 0.95 for the one class, whose walks then cost more than they save. */
#define HK_ROOM_TORN 32u
/* A small class's full room grows for a thread that sends blocks home and then runs dry
 * (room.c, hk_room_grow): doubled at such a refill, up to HK_ROOM_GROW_BYTES of its blocks
 * (and HK_ROOM_MAX), while all the thread's rooms together have grown by at most
 * HK_ROOM_GROWN_MAX bytes; back to the first room when the class goes quiet (heap.h,
 * "Footprint"), at a trim and at thread exit. */
#define HK_ROOM_GROW_BYTES (256u * 1024)
#define HK_ROOM_GROWN_MAX (2u * 1024 * 1024)
/* While a thread has left memory idle that is not yet released (heap.h, beat_since), its room
 * is handed to free's counter HK_ROOM_BEAT at a time, the rest put aside with taken[]
 * (hk_room_set), and the clock is read once rooms that ran out took HK_ROOM_BEAT frees:
 * whatever the thread then does with a class, a slow path that looks at the clock comes
 * within 2 * HK_ROOM_BEAT frees of it, and the memory goes back on time (heap.h,
 * "Footprint"). */
#define HK_ROOM_BEAT 64u
/* What the stash may hold of a mid class (hk_stash_mid_max; the class's room is larger, for the
 * thread's own blocks, HK_MID_OWN_BYTES): 128 KiB of its blocks, so 2 or 3 blocks up to 64
 * KiB, and none of a class above. Before the transfer lists (transfer.h) caught what a stash
 * cannot take, a small stash left blocks in inboxes (blocks of 64 KiB..1 MiB shared by 16
 * threads peaked at 1.42 GB with 1 MiB, against 1.18 with 4 MiB). With them, what a stash
 * holds is memory no other thread can use, while on the list any thread's next refill takes
 * it: shared_swap_big16 ran 1.12 times as fast with 128 KiB as with 1 MiB and peaked at 14%
 * less; mixed_churn 1.04 times. A block of each class above 64 KiB a thread, which 128 KiB
 * still left, was as much again: without it, mixed_churn with 16 threads (2 cores) peaks 8%
 * lower and runs 1.09 times as fast, shared_swap_big16 6% lower and 1.09 times (2026-11-29). */
#define HK_MID_ROOM_BYTES (128u * 1024)
/* A mid class's full room: HK_MID_OWN_BYTES of its blocks, HK_MID_OWN_MIN at least. Free's
 * fast path keeps the thread's own blocks of its current span in the cache once the thread
 * has shown that it allocates the class again after freeing it (owned.h, hk_owned_admits),
 * and its slow path looks at the cache once the room has run out (heap.c, hk_mid_room_out):
 * where the thread's mallocs and frees balance, the cache holds a block or two, and a room of
 * r lets r - 1 frees in a row take the fast path. The stash takes HK_MID_ROOM_BYTES of it at
 * most, and none of a class above half of that. */
#define HK_MID_OWN_BYTES (512u * 1024)
#define HK_MID_OWN_MIN 3u

/* The blocks of mid class c that the stash may hold (HK_MID_ROOM_BYTES of them, none of a
 * class above half of that). */
static inline unsigned hk_stash_mid_max(unsigned c) {
    uint32_t d = hk_class_size[c];
    return d > HK_MID_ROOM_BYTES / 2 ? 0 : HK_MID_ROOM_BYTES / d;
}

/* Sets class c's full room back to its first size (heap.h, HK_ROOM_GROW_BYTES): the class
 * went quiet, or the thread gives everything back. */
void hk_room_reset(struct hk_heap *h, unsigned c) HK_INTERNAL;

#ifndef HK_HARDENED
/* Each class's first full room (heap.h, HK_ROOM_BYTES and HK_MID_ROOM_BYTES). */
extern const uint16_t hk_room_max[HK_NCLASS] HK_INTERNAL;

/* Class c's full room for thread heap h: its first room, grown for a class that the thread
 * allocates in waves longer than it (hk_room_grow). */
static inline unsigned hk_room_full(const struct hk_heap *h, unsigned c) {
    return hk_room_max[c] + h->room_more[c];
}

/* The room of class c torn down (hk_heap_cache_full): an eighth of its full room, and
 * HK_ROOM_TORN blocks at most. */
static inline unsigned hk_room_torn(const struct hk_heap *h, unsigned c) {
    unsigned eighth = hk_room_full(h, c) / 8u;
    return eighth < HK_ROOM_TORN ? eighth : HK_ROOM_TORN;
}

/* What frees took of class c's room since it was last set (only frees lower the counter). */
static inline uintptr_t hk_room_used(const struct hk_heap *h, unsigned c) {
    return h->room[c] < (intptr_t)h->room_given[c] ? (uintptr_t)(h->room_given[c] - h->room[c])
                                                    : 0;
}

/* Gives class c a room of r: on free's counter, but for at most HK_ROOM_BEAT of it while the
 * thread's rooms beat (heap.h), the rest put aside with what malloc takes (taken[c]), for
 * hk_room_make_up. Always inlined, as is hk_room_make_up: hk_heap_cache_full's short way
 * has no frame for a call (tight 4096: 62.0 -> 60.2 instructions a pair under callgrind;
 * tight 100000: 97.2 -> 94.4). */
static HK_ALWAYS_INLINE void hk_room_set(struct hk_heap *h, unsigned c, uintptr_t r) {
    HK_ASSERT(c < HK_NCLASS);
    uintptr_t now = r > HK_ROOM_BEAT && h->beat_since ? HK_ROOM_BEAT : r;
    h->fused += hk_room_used(h, c); /* for hk_heap_choose_free */
    h->room[c] = (intptr_t)now;
    h->room_given[c] = (uint16_t)now;
    h->room_set |= (uint64_t)1 << c;
    h->taken[c] = r - now;
}

/* Puts what was put aside of class c's room, and what malloc took since, back on free's
 * counter, the whole up to the full room (hk_room_set); returns the counter. */
static HK_ALWAYS_INLINE uintptr_t hk_room_make_up(struct hk_heap *h, unsigned c) {
    uintptr_t room = (uintptr_t)h->room[c] + h->taken[c], max = hk_room_full(h, c);
    hk_room_set(h, c, room < max ? room : max);
    return (uintptr_t)h->room[c];
}

/* The room that frees took from all classes since the rooms were last set. */
uint64_t hk_rooms_used(const struct hk_heap *h) HK_INTERNAL;
/* The thread's small frees since the last choice between the two ways to free
 * (heap.c, hk_heap_choose_free), given `used`, the rooms' hk_rooms_used. */
uint64_t hk_small_frees(const struct hk_heap *h, uint64_t used) HK_INTERNAL;
/* Class c ran dry after its cache sent blocks home: its full room doubles, within bounds. */
void hk_room_grow(struct hk_heap *h, unsigned c) HK_INTERNAL;
/* Class c's full room in the calling thread's heap; for tests. */
unsigned hk_heap_room_full(unsigned c) HK_INTERNAL;
#endif

#endif
