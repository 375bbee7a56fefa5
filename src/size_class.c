#include "size_class.h"

/* The table is written out rather than computed at start-up so that the very first malloc,
 * possibly made before any constructor runs, needs no initialisation. test_size_class checks
 * it against hk_class_size. */
const uint32_t hk_class_size[HK_NCLASS + 1] = {
    16,    32,    48,    64,    80,    96,    112,   128,               /* 0..7: 16 apart */
    160,   192,   224,   256,   320,   384,   448,   512,               /* 8..15 */
    640,   768,   896,   1024,  1280,  1536,  1792,  2048,              /* 16..23 */
    2560,  3072,  3584,  4096,  5120,  6144,  7168,  8192,              /* 24..31 */
    10240, 12288, 14336, 16384, 20480, 24576, 28672, 32768,             /* 32..39 */
    0,                                                                  /* HK_CLS_NONE */
};

const uint8_t hk_class_table[HK_TABLE_MAX / 16 + 1] = {HK_CLASS_TABLE_INIT};
