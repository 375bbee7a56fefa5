/* Run-time configuration: HAKMEM_* environment variables, read once at start-up without
 * allocating. Each variable is documented in the README's configuration table. */
#ifndef HK_CONFIG_H
#define HK_CONFIG_H

#include "common.h"

struct hk_config {
    unsigned ss_cache;     /* HAKMEM_SS_CACHE: empty SuperSlabs kept mapped for reuse */
    unsigned ss_hot;       /* HAKMEM_SS_HOT: of those, how many keep their pages resident */
    int stats;             /* HAKMEM_STATS: print counters to stderr at exit */
    int abort_on_misuse;   /* HAKMEM_ABORT_ON_MISUSE: abort after reporting a bad free */
};

extern struct hk_config hk_cfg HK_INTERNAL;

/* Fills hk_cfg from the environment. Called once, from hk_init. */
void hk_config_load(void) HK_INTERNAL;

#endif
