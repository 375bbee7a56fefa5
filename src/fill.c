/* Filling big blocks ahead (fill.h): the score, the plan for each candidate, the probes. */
#define _GNU_SOURCE
#include "fill.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "config.h"
#include "os.h"
#include "policy.h"
#include "stats.h"

/* The score: HK_FILL_ON or more, filling is on (up to HK_FILL_TOP: one probe found sparse
 * turns it off from anywhere); below, off, and at -k (k >= 1) one candidate in 2^k is a probe
 * (down to HK_FILL_LOW). It starts at 1: off, every candidate a probe, the first found
 * filled turns filling on (a program with few blocks cut from untouched memory, as one that
 * reuses a few big arrays, would otherwise spend them all on probes). */
#define HK_FILL_ON 2
#define HK_FILL_TOP 4
#define HK_FILL_LOW (-4)
static _Atomic int hk_fill_score = 1;
static _Atomic unsigned hk_fill_seq; /* candidates so far, which picks the probes */

/* A probe looks at HK_FILL_SAMPLES stretches of HK_FILL_SAMPLE_PAGES pages spread over the
 * block (the start of each eighth): a block the program filled has them all, one it wrote in
 * places (its start, its end) few. One mincore call each, 32 pages in all: a call over 2 MiB
 * took 28 us here (docs/BENCHMARKS.md, huge pages), where a 4 MiB block's faults take 15 ms. */
#define HK_FILL_SAMPLES 8
#define HK_FILL_SAMPLE_PAGES 4

int hk_fill_plan(size_t len, size_t fresh) {
    if (hk_cfg.populate == HK_POPULATE_OFF || len < HK_FILL_MIN || fresh < len / 2)
        return HK_FILL_NONE;
    /* Near a cgroup limit (ACE lowered the pool's share), a page the program might not have
     * written must not be the one that takes the process over it. */
    if (atomic_load_explicit(&hk_pol.pool_share, memory_order_relaxed) < HK_POOL_SHARE)
        return HK_FILL_NONE;
    if (hk_cfg.populate == HK_POPULATE_ON) return HK_FILL_POPULATE;
    int s = atomic_load_explicit(&hk_fill_score, memory_order_relaxed);
    unsigned n = atomic_fetch_add_explicit(&hk_fill_seq, 1, memory_order_relaxed);
    if (s >= HK_FILL_ON) return n % HK_FILL_PROBE_EVERY == 0 ? HK_FILL_PROBE : HK_FILL_POPULATE;
    unsigned every = s >= 0 ? 1u : 1u << -s;
    return n % every == 0 ? HK_FILL_PROBE : HK_FILL_NONE;
}

void hk_fill(void *p, size_t len) {
    HK_STAT_INC(fill_blocks);
    HK_STAT_ADD(fill_bytes, len);
    hk_os_populate(p, len);
}

int hk_fill_written(const void *p, size_t len) {
    size_t pages = len / HK_PAGE_SIZE, seen = 0, held = 0;
    int saved = errno; /* free leaves errno as it found it */
    for (unsigned i = 0; i < HK_FILL_SAMPLES; i++) {
        size_t first = pages * i / HK_FILL_SAMPLES, n = pages - first;
        if (n > HK_FILL_SAMPLE_PAGES) n = HK_FILL_SAMPLE_PAGES;
        unsigned char v[HK_FILL_SAMPLE_PAGES];
        if (mincore((char *)p + first * HK_PAGE_SIZE, n * HK_PAGE_SIZE, v) != 0) break;
        for (size_t k = 0; k < n; k++) held += v[k] & 1;
        seen += n;
    }
    errno = saved;
    return seen > 0 && held * 8 >= seen * 7;
}

void hk_fill_learn(int whole) {
    HK_STAT_INC(fill_probes);
    if (whole) HK_STAT_INC(fill_probes_filled);
    int s = atomic_load_explicit(&hk_fill_score, memory_order_relaxed);
    if (whole) s = s < 0 ? 1 : s < HK_FILL_TOP ? s + 1 : s;
    else s = s > 0 ? -1 : s > HK_FILL_LOW ? s - 1 : s;
    atomic_store_explicit(&hk_fill_score, s, memory_order_relaxed);
}
