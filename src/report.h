/* Misuse reports: one line on stderr naming the operation, the address and the problem, then
 * abort() (HAKMEM_ON_ERROR=abort, the default); with HAKMEM_ON_ERROR=warn the line is printed
 * once per address and the caller leaves the block alone: the operation does nothing. */
#ifndef HK_REPORT_H
#define HK_REPORT_H

#include "common.h"

void hk_report(const char *op, const void *p, const char *problem) HK_INTERNAL HK_COLD;

#endif
