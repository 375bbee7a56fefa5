/* Tracing: one line per event of the categories HAKMEM_TRACE names (pool, os, large, ace,
 * thread, fail, or all), to stderr or HAKMEM_TRACE_FILE ("%p" there stands for the pid):
 *   hakmem trace 12.345678 os: mmap 0x7f0000000000 2097152
 * The time is seconds since start-up (CLOCK_MONOTONIC). Events are traced on slow paths only,
 * each behind one test of hk_trace_mask (HK_TRACING), which is 0 unless asked for: with
 * tracing off the cost is that predictable branch, and nothing on the fast paths. A leaf:
 * modules call in; it reads only the configuration. */
#ifndef HK_TRACE_H
#define HK_TRACE_H

#include "common.h"

enum {
    HK_T_POOL = 1u << 0,   /* slab acquisition by stage and class, releases to the pool */
    HK_T_OS = 1u << 1,     /* every mmap, munmap, madvise and mremap, with its size */
    HK_T_LARGE = 1u << 2,  /* large blocks: cache hits and misses, releases, mremap */
    HK_T_ACE = 1u << 3,    /* ACE's decisions: caps, budgets and the delay, old and new, why */
    HK_T_THREAD = 1u << 4, /* thread heaps set up and torn down, orphans adopted */
    HK_T_FAIL = 1u << 5,   /* every failed allocation: size and reason */
};

extern unsigned hk_trace_mask HK_INTERNAL;

#define HK_TRACING(cat) HK_UNLIKELY(hk_trace_mask & (cat))

/* Sets the mask and opens the trace file, from the configuration (once, at start-up). */
void hk_trace_init(void) HK_INTERNAL;

/* One event: category, what happened, then up to three numbers: printed in decimal, or in
 * hex where the name ends in '@' (addresses); a NULL name ends the list. */
void hk_trace(unsigned cat, const char *what, const char *n1, unsigned long long v1,
              const char *n2, unsigned long long v2, const char *n3, unsigned long long v3)
    HK_INTERNAL HK_COLD;

#endif
