/* The clock of the slow paths: milliseconds from CLOCK_MONOTONIC_COARSE, a vDSO read of a
 * few nanoseconds (4 ms resolution), cheap enough to consult on every refill. Idle times,
 * purge delays and ACE's windows are all measured with it. */
#ifndef HK_CLOCK_H
#define HK_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t hk_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#endif
