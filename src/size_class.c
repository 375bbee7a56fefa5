#include "size_class.h"

/* The tables are written out rather than computed at start-up so that the very first malloc,
 * possibly made before any constructor runs, needs no initialisation. test_size_class checks
 * them against each other. */
const uint32_t hk_class_size[HK_NCLASS + 1] = {
    16,     32,     48,     64,     80,     96,     112,    128,     /* 0..7: 16 apart */
    160,    192,    224,    256,    320,    384,    448,    512,     /* 8..15 */
    640,    768,    896,    1024,   1280,   1536,   1792,   2048,    /* 16..23 */
    2560,   3072,   3584,   4096,   5120,   6144,   7168,   8192,    /* 24..31 */
    10240,  12288,  14336,  16384,  20480,  24576,  28672,  32768,   /* 32..39 */
    40960,  49152,  57344,  65536,  81920,  98304,  114688, 131072,  /* 40..47: mid */
    163840, 196608, 229376, 262144, 327680, 393216, 458752, 524288,  /* 48..55 */
    655360, 786432, 917504, 1048576,                                 /* 56..59 */
    0,                                                               /* HK_CLS_NONE */
};

/* Span length in slots: the class size times 8 blocks (up to 128 KiB), 4 (up to 256 KiB),
 * 2 (up to 512 KiB) or 1, which is always a whole number of 64 KiB slots. */
const uint8_t hk_class_slots[HK_NCLASS + 1] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    5, 6, 7, 8, 10, 12, 14, 16, /* 8 blocks */
    10, 12, 14, 16,             /* 4 blocks */
    10, 12, 14, 16,             /* 2 blocks */
    10, 12, 14, 16,             /* 1 block */
    1,
};

const uint8_t hk_class_table[HK_TABLE_MAX / 16 + 1] = {HK_CLASS_TABLE_INIT};
