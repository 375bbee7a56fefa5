/* Size classes of the small and mid tiers.
 *
 * 16-byte spacing from 16 to 128 bytes, then four classes per doubling (each a quarter of the
 * power of two apart) up to 4 KiB, with one more at 1,088 bytes; above 4 KiB, where a 64 KiB
 * slot holds 15 blocks or fewer, the largest multiple of 64 bytes for each of 12, 10, 9, 8,
 * 7, 6, 5, 4, 3 and 2 blocks a slot, and for 15 the largest multiple of 16, 4,368 bytes; mid
 * classes (above 32 KiB) four per doubling up to 512 KiB, then eight (64 KiB apart) up to
 * 1 MiB. A request above 128 bytes wastes less than 25% of its block (above 512 KiB less than
 * 12.5%), but from 4 to 32 KiB, where what it costs is its block's share of the slot (64 KiB
 * over the blocks it holds): there less than 25% more than it asks, or the least a block of a
 * multiple of 64 could cost it (21,825 bytes: half a slot). Every class size is a multiple of
 * 16, so every block is 16-byte aligned; from 4 KiB on but at 4,368, of 64 bytes, so that a
 * block asked aligned to a cache line comes from the class of one not aligned (aligned
 * blocks come from the first class that is a multiple of the alignment: with 16, 4,200 bytes
 * aligned to 64 took 8 KiB).
 *
 * Classes of 5,120, 6,144, 7,168, 10,240, 12,288 and 20,480 bytes were smaller than their
 * number of blocks a slot allows (5,440 bytes fit 12 times as 5,120 do), so the requests
 * between paid for one block a slot fewer; 14,336, 24,576 and 28,672 held no more blocks than
 * the next class up (4, 2 and 2). And programs put headers on powers of two: SQLite's page
 * cache asks for 1,032, 4,104 and 4,368 bytes, which took blocks of 1,280 and 5,120 bytes,
 * a quarter more (bench/programs sqlite_rows: peak RSS 105 MiB, 91 now, glibc 87; 101 with
 * 4,352 for 15 a slot, a multiple of 64). The three slots freed became 1,088 bytes (60 blocks
 * a slot where 1,280 holds 51), 4,368 (15 where 5,120 held 12) and 9,344 (7 where 10,240
 * held 6).
 *
 * Small classes (up to 32 KiB) are served from slabs of one 64 KiB slot. Mid classes (40 KiB
 * to 1 MiB) are served from spans: runs of 5 to 16 contiguous slots of a SuperSlab, sized so
 * that a whole number of blocks fills the span (8 blocks up to 64 KiB, then 4, 2, 1): no
 * slack at the end. Spans of at most 8 slots up to 512 KiB: a class with few live blocks
 * holds at most half a MiB it does not use, and short spans pack a SuperSlab's 31 slots
 * better. Above 512 KiB a span is one block, one slot longer per class. Apart from its length
 * a span behaves exactly like a slab; "slab" below means either. A malloc of a class of one
 * block a span (HK_MID_ONE and up) may be served by the large tier's resident free memory
 * instead of a new span (malloc.c, hk_mid_borrow). */
#ifndef HK_SIZE_CLASS_H
#define HK_SIZE_CLASS_H

#include "common.h"

#define HK_NSMALL 40                 /* classes of one-slot slabs: 16 B .. 32 KiB */
#define HK_NCLASS 64                 /* all classes: + mid classes 40 KiB .. 1 MiB */
#define HK_CLS_NONE HK_NCLASS        /* sentinel class of a slab that serves nothing */
#define HK_SMALL_MAX ((size_t)32768) /* largest small request */
#define HK_MID_MAX ((size_t)1 << 20) /* largest mid request; larger ones are large blocks */
#define HK_TABLE_MAX HK_SMALL_MAX    /* sizes resolved by one table load: every small one */
#define HK_SPAN_MAX_SLOTS 16         /* longest span (1 MiB) */
#define HK_MID_ONE 52u               /* first class of one block a span: 320 KiB */

/* hk_class_table[(n + 15) / 16] for n <= 32 KiB: the smallest class whose size is >= n. The
 * fast path reads a copy of it, hk_malloc_class; both come from this one definition, a run
 * of entries a class (HK_X16(c) is 16 entries of c). Up to 1 KiB only, requests of 1..32 KiB
 * took a call and the class arithmetic: 43 instructions a malloc against 16. */
#define HK_X4(c) c, c, c, c,
#define HK_X8(c) HK_X4(c) HK_X4(c)
#define HK_X16(c) HK_X4(c) HK_X4(c) HK_X4(c) HK_X4(c)
#define HK_X32(c) HK_X16(c) HK_X16(c)
#define HK_X64(c) HK_X32(c) HK_X32(c)
#define HK_X128(c) HK_X64(c) HK_X64(c)
#define HK_X256(c) HK_X128(c) HK_X128(c)
#define HK_X512(c) HK_X256(c) HK_X256(c)
#define HK_CLASS_TABLE_INIT                                                                    \
    0, 0, 1, 2, 3, 4, 5, 6, 7,                                      /* n <= 128 */          \
    8, 8, 9, 9, 10, 10, 11, 11,                                     /* 129..256 */          \
    12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, /* 257..512 */          \
    16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 17, 17, 17, 17, /* 513..768 */          \
    18, 18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19, 19, /* 769..1024 */         \
    HK_X4(20) HK_X8(21) HK_X4(21)                                   /* ..1088, ..1280 */    \
    HK_X16(22) HK_X16(23) HK_X16(24)                                /* ..2 KiB */           \
    HK_X32(25) HK_X32(26) HK_X32(27) HK_X32(28)                     /* ..4 KiB */           \
    HK_X16(29) 29,                                                  /* ..4368 */            \
    HK_X64(30) 30, 30, 30,                                          /* ..5440 */            \
    HK_X64(31) HK_X4(31)                                            /* ..6528 */            \
    HK_X32(32) HK_X8(32) HK_X4(32)                                  /* ..7232 */            \
    HK_X32(33) HK_X16(33) HK_X8(33) HK_X4(33)                       /* ..8 KiB */           \
    HK_X64(34) HK_X8(34)                                            /* ..9344 */            \
    HK_X64(35) HK_X32(35)                                           /* ..10880 */           \
    HK_X128(36) HK_X8(36)                                           /* ..13056 */           \
    HK_X128(37) HK_X64(37) HK_X16(37)                               /* ..16 KiB */          \
    HK_X256(38) HK_X64(38) HK_X16(38) HK_X4(38)                     /* ..21824 */           \
    HK_X512(39) HK_X128(39) HK_X32(39) HK_X8(39) HK_X4(39)          /* ..32 KiB */

/* The class sizes, small then mid, as X-macro lists: the size table, the block-start
 * divisors and multipliers, and the rooms (heap.c) come from them. */
#define HK_SMALL_SIZES(X)                                                                      \
    X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128)                  /* 0..7: 16 apart */    \
    X(160) X(192) X(224) X(256) X(320) X(384) X(448) X(512)            /* 8..15 */             \
    X(640) X(768) X(896) X(1024) X(1088) X(1280) X(1536) X(1792)       /* 16..23 */            \
    X(2048) X(2560) X(3072) X(3584) X(4096) X(4368) X(5440) X(6528)    /* 24..31 */            \
    X(7232) X(8192) X(9344) X(10880) X(13056) X(16384) X(21824) X(32768) /* 32..39 */
#define HK_MID_SIZES(X)                                                                        \
    X(40960) X(49152) X(57344) X(65536) X(81920) X(98304) X(114688) X(131072) /* 40..47 */     \
    X(163840) X(196608) X(229376) X(262144) X(327680) X(393216) X(458752) X(524288)           \
    X(589824) X(655360) X(720896) X(786432) X(851968) X(917504) X(983040) X(1048576) /* 56..63 */

/* Block-start test without a division: for an offset off < 2^16 into a slab of class size
 * d <= 2^15, off is a multiple of d exactly when (uint32_t)(off * HK_BLOCK_DIV(d)) < 2^16.
 * With c = ceil(2^32 / d) = (2^32 + e) / d, e < d: a multiple i * d gives i * e < 2^16, and
 * anything else gives at least c >= 2^17 (Lemire, Kaser and Kurz, "Faster remainder by direct
 * computation", 2019). One bound for every class keeps free's fast path at a multiply and a
 * compare with a constant; test_size_class checks every offset of every class. */
#define HK_BLOCK_DIV(d) ((uint32_t)(0xffffffffu / (uint32_t)(d) + 1u))
#define HK_BLOCK_START_MAX 0xffffu /* the product for a block start is at most this */

/* Range and block-start test in one multiply, for free's fast path: with m = HK_BLOCK_MUL(d) =
 * floor(2^64 / d) + 1 = (2^64 + e) / d, 1 <= e <= d <= 2^15, and lim a multiple of d (the
 * carved bytes), an offset off (an address minus the slab's base, as a uint64_t, so below
 * the base it is 2^64 minus the distance) is a carved block start exactly when off * m <
 * lim * m, both products modulo 2^64, for any distance up to 2^48 either way: every two
 * addresses of a 47- or 48-bit user space. A multiple q * d gives q * e, which grows with q,
 * and lim * m = (lim / d) * e; off = q * d + r, 0 < r < d, gives r * m + q * e, at least
 * m > 2^49 and, q * e being at most 2^48, short of wrapping by more than 2^48 (the distance
 * below the base works out the same way). The ceiling of 2^64 / d would give e = 0 for a
 * power of two, which admits every multiple, so a power of two gets one more.
 * test_size_class checks every offset within 2^18 of a slab of every class, and far ones. */
#define HK_BLOCK_MUL(d)                                                                        \
    ((uint64_t)(UINT64_MAX / (uint64_t)(d) + 1u + ((((d) & ((d) - 1)) == 0) ? 1u : 0u)))

/* A mid class size d = 2^k * m (m odd) may leave e = HK_BLOCK_MUL(d) * d - 2^64 above 2^15,
 * and the proof above then fails for distances near 2^48 (a 1 MiB block's base plus 2^44 +
 * 2^20 - 1 passes). Any m2 = (j * 2^64 + e2) / d, j odd and prime to m, gives off * m2 =
 * q * e2 + r * m2 in the same way, with r * m2 mod 2^64 = ((r * j mod d) * 2^64 + r * e2) / d,
 * at least 2^64 / d and at most 2^64 less that plus e2 for 0 < r < d; so the test is exact
 * within 2^48 where e2 = -j * 2^64 mod d is at most 2^15. e2 is a multiple of 2^k: classes
 * with m > 1 and k <= 15 have such a j (HK_MID_MUL_J: 3 for 56, 112 and 224 KiB, 7 for 160
 * KiB, 1 for 40, 48, 80 and 96 KiB, where HK_BLOCK_MUL is that already); free's fast path
 * takes the blocks of those classes' spans (owned.h, hk_owned_admits), and no others'.
 * With 2^64 = Q * d + R: m2 = j * Q + (j * R + e2) / d, modulo 2^64. */
#define HK_MID_MUL_J(d)                                                                        \
    ((d) == 57344 || (d) == 114688 || (d) == 229376 ? 3u : (d) == 163840 ? 7u : 1u)
#define HK_MUL_R(d) ((UINT64_MAX % (uint64_t)(d) + 1u) % (uint64_t)(d))
#define HK_MUL_E2(d, j) (((uint64_t)(d) - ((j) * HK_MUL_R(d)) % (uint64_t)(d)) % (uint64_t)(d))
#define HK_MID_MUL(d)                                                                          \
    (((d) & ((d) - 1)) == 0 ? HK_BLOCK_MUL(d)                                                  \
                            : (uint64_t)(HK_MID_MUL_J(d) * (UINT64_MAX / (uint64_t)(d)) +      \
                                         (HK_MID_MUL_J(d) * HK_MUL_R(d) +                      \
                                          HK_MUL_E2(d, HK_MID_MUL_J(d))) / (uint64_t)(d)))
/* Whether the one multiply by mul (a class's hk_class_mul) is exact within 2^48 for class size
 * d (see above): for every small class, and the mid classes whose e is at most 2^15. */
#define HK_MUL_EXACT_MAX ((uint64_t)1 << 15)
static inline int hk_mul_exact(uint64_t mul, uint32_t d) {
    uint64_t e = mul * d;
    return e >= 1 && e <= HK_MUL_EXACT_MAX;
}

extern const uint8_t hk_class_table[HK_TABLE_MAX / 16 + 1] HK_INTERNAL;
/* malloc's fast path's copy of hk_class_table: the same, or HK_CLS_NONE for every size once
 * hk_malloc_class_off ran. One table for every thread: a copy in each thread's heap record
 * saved an address computation (one instruction a malloc), but made 2 KiB of every record
 * resident, half a page a thread where threads are many (crowd). */
extern uint8_t hk_malloc_class[HK_TABLE_MAX / 16 + 1] HK_INTERNAL;
/* Sends every malloc to its slow path (HK_CLS_NONE, whose cache is always empty): while the
 * operation counts are kept (HAKMEM_STATS), the refill counts and serves the real class.
 * Called once, at start-up, before any thread has a cache. */
void hk_malloc_class_off(void) HK_INTERNAL;
/* HK_BLOCK_DIV of each small class size. */
extern const uint32_t hk_class_div[HK_NSMALL] HK_INTERNAL;
extern const uint32_t hk_class_size[HK_NCLASS + 1] HK_INTERNAL;
/* HK_BLOCK_MUL of each class size: free's fast path's test for a small slab's blocks (any
 * address within 2^48 bytes), and the mid short path's for an offset into its span (below
 * 2^20, where the test is exact for every class: test_size_class). */
extern const uint64_t hk_class_mul[HK_NCLASS] HK_INTERNAL;
/* Slots (64 KiB each) of one slab of the class: 1 for small classes, 5..16 for mid ones. */
extern const uint8_t hk_class_slots[HK_NCLASS + 1] HK_INTERNAL;

#define HK_FINE_MIN ((size_t)1 << 19) /* above it, classes 64 KiB apart */

/* Every mid class size is a multiple of 8 KiB, so the class of a request of n bytes,
 * HK_TABLE_MAX < n <= HK_MID_MAX, is that of its size in 8 KiB steps, rounded up: one table
 * load (hk_mid_class, 128 bytes), where the arithmetic on n's highest bit took 12
 * instructions of every mid malloc. */
#define HK_MID_STEP_SHIFT 13
extern const uint8_t hk_mid_class[HK_MID_MAX >> HK_MID_STEP_SHIFT] HK_INTERNAL;
static inline unsigned hk_mid_class_of(size_t n) {
    return hk_mid_class[(n - 1) >> HK_MID_STEP_SHIFT];
}

/* Class of a request of n <= HK_MID_MAX bytes (n == 0 gets the smallest class). */
static inline unsigned hk_class_of(size_t n) {
    if (n <= HK_TABLE_MAX) return hk_class_table[(n + 15) >> 4];
    return hk_mid_class_of(n);
}

#endif
