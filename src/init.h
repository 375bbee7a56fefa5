/* Process start-up: configuration, the policy and ACE, the fork handlers, the background
 * thread when asked for. It runs on the first slow-path call of any
 * thread, allocates nothing itself until the allocator is ready, and may run before
 * constructors: no malloc, no dlsym, no stdio. (Each thread's own set-up is the heap's.) */
#ifndef HK_INIT_H
#define HK_INIT_H

#include "common.h"

/* Makes sure the process is initialised; always succeeds (returns 1). */
int hk_init(void) HK_INTERNAL;

#endif
