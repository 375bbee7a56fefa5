/* Process start-up: configuration, the double-free key, the thread-exit hook and the fork
 * handlers. It runs on the first slow-path call of any thread, allocates nothing itself, and
 * may run before constructors: no malloc, no dlsym, no stdio. */
#ifndef HK_INIT_H
#define HK_INIT_H

#include "common.h"

/* Makes sure the process is initialised; always succeeds (returns 1). */
int hk_init(void) HK_INTERNAL;
/* Arranges for the calling thread's heap to be torn down when the thread exits. */
void hk_init_thread(void *heap) HK_INTERNAL;

#endif
