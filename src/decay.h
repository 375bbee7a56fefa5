/* Release by time: the process-wide tick.
 *
 * hakmem has no background thread unless HAKMEM_BG_THREAD=1. Instead every thread's slow
 * path (a refill, a slab that empties) calls hk_decay_tick with the time; at most every
 * HK_DECAY_TICK_MS one caller runs it, the others return after one comparison. The tick lets
 * ACE update the policy and then releases what the pool and the large tier hold past their
 * delays. With HAKMEM_BG_THREAD=1 a thread also runs it on a timer, so memory of a program
 * that has gone quiet goes back too. */
#ifndef HK_DECAY_H
#define HK_DECAY_H

#include "common.h"

#define HK_DECAY_TICK_MS 10

void hk_decay_tick(uint64_t now) HK_INTERNAL;
/* Starts the background thread if configured (once, after start-up; again after a fork). */
void hk_decay_start(void) HK_INTERNAL;

void hk_decay_lock_all(void) HK_INTERNAL;
void hk_decay_unlock_all(void) HK_INTERNAL;
/* In a fork's child: the background thread is gone; the next tick starts another. */
void hk_decay_forked_child(void) HK_INTERNAL;

#endif
