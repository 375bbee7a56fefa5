/* Size classes: 16-byte spacing up to 128 bytes, less than 25% waste above, the table, the
 * arithmetic and the class sizes agreeing for every request size up to the mid tier's top,
 * and mid-class spans filled by whole blocks. */
#include "check.h"
#include "size_class.h"
#include "superslab.h"

TEST(spacing_16_at_the_bottom) {
    for (unsigned c = 0; c < 8; c++) CHECK(hk_class_size[c] == 16 * (c + 1));
}

TEST(waste_below_25_percent_above_128) {
    for (size_t n = 129; n <= HK_MID_MAX; n++) {
        size_t bs = hk_class_size[hk_class_of(n)];
        CHECKF((bs - n) * 4 < n, "n=%zu block=%zu", n, bs);
    }
}

/* Above 512 KiB a span is one block, and the classes follow its slots. */
TEST(waste_below_an_eighth_above_512k) {
    for (size_t n = HK_FINE_MIN + 1; n <= HK_MID_MAX; n++) {
        size_t bs = hk_class_size[hk_class_of(n)];
        CHECKF((bs - n) * 8 < n, "n=%zu block=%zu", n, bs);
    }
}

TEST(smallest_fitting_class) {
    for (size_t n = 0; n <= HK_MID_MAX; n++) {
        unsigned c = hk_class_of(n);
        CHECKF(c < HK_NCLASS, "n=%zu", n);
        CHECKF(hk_class_size[c] >= n, "n=%zu class=%u", n, c);
        CHECKF(c == 0 || hk_class_size[c - 1] < n, "n=%zu class=%u not smallest", n, c);
    }
}

TEST(class_sizes_increase_and_keep_alignment) {
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        CHECK(hk_class_size[c] % 16 == 0);
        if (c) CHECK(hk_class_size[c] > hk_class_size[c - 1]);
    }
    CHECK(hk_class_size[HK_NSMALL - 1] == HK_SMALL_MAX);
    CHECK(hk_class_size[HK_NCLASS - 1] == HK_MID_MAX);
}

TEST(table_agrees_with_arithmetic_where_both_apply) {
    /* hk_class_of_log is only used above the table, but its formula holds from 129 up. */
    for (size_t n = 129; n <= HK_TABLE_MAX; n++) CHECK(hk_class_of_log(n) == hk_class_of(n));
}

TEST(spans_hold_whole_blocks) {
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        size_t span = (size_t)hk_class_slots[c] * HK_SLAB_SIZE;
        CHECKF(hk_class_slots[c] >= 1 && hk_class_slots[c] <= HK_SPAN_MAX_SLOTS, "class %u", c);
        CHECKF(c < HK_NSMALL ? hk_class_slots[c] == 1 : span % hk_class_size[c] == 0,
               "class %u: %zu-byte blocks in a %zu-byte span", c, (size_t)hk_class_size[c],
               span);
        /* A span fits a SuperSlab beside its header; up to 512 KiB, twice or more. */
        CHECK(hk_class_slots[c] < HK_SLABS);
        CHECKF(hk_class_size[c] > HK_FINE_MIN || hk_class_slots[c] <= 8, "class %u: %u slots",
               c, hk_class_slots[c]);
    }
}

/* free's fast path trusts the multiply test for every offset into a slab. */
TEST(block_start_test_is_exact_for_every_offset) {
    static const uint32_t div[HK_NSMALL] = {
#define DIV_ENTRY(d) HK_BLOCK_DIV(d),
        HK_SMALL_SIZES(DIV_ENTRY)};
    for (unsigned c = 0; c < HK_NSMALL; c++) {
        uint32_t d = hk_class_size[c];
        CHECKF(div[c] == HK_BLOCK_DIV(d), "class %u", c);
        for (uint32_t off = 0; off < HK_SLAB_SIZE; off++)
            CHECKF(((uint32_t)(off * div[c]) <= HK_BLOCK_START_MAX) == (off % d == 0), "class %u off %u", c,
                   off);
    }
}

int main(void) {
    TEST_MAIN_BEGIN("size_class");
    RUN(spacing_16_at_the_bottom);
    RUN(waste_below_25_percent_above_128);
    RUN(waste_below_an_eighth_above_512k);
    RUN(smallest_fitting_class);
    RUN(class_sizes_increase_and_keep_alignment);
    RUN(table_agrees_with_arithmetic_where_both_apply);
    RUN(spans_hold_whole_blocks);
    RUN(block_start_test_is_exact_for_every_offset);
    TEST_MAIN_END();
}
