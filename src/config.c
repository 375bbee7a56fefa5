/* Reads HAKMEM_* variables with getenv only: no allocation, safe before the heap exists. */
#include "config.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct hk_config hk_cfg = {
    .purge_delay_ms = 1000,
    .unmap_delay_ms = 10000,
    .ss_cache = 16,
    .large_cache_mb = 256,
    .soft_cap = 8,
    .ace = 1,
    .bg_thread = 0,
    .stats = 0,
    .on_error = HK_ON_ERROR_ABORT,
    .cgroup = "",
};

/* Parses a non-negative decimal; anything else keeps the default. */
static void hk_env_uint(const char *name, unsigned *out, unsigned max) {
    const char *s = getenv(name);
    if (!s || !*s) return;
    unsigned long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max) return;
    }
    *out = (unsigned)v;
}

static void hk_env_bool(const char *name, int *out) {
    unsigned v = (unsigned)*out;
    hk_env_uint(name, &v, 1);
    *out = (int)v;
}

static _Atomic int hk_cfg_state; /* 0 not read, 1 being read, 2 read */

void hk_config_load(void) {
    int st = atomic_load_explicit(&hk_cfg_state, memory_order_acquire);
    if (HK_LIKELY(st == 2)) return;
    st = 0;
    if (!atomic_compare_exchange_strong(&hk_cfg_state, &st, 1)) {
        while (atomic_load_explicit(&hk_cfg_state, memory_order_acquire) != 2) sched_yield();
        return;
    }
    hk_env_uint("HAKMEM_PURGE_DELAY_MS", &hk_cfg.purge_delay_ms, 3600u * 1000u);
    hk_env_uint("HAKMEM_UNMAP_DELAY_MS", &hk_cfg.unmap_delay_ms, 3600u * 1000u);
    hk_env_uint("HAKMEM_SS_CACHE", &hk_cfg.ss_cache, 1u << 20);
    hk_env_uint("HAKMEM_LARGE_CACHE_MB", &hk_cfg.large_cache_mb, 1u << 24);
    hk_env_uint("HAKMEM_SOFT_CAP", &hk_cfg.soft_cap, 1024);
    hk_env_bool("HAKMEM_ACE", &hk_cfg.ace);
    hk_env_bool("HAKMEM_BG_THREAD", &hk_cfg.bg_thread);
    hk_env_bool("HAKMEM_STATS", &hk_cfg.stats);
    const char *e = getenv("HAKMEM_ON_ERROR");
    if (e && !strcmp(e, "warn")) hk_cfg.on_error = HK_ON_ERROR_WARN;
    else if (e && !strcmp(e, "abort")) hk_cfg.on_error = HK_ON_ERROR_ABORT;
    const char *cg = getenv("HAKMEM_CGROUP");
    if (cg && strlen(cg) < sizeof hk_cfg.cgroup) strcpy(hk_cfg.cgroup, cg);
    /* Pages are released before mappings: an unmap delay shorter than the purge delay would
     * leave nothing to release. */
    if (hk_cfg.unmap_delay_ms < hk_cfg.purge_delay_ms) hk_cfg.unmap_delay_ms = hk_cfg.purge_delay_ms;
    atomic_store_explicit(&hk_cfg_state, 2, memory_order_release);
}
