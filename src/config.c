/* Reads HAKMEM_* variables with getenv only: no allocation, safe before the heap exists. */
#include "config.h"

#include <stdlib.h>

struct hk_config hk_cfg = {
    .ss_cache = 16,
    .ss_hot = 2,
    .stats = 0,
    .abort_on_misuse = 1,
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

void hk_config_load(void) {
    unsigned v;
    hk_env_uint("HAKMEM_SS_CACHE", &hk_cfg.ss_cache, 1u << 20);
    hk_env_uint("HAKMEM_SS_HOT", &hk_cfg.ss_hot, 1u << 20);
    v = (unsigned)hk_cfg.stats;
    hk_env_uint("HAKMEM_STATS", &v, 1);
    hk_cfg.stats = (int)v;
    v = (unsigned)hk_cfg.abort_on_misuse;
    hk_env_uint("HAKMEM_ABORT_ON_MISUSE", &v, 1);
    hk_cfg.abort_on_misuse = (int)v;
}
