#include "room.h"

/* Sets class c's full room back to its first size (heap.h, HK_ROOM_GROW_BYTES): the class
 * went quiet, or the thread gives everything back. */
void hk_room_reset(struct hk_heap *h, unsigned c) {
#ifndef HK_HARDENED
    if (h->room_more[c]) {
        h->room_grown -= (uint32_t)h->room_more[c] * hk_class_size[c];
        h->room_more[c] = 0;
    }
    h->room_sent &= ~((uint64_t)1 << c);
#else
    (void)h, (void)c;
#endif
}

#ifndef HK_HARDENED
/* Each class's room after a refill: for a small class HK_ROOM_BYTES of blocks, HK_ROOM_MIN to
 * HK_ROOM_MAX; for a mid class HK_MID_OWN_BYTES of blocks, HK_MID_OWN_MIN at least (the stash
 * takes a part of it only, HK_MID_ROOM_BYTES). */
#define HK_ROOM_OF(d)                                                                          \
    (uint16_t)(HK_ROOM_BYTES / (d) < HK_ROOM_MIN   ? HK_ROOM_MIN                               \
               : HK_ROOM_BYTES / (d) > HK_ROOM_MAX ? HK_ROOM_MAX                               \
                                                   : HK_ROOM_BYTES / (d)),
#define HK_MID_ROOM_OF(d)                                                                      \
    (uint16_t)(HK_MID_OWN_BYTES / (d) < HK_MID_OWN_MIN ? HK_MID_OWN_MIN : HK_MID_OWN_BYTES / (d)),
const uint16_t hk_room_max[HK_NCLASS] = {HK_SMALL_SIZES(HK_ROOM_OF)
                                             HK_MID_SIZES(HK_MID_ROOM_OF)};

/* The room that frees took from all classes since the rooms were last set. Frees take room
 * only of a class whose room was set (a refill, or an entry for a slab taken over, sets it
 * first), so the others are not looked at: every tick and every switch of owned-slab tables
 * looked at all 64 (a thread's first tick and first slab, about 1,300 instructions). */
uint64_t hk_rooms_used(const struct hk_heap *h) {
    uint64_t used = 0;
    for (uint64_t m = h->room_set; m; m &= m - 1)
        used += hk_room_used(h, (unsigned)__builtin_ctzll(m));
    return used;
}

/* The thread's small frees since the last choice between the two ways to free
 * (hk_heap_choose_free), given `used`, the rooms' hk_rooms_used. The fast path counts
 * nothing, but each free there takes 1 from its class's room: the room used (counted when a
 * room is set, hk_room_set, and in the rooms in use) less what slow paths put into caches is
 * what the fast path took; and every small free puts its block into a cache, or is refused
 * by hk_free_by_meta (of the refused, the full path puts some into a cache: fpushed). */
uint64_t hk_small_frees(const struct hk_heap *h, uint64_t used) {
    uint64_t room = h->fused + used - h->fused_seen;
    return (room > h->fpushed ? room - h->fpushed : 0) + h->frefused;
}

/* Class c ran dry after its cache sent blocks home (hk_heap_cache_full): the thread allocates
 * and frees the class in waves longer than its room, and what went home must come back
 * through a refill, from lines no longer in this core's cache. So the room doubles, up to
 * HK_ROOM_GROW_BYTES of blocks and HK_ROOM_MAX, while the thread's rooms together stay within
 * HK_ROOM_GROWN_MAX bytes of their first size; hk_room_reset sets it back. A thread that
 * only frees the class (a structure torn down) never refills it, and its room stays. scatter
 * (100 frees, then 100 mallocs, of 8 bytes to 16 KiB; a class of 4 KiB or more had a room of
 * 8 blocks, and a wave holds about 10 of it) ran 1.14 times as fast with 1 thread and 1.17
 * with 2 (0.96 and 0.87 of tcmalloc's speed); a room of 32 blocks for every such class did as
 * well, but for every thread and class, waves or not. */
void hk_room_grow(struct hk_heap *h, unsigned c) {
    h->room_sent &= ~((uint64_t)1 << c);
    uint32_t d = hk_class_size[c], full = hk_room_full(h, c);
    uint32_t cap = HK_ROOM_GROW_BYTES / d < HK_ROOM_MAX ? HK_ROOM_GROW_BYTES / d : HK_ROOM_MAX;
    uint32_t next = 2 * full < cap ? 2 * full : cap;
    if (next <= full || h->room_grown + (next - full) * d > HK_ROOM_GROWN_MAX) return;
    h->room_grown += (next - full) * d;
    h->room_more[c] = (uint16_t)(next - hk_room_max[c]);
}

unsigned hk_heap_room_full(unsigned c) { return hk_room_full(hk_tls.heap, c); }
#endif
