/* The hardened build's guards around each small and mid block (HK_HARDENED only).
 *
 * A request of n bytes gets a block of at least n + HK_GUARD_ROOM bytes, laid out as
 *   [0, n)               the program's bytes (malloc_usable_size says n);
 *   [n, n + 8)           the canary: a word derived from a secret and the block's address;
 *   [bsize - 8, bsize)   the trailer: n, encoded with the same secret.
 * A free block keeps a trailer too, encoding HK_GUARD_FREE: carving writes it, free writes it.
 * So at any time every carved block's last 8 bytes decode to a size that fits the block or to
 * "free", unless something overwrote them. free checks:
 *   - the block's trailer (a live size; "free" means a double free) and its canary bytes: a
 *     write past the end of the block, which starts at byte n, or reaches the trailer;
 *   - the trailer of the block just before it in its slab: a write just before the block (an
 *     underflow, or an overflow of the block before) lands there.
 * Each check is a load, an XOR and a compare. Large blocks (own mappings) have no guards:
 * they end at a page boundary. */
#ifndef HK_GUARD_H
#define HK_GUARD_H

#include <string.h>

#include "block.h"
#include "common.h"

#define HK_GUARD_ROOM 16 /* canary + trailer */
/* "Free", in a trailer: above any size, and with a top byte of 0, so that a free block's
 * trailer ends in the key's top byte like a live one's (odd and at least 0x80: block.c). */
#define HK_GUARD_FREE (~(uint64_t)0 >> 8)
#define HK_GUARD_CANARY 0x5a5ac3c3a5a53c3cull /* canary = (key ^ this) | 0x81: a trailer never is */

enum { HK_GUARD_OK, HK_GUARD_IS_FREE, HK_GUARD_BROKEN };

/* The canary of a block whose key is key: its first byte odd and at least 0x80, so that an
 * off-by-one write of an even byte (a string's NUL, for one) or of any ASCII character (string
 * and text data) always shows; other bytes show with odds 63/64. */
static inline uint64_t hk_guard_canary(uint64_t key) { return (key ^ HK_GUARD_CANARY) | 0x81; }

/* The secret as seen from block p: differs between blocks, so that a trailer or canary
 * copied from one block does not verify in another. */
static inline uint64_t hk_guard_key(const void *p) {
    return hk_secret.guard ^ (uint64_t)(uintptr_t)p;
}

static inline uint64_t hk_load64(const void *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline void hk_store64(void *p, uint64_t v) { memcpy(p, &v, 8); }

static inline void hk_guard_trailer_set(void *p, size_t bsize, uint64_t v) {
    hk_store64((char *)p + bsize - 8, v ^ hk_guard_key(p));
}
static inline uint64_t hk_guard_trailer(const void *p, size_t bsize) {
    return hk_load64((const char *)p + bsize - 8) ^ hk_guard_key(p);
}

/* Arms block p of bsize bytes for a request of n bytes (n + HK_GUARD_ROOM <= bsize). */
static inline void hk_guard_arm(void *p, size_t n, size_t bsize) {
    uint64_t key = hk_guard_key(p);
    hk_store64((char *)p + n, hk_guard_canary(key));
    hk_store64((char *)p + bsize - 8, key ^ (uint64_t)n);
}

/* What the guards of block p show: HK_GUARD_OK with the request size in *n_out, or not. */
static inline int hk_guard_check(const void *p, size_t bsize, size_t *n_out) {
    uint64_t key = hk_guard_key(p);
    uint64_t n = hk_load64((const char *)p + bsize - 8) ^ key;
    if (HK_UNLIKELY(n > bsize - HK_GUARD_ROOM))
        return n == HK_GUARD_FREE ? HK_GUARD_IS_FREE : HK_GUARD_BROKEN;
    if (HK_UNLIKELY(hk_load64((const char *)p + n) != hk_guard_canary(key)))
        return HK_GUARD_BROKEN;
    *n_out = (size_t)n;
    return HK_GUARD_OK;
}

/* Whether the trailer of a block (live or free) of bsize bytes at p is intact. */
static inline int hk_guard_trailer_ok(const void *p, size_t bsize) {
    uint64_t n = hk_guard_trailer(p, bsize);
    return n <= bsize - HK_GUARD_ROOM || n == HK_GUARD_FREE;
}

#endif
