/* Run-time configuration: HAKMEM_* environment variables, read once without allocating. Each
 * is declared once, in config.c's table; the README's table is checked against it. */
#ifndef HK_CONFIG_H
#define HK_CONFIG_H

#include "common.h"

struct hk_config {
    unsigned purge_delay_ms; /* HAKMEM_PURGE_DELAY_MS: idle time before free pages go back */
    unsigned unmap_delay_ms; /* HAKMEM_UNMAP_DELAY_MS: idle time before free mappings go */
    unsigned ss_cache;       /* HAKMEM_SS_CACHE: most empty SuperSlabs kept mapped */
    unsigned large_cache_mb; /* HAKMEM_LARGE_CACHE_MB: most free large memory kept resident */
    unsigned large_arenas;   /* HAKMEM_LARGE_ARENAS: large-tier arenas (0: by the CPUs, large.c) */
    unsigned soft_cap;       /* HAKMEM_SOFT_CAP: most empty 64 KiB slabs a thread keeps per class */
    unsigned shared_blocks;  /* HAKMEM_SHARED_BLOCKS: a thread's first blocks of a small class
                              * that come from the class's shared slab (orphan.h) */
    int ace;                 /* HAKMEM_ACE: adapt caps, caches and delays to demand */
    int bg_thread;           /* HAKMEM_BG_THREAD: a thread that purges on time */
    int populate;            /* HAKMEM_POPULATE: HK_POPULATE_AUTO, _OFF or _ON (fill.h) */
    int stats;               /* HAKMEM_STATS: 0, HK_STATS_TEXT or HK_STATS_JSON at exit */
    char stats_file[256];    /* HAKMEM_STATS_FILE: where the report goes ("" = stderr) */
    int on_error;            /* HAKMEM_ON_ERROR: HK_ON_ERROR_ABORT or HK_ON_ERROR_WARN */
    int show;                /* HAKMEM_CONFIG: print the configuration at start-up */
    unsigned trace;          /* HAKMEM_TRACE: categories traced (trace.h's HK_T_* bits) */
    char trace_file[256];    /* HAKMEM_TRACE_FILE: where trace lines go ("" = stderr) */
    char cgroup[256];        /* HAKMEM_CGROUP: cgroup directory to watch ("" = the process's) */
};

enum { HK_ON_ERROR_ABORT, HK_ON_ERROR_WARN };
enum { HK_STATS_OFF, HK_STATS_TEXT, HK_STATS_JSON };
enum { HK_POPULATE_AUTO, HK_POPULATE_OFF, HK_POPULATE_ON };

/* Most arenas the large tier splits into (HAKMEM_LARGE_ARENAS; by default one per CPU up to
 * this, where there are more than two CPUs). A thread takes its large blocks from one arena; with 8 at most, 16 threads on 16
 * cores shared each arena's lock two by two. */
#define HK_LARGE_ARENAS_MAX 64

extern struct hk_config hk_cfg HK_INTERNAL;

/* Fills hk_cfg from the environment the first time it is called (from hk_init, or from the
 * first report if that comes first); later calls return at once. Thread-safe. */
void hk_config_load(void) HK_INTERNAL;

#endif
