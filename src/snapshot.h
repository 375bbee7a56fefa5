/* The report: gathers every module's figures into a struct hak_stats (hak_stats_get) and
 * prints it (hak_stats_print, HAKMEM_STATS=1 at exit). It sits above the modules it reads;
 * none of them calls it. */
#ifndef HK_SNAPSHOT_H
#define HK_SNAPSHOT_H

#include "common.h"

/* Prints the counters to stderr without allocating. */
void hk_stats_dump(void) HK_INTERNAL;

#endif
