#include "size_class.h"

#include <string.h>

/* The tables are written out rather than computed at start-up so that the very first malloc,
 * possibly made before any constructor runs, needs no initialisation. test_size_class checks
 * them against each other. */
#define HK_SIZE_ENTRY(d) d,
const uint32_t hk_class_size[HK_NCLASS + 1] = {
    HK_SMALL_SIZES(HK_SIZE_ENTRY) HK_MID_SIZES(HK_SIZE_ENTRY) 0, /* 0 for HK_CLS_NONE */
};

#define HK_MUL_ENTRY(d) HK_BLOCK_MUL(d),
#define HK_MID_MUL_ENTRY(d) HK_MID_MUL(d),
const uint64_t hk_class_mul[HK_NCLASS] = {HK_SMALL_SIZES(HK_MUL_ENTRY)
                                              HK_MID_SIZES(HK_MID_MUL_ENTRY)};

/* Span length in slots: the class size times 8 blocks (up to 64 KiB), 4 (up to 128 KiB),
 * 2 (up to 256 KiB) or 1, which is always a whole number of 64 KiB slots. */
const uint8_t hk_class_slots[HK_NCLASS + 1] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    5, 6, 7, 8,                     /* 8 blocks */
    5, 6, 7, 8,                     /* 4 blocks */
    5, 6, 7, 8,                     /* 2 blocks */
    5, 6, 7, 8,                     /* 1 block */
    9, 10, 11, 12, 13, 14, 15, 16,  /* 1 block */
    1,
};

const uint8_t hk_class_table[HK_TABLE_MAX / 16 + 1] = {HK_CLASS_TABLE_INIT};

/* Entry i: requests of i * 8 KiB + 1 to (i + 1) * 8 KiB (the first four, small sizes, never
 * read). */
const uint8_t hk_mid_class[HK_MID_MAX >> HK_MID_STEP_SHIFT] = {
    40, 40, 40, 40, 40, 41, 42, 43,              /* ..64 KiB: 40, 48, 56, 64 */
    44, 44, 45, 45, 46, 46, 47, 47,              /* ..128 KiB: 80 .. 128 */
    HK_X4(48) HK_X4(49) HK_X4(50) HK_X4(51)      /* ..256 KiB */
    HK_X8(52) HK_X8(53) HK_X8(54) HK_X8(55)      /* ..512 KiB */
    HK_X8(56) HK_X8(57) HK_X8(58) HK_X8(59)      /* ..1 MiB, 64 KiB apart */
    HK_X8(60) HK_X8(61) HK_X8(62) HK_X8(63)
};
uint8_t hk_malloc_class[HK_TABLE_MAX / 16 + 1] = {HK_CLASS_TABLE_INIT};

void hk_malloc_class_off(void) { memset(hk_malloc_class, HK_CLS_NONE, sizeof hk_malloc_class); }

#define HK_DIV_ENTRY(d) HK_BLOCK_DIV(d),
const uint32_t hk_class_div[HK_NSMALL] = {HK_SMALL_SIZES(HK_DIV_ENTRY)};
