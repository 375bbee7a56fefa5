#include "size_class.h"

/* The tables are written out rather than computed at start-up so that the very first malloc,
 * possibly made before any constructor runs, needs no initialisation. test_size_class checks
 * them against each other. */
#define HK_SIZE_ENTRY(d) d,
const uint32_t hk_class_size[HK_NCLASS + 1] = {
    HK_SMALL_SIZES(HK_SIZE_ENTRY) HK_MID_SIZES(HK_SIZE_ENTRY) 0, /* 0 for HK_CLS_NONE */
};

/* Span length in slots. A span is at most 4 slots (256 KiB) and holds as many blocks as fit
 * (6 of 40 KiB, 2 of 128 KiB); a class above 128 KiB gets a span of one block. The free blocks
 * of a span that still has a live one stay resident until it empties, so long spans of big
 * blocks strand memory: with spans of 8, 4 and 2 blocks (up to 1 MiB long) realloc_grow
 * peaked 8% and mixed_churn 9% higher. The tail a span's blocks leave (under 64 KiB) is never
 * touched, so it costs address space, not memory. */
const uint8_t hk_class_slots[HK_NCLASS + 1] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    4, 4, 4, 4, 4, 3, 4, 4,  /* 40..128 KiB: 6, 5, 4, 4, 3, 2, 2, 2 blocks */
    3, 3, 4, 4, 5, 6, 7, 8,  /* 160..512 KiB: one block */
    10, 12, 14, 16,          /* 640 KiB..1 MiB: one block */
    1,
};

const uint8_t hk_class_table[HK_TABLE_MAX / 16 + 1] = {HK_CLASS_TABLE_INIT};
