/* The container's memory limit (cgroup v2), for ACE: the process's cgroup directory is found
 * once from /proc/self/cgroup (or HAKMEM_CGROUP names it), its limit is the lower of
 * memory.max and memory.high, and its usage is memory.current. Files are read with
 * open/read/close into stack buffers: nothing is allocated. No allocator we know of looks at
 * this; hakmem shrinks its caches as the process nears the limit. */
#ifndef HK_CGROUP_H
#define HK_CGROUP_H

#include "common.h"

/* Finds the cgroup directory (dir: HAKMEM_CGROUP, or "" for the process's own) and its
 * limit. Returns the limit in bytes, or 0 when there is none (or no cgroup v2). */
size_t hk_cgroup_init(const char *dir) HK_INTERNAL;
/* The cgroup's memory in use now and its limit now (a limit can change); 0 when the process
 * had no limit at start-up or the files cannot be read. */
size_t hk_cgroup_read(size_t *limit) HK_INTERNAL;

#endif
