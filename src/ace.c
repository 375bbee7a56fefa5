#include "ace.h"

#include "cgroup.h"
#include "clock.h"
#include "config.h"
#include "large.h"
#include "policy.h"
#include "pool.h"
#include "trace.h"

#define HK_ACE_HISTORY 32      /* windows of demand remembered (3.2 s) */
#define HK_ACE_QUIET 50        /* windows without thrash before a cap halves (5 s) */
#define HK_ACE_CALM 50         /* windows without refaults before the delay halves (5 s) */
#define HK_ACE_CG_WINDOWS 10   /* the cgroup's usage is read once a second */
#define HK_POOL_FLOOR ((size_t)4 << 20)
#define HK_LARGE_FLOOR ((size_t)16 << 20)
#define HK_SS_BYTES ((size_t)2 << 20)
#define HK_LARGE_SHARE_MIN 2   /* room for free memory split between live blocks */
#define HK_LARGE_SHARE_MAX 8

/* Only the decay tick calls hk_ace_update, under its mutex: this state is single-threaded. */
static struct {
    uint64_t next_window;
    struct hk_pool_demand last;
    uint64_t last_large_refault;
    size_t pool_drawn[HK_ACE_HISTORY], large_drawn[HK_ACE_HISTORY]; /* drawdowns */
    size_t large_peak[HK_ACE_HISTORY], pool_peak[HK_ACE_HISTORY], large_foot[HK_ACE_HISTORY];
    unsigned hist;
    uint16_t quiet[HK_NCLASS];
    unsigned calm;
    unsigned large_share;    /* free large memory kept, in multiples of the live peak */
    uint64_t delay;          /* purge delay before any pressure adjustment */
    unsigned cap[HK_NCLASS]; /* soft caps before any pressure adjustment */
    size_t cg_limit;
    unsigned cg_windows;
    int pressure;            /* 0 none, 1 from 75% of the cgroup limit, 2 from 90% */
} hk_ace;

void hk_ace_init(void) {
    if (!hk_cfg.ace) return;
    /* Small classes start by keeping one empty slab; mid classes, whose spans are large,
     * none (hk_ace_caps keeps it so). */
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        hk_ace.cap[c] = hk_pol.cap_max[c] && c < HK_NSMALL ? 1 : 0;
        atomic_store_explicit(&hk_pol.soft_cap[c], hk_ace.cap[c], memory_order_relaxed);
    }
    atomic_store_explicit(&hk_pol.demand, 1, memory_order_relaxed);
    hk_ace.delay = hk_cfg.purge_delay_ms;
    hk_ace.large_share = HK_LARGE_SHARE_MIN;
    /* The first window closes once it has seen something: closed at once, it would find no
     * demand and drop every budget to its floor. */
    hk_ace.next_window = hk_now_ms() + HK_ACE_WINDOW_MS;
    /* Until the first window has measured anything, keep what the fixed policy keeps. */
    atomic_store_explicit(&hk_pol.pool_budget, (size_t)hk_cfg.ss_cache * HK_SS_BYTES,
                          memory_order_relaxed);
    atomic_store_explicit(&hk_pol.large_budget, (size_t)hk_cfg.large_cache_mb << 20,
                          memory_order_relaxed);
    hk_ace.cg_limit = hk_cgroup_init(hk_cfg.cgroup);
}

static uint64_t hk_max_of(const uint64_t *v, unsigned n) {
    uint64_t m = 0;
    for (unsigned i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* Soft caps of the small classes: grow where threads took back slabs they gave up for the
 * cap, shrink where none did for long. A mid class's cap stays 0 (hk_ace_init), round trips
 * or not, and heap.c notes none for it: a span kept is up to 1 MiB that only its class can
 * use, while the pool's front keeps the class's spans resident for it (a round trip is a
 * stripe lock, no page fault) and the pool's free memory serves every class. Raised for round
 * trips until 2026-12-01, a thread kept a span of each of the 12 classes of 80-512 KiB that
 * large 20000 64 4096 4 42 uses, which peaked at 34.3 MiB (mimalloc 33.0) against 30.2;
 * bench/phases at 145.6 against 135.9, 5% slower; mixed_churn with 2 threads at 108.3 against
 * 103.2. */
static void hk_ace_caps(const struct hk_pool_demand *d) {
    for (unsigned c = 0; c < HK_NSMALL; c++) {
        /* Round trips that a thread's keeping would have saved (hk_pool_retaken): where one
         * thread empties slabs and another takes them, every thread keeping more only holds
         * more. */
        uint64_t thrash = d->retaken[c] - hk_ace.last.retaken[c];
        unsigned cap = hk_ace.cap[c], old = cap, max = hk_pol.cap_max[c];
        unsigned floor = max ? 1 : 0;
        const char *why = NULL;
        if (thrash >= 2) {
            hk_ace.quiet[c] = 0;
            cap = cap ? cap * 2 : 1;
            hk_ace.cap[c] = cap < max ? cap : max;
            why = "soft cap up (a thread took back slabs it gave up for the cap)";
        } else if (++hk_ace.quiet[c] >= HK_ACE_QUIET) {
            hk_ace.quiet[c] = 0;
            if (cap > floor) hk_ace.cap[c] = cap / 2 > floor ? cap / 2 : floor;
            why = "soft cap down (no round trip for 5 s)";
        }
        if (HK_TRACING(HK_T_ACE) && why && hk_ace.cap[c] != old)
            hk_trace(HK_T_ACE, why, "class_size", hk_class_size[c], "from", old, "to",
                     hk_ace.cap[c]);
    }
}

void hk_ace_update(uint64_t now) {
    if (!hk_cfg.ace || now < hk_ace.next_window) return;
    hk_ace.next_window = now + HK_ACE_WINDOW_MS;
    struct hk_pool_demand pd;
    struct hk_large_demand ld;
    hk_pool_demand(&pd);
    hk_large_demand(&ld);

    hk_ace_caps(&pd);

    /* Refaults: pages released too early. */
    uint64_t refault = (pd.refault_bytes - hk_ace.last.refault_bytes) +
                       (ld.refault_bytes - hk_ace.last_large_refault);
    uint64_t base = hk_cfg.purge_delay_ms;
    uint64_t old_delay = hk_ace.delay;
    unsigned old_share = hk_ace.large_share;
    if (refault) {
        hk_ace.calm = 0;
        hk_ace.delay = hk_ace.delay * 2 < base * 8 ? hk_ace.delay * 2 : base * 8;
        /* Large pages released for the budget and faulted in again: the budget was short. */
        if (ld.refault_bytes != hk_ace.last_large_refault && hk_ace.large_share < HK_LARGE_SHARE_MAX)
            hk_ace.large_share *= 2;
    } else if (++hk_ace.calm >= HK_ACE_CALM) {
        hk_ace.calm = 0;
        hk_ace.delay = hk_ace.delay / 2 > base ? hk_ace.delay / 2 : base;
        if (hk_ace.large_share > HK_LARGE_SHARE_MIN) hk_ace.large_share /= 2;
    }
    if (HK_TRACING(HK_T_ACE) && hk_ace.delay != old_delay)
        hk_trace(HK_T_ACE,
                 refault ? "purge delay up (released pages were wanted again)"
                         : "purge delay down (no refault for 5 s)",
                 "from_ms", old_delay, "to_ms", hk_ace.delay, NULL, 0);
    if (HK_TRACING(HK_T_ACE) && hk_ace.large_share != old_share)
        hk_trace(HK_T_ACE,
                 refault ? "large share up (large pages released for the budget came back)"
                         : "large share down (no refault for 5 s)",
                 "from", old_share, "to", hk_ace.large_share, NULL, 0);

    /* Budgets: how much of the free memory kept was taken back lately (the deepest drawdown
     * in a window: a stock, which the bytes taken again, a flow, overstated many times over
     * where a few slabs made many round trips). */
    unsigned h = hk_ace.hist++ % HK_ACE_HISTORY;
    hk_ace.pool_drawn[h] = pd.drawn_bytes;
    hk_ace.large_drawn[h] = ld.drawn_bytes;
    hk_ace.large_peak[h] = ld.peak_live_bytes;
    hk_ace.large_foot[h] = ld.peak_foot_bytes;
    hk_ace.pool_peak[h] = pd.peak_bytes;
    size_t pool_budget = hk_max_of(hk_ace.pool_drawn, HK_ACE_HISTORY);
    size_t large_budget = hk_max_of(hk_ace.large_drawn, HK_ACE_HISTORY);
    size_t pool_peak = hk_max_of(hk_ace.pool_peak, HK_ACE_HISTORY);
    size_t large_peak = hk_max_of(hk_ace.large_peak, HK_ACE_HISTORY);
    size_t large_foot = hk_max_of(hk_ace.large_foot, HK_ACE_HISTORY);
    size_t large_share = large_peak;
    /* Where the program has lately taken back more free large memory than the floor, a
     * quarter more: the blocks of a wave fall on other extents than the last wave's, and the
     * free bytes at a wave's end stand a little above its drawdown (bench/waves with blocks
     * up to 8 MiB released 5-10 MiB at each wave and faulted them in again). */
    if (large_budget > HK_LARGE_FLOOR) large_budget += large_budget / 4;
    size_t large_max = (size_t)hk_cfg.large_cache_mb << 20;
    large_share *= hk_ace.large_share;
    if (large_share < HK_LARGE_FLOOR) large_share = HK_LARGE_FLOOR;
    if (large_max > large_share) large_max = large_share;
    if (pool_budget < HK_POOL_FLOOR) pool_budget = HK_POOL_FLOOR;
    if (large_budget < HK_LARGE_FLOOR) large_budget = HK_LARGE_FLOOR;
    if (large_budget > large_max) large_budget = large_max;

    hk_ace.last = pd;
    hk_ace.last_large_refault = ld.refault_bytes;

    /* The container's limit. */
    if (hk_ace.cg_limit && ++hk_ace.cg_windows >= HK_ACE_CG_WINDOWS) {
        size_t limit, usage = hk_cgroup_read(&limit);
        hk_ace.cg_windows = 0;
        int old_pressure = hk_ace.pressure;
        hk_ace.pressure = !limit || !usage          ? 0
                          : usage >= limit / 10 * 9 ? 2
                          : usage >= limit / 4 * 3  ? 1
                                                    : 0;
        if (HK_TRACING(HK_T_ACE) && hk_ace.pressure != old_pressure)
            hk_trace(HK_T_ACE, "cgroup pressure (0 none, 1 from 75%, 2 from 90% of the limit)",
                     "from", (unsigned)old_pressure, "to", (unsigned)hk_ace.pressure, "usage",
                     usage);
    }
    uint64_t delay = hk_ace.delay;
    unsigned ss_cache = hk_cfg.ss_cache, share = HK_POOL_SHARE;
    size_t large_cap = (size_t)hk_cfg.large_cache_mb << 20;
    if (hk_ace.pressure == 1) {
        pool_budget /= 4;
        large_budget /= 4;
        large_cap /= 4;
        share = 1;
        delay /= 4;
        ss_cache /= 2;
    } else if (hk_ace.pressure == 2) {
        pool_budget = large_budget = large_cap = 0;
        share = 0;
        delay = delay / 16 < HK_ACE_WINDOW_MS ? delay / 16 : HK_ACE_WINDOW_MS;
        ss_cache = 0;
    }
    for (unsigned c = 0; c < HK_NCLASS; c++)
        atomic_store_explicit(&hk_pol.soft_cap[c], hk_ace.pressure == 2 ? 0 : hk_ace.cap[c],
                              memory_order_relaxed);
    if (HK_TRACING(HK_T_ACE)) {
        size_t old_pool = atomic_load_explicit(&hk_pol.pool_budget, memory_order_relaxed);
        size_t old_large = atomic_load_explicit(&hk_pol.large_budget, memory_order_relaxed);
        if (old_pool != pool_budget)
            hk_trace(HK_T_ACE, "pool budget (how far EMPTY bytes were drawn down lately)",
                     "from", old_pool, "to", pool_budget, NULL, 0);
        if (old_large != large_budget)
            hk_trace(HK_T_ACE,
                     "large budget (how far free large bytes were drawn down lately, within the "
                     "share)",
                     "from", old_large, "to", large_budget, NULL, 0);
    }
    atomic_store_explicit(&hk_pol.purge_delay_ms, delay, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.pool_budget, pool_budget, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.large_budget, large_budget, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.ss_cache, ss_cache, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.pool_share, share, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.pool_peak, pool_peak, memory_order_relaxed);
    atomic_store_explicit(&hk_pol.large_peak, hk_ace.pressure ? 0 : large_foot,
                          memory_order_relaxed);
    atomic_store_explicit(&hk_pol.large_cap, large_cap, memory_order_relaxed);
}
