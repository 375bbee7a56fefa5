/* Misuse reports: one line on stderr naming the operation, the address and the problem, then
 * abort() (unless HAKMEM_ABORT_ON_MISUSE=0, in which case the operation does nothing). */
#ifndef HK_REPORT_H
#define HK_REPORT_H

#include "common.h"

void hk_report(const char *op, const void *p, const char *problem) HK_INTERNAL HK_COLD;

/* Writes a string to stderr with write(2): no stdio, no allocation. */
void hk_write_err(const char *s) HK_INTERNAL;

#endif
