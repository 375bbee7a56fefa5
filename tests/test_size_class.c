/* Size classes: 16-byte spacing up to 128 bytes, less than 25% waste above (above 4 KiB, by
 * what a block costs of its slot), the two tables (small and mid) and the class sizes
 * agreeing for every request size up to the mid tier's top, and mid-class spans filled by
 * whole blocks. */
#include "check.h"
#include "size_class.h"
#include "superslab.h"

TEST(spacing_16_at_the_bottom) {
    for (unsigned c = 0; c < 8; c++) CHECK(hk_class_size[c] == 16 * (c + 1));
}

/* Up to 4 KiB, and in the mid tier, by the block's size. */
TEST(waste_below_25_percent_above_128) {
    for (size_t n = 129; n <= HK_MID_MAX; n++) {
        if (n > 4096 && n <= HK_SMALL_MAX) continue; /* below */
        size_t bs = hk_class_size[hk_class_of(n)];
        CHECKF((bs - n) * 4 < n, "n=%zu block=%zu", n, bs);
    }
}

/* What a small request costs: its block's share of the 64 KiB slot. */
static size_t slot_share(size_t n) {
    size_t per = HK_SLAB_SIZE / hk_class_size[hk_class_of(n)];
    return HK_SLAB_SIZE / per;
}

/* Above 4 KiB a slot holds 15 blocks or fewer, and each class is the largest multiple of 64
 * bytes (a cache line: a block asked aligned to 64 bytes comes from the same class as one not
 * aligned) that holds its number, but for 15 blocks, the largest multiple of 16: 4,368 bytes, a
 * 4 KiB page and a header of up to 272 bytes. A smaller class would make the requests just
 * above it pay a block a slot more. */
TEST(classes_above_4k_are_the_largest_for_their_blocks_a_slot) {
    for (unsigned c = 0; c < HK_NSMALL; c++) {
        size_t bs = hk_class_size[c], per = HK_SLAB_SIZE / bs, unit = per == 15 ? 16 : 64;
        if (bs <= 4096) continue;
        CHECKF((HK_SLAB_SIZE / per & ~(unit - 1)) == bs, "class %u: %zu bytes, %zu a slot", c,
               bs, per);
    }
}

/* Above 4 KiB a request costs less than a quarter more than it asks, or as little as any class
 * of a multiple of 64 bytes could make it cost: its class holds as many blocks a slot as the
 * request rounded up to 64 bytes does. */
TEST(requests_above_4k_pay_under_a_quarter_or_the_least_a_slot_allows) {
    for (size_t n = 4097; n <= HK_SMALL_MAX; n++) {
        size_t share = slot_share(n), fits = HK_SLAB_SIZE / ((n + 63) & ~(size_t)63);
        CHECKF((share - n) * 4 < n || HK_SLAB_SIZE / share == fits, "n=%zu share=%zu", n, share);
    }
}

/* Programs put headers on powers of two: SQLite's page cache asks for 1,032, 4,104 and 4,368
 * bytes (a 1 KiB and a 4 KiB page and their headers). Blocks of 1,280 and 5,120 bytes cost
 * them a quarter more. */
TEST(a_header_on_1k_or_4k_costs_under_an_eighth) {
    static const size_t asks[] = {1032, 1040, 1088, 4104, 4112, 4368};
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        size_t n = asks[i], share = slot_share(n);
        CHECKF((share - n) * 8 < n, "n=%zu share=%zu", n, share);
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

/* The mid tier's table, which smallest_fitting_class checks through hk_class_of, entry by
 * entry: each names the smallest class that holds its whole step. */
TEST(mid_table_names_the_smallest_class_of_each_step) {
    for (size_t i = HK_TABLE_MAX >> HK_MID_STEP_SHIFT; i < (HK_MID_MAX >> HK_MID_STEP_SHIFT); i++) {
        size_t top = (i + 1) << HK_MID_STEP_SHIFT;
        unsigned c = hk_mid_class[i];
        CHECKF(c >= HK_NSMALL && c < HK_NCLASS && hk_class_size[c] >= top &&
                   hk_class_size[c - 1] < top,
               "entry %zu: class %u", i, c);
    }
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
        /* HK_MID_ONE is the first class of one block a span (malloc.c, hk_mid_borrow). */
        CHECKF((c >= HK_MID_ONE) == (span == hk_class_size[c]), "class %u: %zu-byte blocks in a "
               "%zu-byte span, HK_MID_ONE %u", c, (size_t)hk_class_size[c], span, HK_MID_ONE);
    }
}

/* free's fast path trusts the multiply test for every offset into a slab. */
TEST(block_start_test_is_exact_for_every_offset) {
    const uint32_t *div = hk_class_div; /* what the slow paths' checks use */
    for (unsigned c = 0; c < HK_NSMALL; c++) {
        uint32_t d = hk_class_size[c];
        CHECKF(div[c] == HK_BLOCK_DIV(d), "class %u", c);
        for (uint32_t off = 0; off < HK_SLAB_SIZE; off++)
            CHECKF(((uint32_t)(off * div[c]) <= HK_BLOCK_START_MAX) == (off % d == 0), "class %u off %u", c,
                   off);
    }
}

/* What free's fast path admits with one multiply (HK_BLOCK_MUL): off * m < lim * m. */
static int mul_admits(uint64_t m, uint64_t lim, uint64_t off) { return off * m < lim * m; }
static int is_carved_start(uint32_t d, uint64_t lim, int64_t off) {
    return off >= 0 && (uint64_t)off < lim && (uint64_t)off % d == 0;
}

/* free's fast path trusts one multiply to say both that p lies in the carved part of the slab
 * and that it is a block start, for any p at most 2^48 bytes from the slab either way: for
 * every small class, and for the mid classes whose spans it takes (size_class.h,
 * hk_mul_exact), 8 of them, whose multipliers are chosen for it. */
TEST(range_and_block_start_test_is_exact_within_2_to_the_48) {
    static const int64_t far = (int64_t)1 << 48;
    unsigned mid_exact = 0;
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        uint32_t d = hk_class_size[c];
        uint64_t m = hk_class_mul[c], e = m * d; /* m * d = 2^64 + e */
        int mid = c >= HK_NSMALL;
        CHECKF(m == (mid ? HK_MID_MUL(d) : HK_BLOCK_MUL(d)), "class %u", c);
        if (mid && !hk_mul_exact(m, d)) continue;
        mid_exact += mid;
        CHECKF(e >= 1 && e <= d && e <= HK_MUL_EXACT_MAX, "class %u: e = %llu", c,
               (unsigned long long)e);
        uint64_t slab = (uint64_t)hk_class_slots[c] * HK_SLAB_SIZE;
        uint64_t lims[] = {0, d, slab / d * d};
        for (unsigned l = 0; l < 3; l++) {
            uint64_t lim = lims[l];
            int64_t near = (int64_t)(l == 2 ? 4 * slab : slab);
            for (int64_t off = -near; off <= near; off++)
                CHECKF(mul_admits(m, lim, (uint64_t)off) == is_carved_start(d, lim, off),
                       "class %u lim %llu off %lld", c, (unsigned long long)lim, (long long)off);
            /* At the far ends of the range, and around every power of two up to them. */
            for (int64_t x = 0; x < 65536; x++) {
                int64_t offs[] = {far - x, -far + x};
                for (unsigned i = 0; i < 2; i++)
                    CHECKF(!mul_admits(m, lim, (uint64_t)offs[i]), "class %u lim %llu off %lld",
                           c, (unsigned long long)lim, (long long)offs[i]);
            }
            for (unsigned k = 17; k <= 48; k++)
                for (int64_t x = -256; x <= 256; x++) {
                    int64_t offs[] = {((int64_t)1 << k) + x, -((int64_t)1 << k) + x};
                    for (unsigned i = 0; i < 2; i++)
                        CHECKF(mul_admits(m, lim, (uint64_t)offs[i]) ==
                                   is_carved_start(d, lim, offs[i]),
                               "class %u lim %llu off %lld", c, (unsigned long long)lim,
                               (long long)offs[i]);
                }
            /* Multiples of the class size far from the slab: the plain block-start test
             * (HK_BLOCK_DIV) would admit them, this one must not. */
            for (uint64_t q = slab / d; q < 8 * slab / d; q++) {
                CHECKF(!mul_admits(m, lim, q * d), "class %u q %llu", c, (unsigned long long)q);
                CHECKF(!mul_admits(m, lim, -(q * d)), "class %u q -%llu", c,
                       (unsigned long long)q);
            }
        }
        uint64_t x = 0x9e3779b97f4a7c15ull ^ c, lim = lims[2];
        for (unsigned i = 0; i < 200000; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int64_t off = (int64_t)(x % (2 * (uint64_t)far + 1)) - far;
            CHECKF(mul_admits(m, lim, (uint64_t)off) == is_carved_start(d, lim, off),
                   "class %u off %lld", c, (long long)off);
        }
    }
    CHECKF(mid_exact == 8, "%u mid classes exact within 2^48", mid_exact);
    /* Why the others are left out: a 1 MiB block's span base plus 2^44 + 2^20 - 1 passes. */
    unsigned big = hk_class_of((size_t)1 << 20);
    CHECK(!hk_mul_exact(hk_class_mul[big], hk_class_size[big]));
    CHECK(mul_admits(hk_class_mul[big], (uint64_t)1 << 20,
                     ((uint64_t)1 << 44) + ((uint64_t)1 << 20) - 1));
}

/* Free's mid short path trusts the same multiply for an offset into a span (heap.c,
 * hk_span_block_start): below the span's length, for every carved length, it admits exactly
 * the carved block starts. */
TEST(span_block_start_test_is_exact_within_the_span) {
    for (unsigned c = HK_NSMALL; c < HK_NCLASS; c++) {
        uint32_t d = hk_class_size[c];
        uint64_t m = hk_class_mul[c], span = (uint64_t)hk_class_slots[c] * HK_SLAB_SIZE;
        CHECKF(m == HK_MID_MUL(d), "class %u", c);
        for (uint64_t lim = d; lim <= span; lim += d)
            for (uint64_t off = 0; off < span; off++)
                CHECKF(mul_admits(m, lim, off) == is_carved_start(d, lim, (int64_t)off),
                       "class %u lim %llu off %llu", c, (unsigned long long)lim,
                       (unsigned long long)off);
    }
}

int main(void) {
    TEST_MAIN_BEGIN("size_class");
    RUN(spacing_16_at_the_bottom);
    RUN(waste_below_25_percent_above_128);
    RUN(classes_above_4k_are_the_largest_for_their_blocks_a_slot);
    RUN(requests_above_4k_pay_under_a_quarter_or_the_least_a_slot_allows);
    RUN(a_header_on_1k_or_4k_costs_under_an_eighth);
    RUN(waste_below_an_eighth_above_512k);
    RUN(smallest_fitting_class);
    RUN(class_sizes_increase_and_keep_alignment);
    RUN(mid_table_names_the_smallest_class_of_each_step);
    RUN(spans_hold_whole_blocks);
    RUN(block_start_test_is_exact_for_every_offset);
    RUN(range_and_block_start_test_is_exact_within_2_to_the_48);
    RUN(span_block_start_test_is_exact_within_the_span);
    TEST_MAIN_END();
}
