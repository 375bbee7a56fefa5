/* The report: gathers every module's figures into a struct hak_stats (hak_stats_get) and
 * prints it (hak_stats_print, HAKMEM_STATS=1 or json at exit, after the program's own
 * buffered output). It sits above the modules it reads;
 * none of them calls it. */
#ifndef HK_SNAPSHOT_H
#define HK_SNAPSHOT_H

#include "common.h"

/* Prints the report, as text or (json) as one JSON object, to stderr or HAKMEM_STATS_FILE,
 * without allocating. */
void hk_stats_dump(int json) HK_INTERNAL;

#endif
