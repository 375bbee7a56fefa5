/* The drawdown of a stock of free memory: how far taking memory back has brought it below its
 * last high, and the deepest such fall since it was last read. ACE sizes the free memory a
 * tier keeps from it (ace.h): it says how much of the kept memory the program came back for,
 * however often, where the bytes taken back (a flow) count a few slabs' round trips many times
 * over. Releases to the OS lower the stock without counting: they are not demand; but memory
 * taken back soon after its release counts as taken (the tiers' refaults), or a budget too
 * small to keep it would never see the demand that would have kept it. Callers serialise
 * (the pool's and the large tier's mutexes). A leaf. */
#ifndef HK_DRAWDOWN_H
#define HK_DRAWDOWN_H

#include <stddef.h>

struct hk_drawdown {
    size_t run;  /* below the last high now */
    size_t max;  /* deepest since the last read */
};

/* bytes of the stock were taken back. */
static inline void hk_drawdown_take(struct hk_drawdown *d, size_t bytes) {
    d->run += bytes;
    if (d->run > d->max) d->max = d->run;
}

/* bytes were added to the stock (freed into it). */
static inline void hk_drawdown_give(struct hk_drawdown *d, size_t bytes) {
    d->run = d->run > bytes ? d->run - bytes : 0;
}

/* The deepest drawdown since the last read; a fall under way goes on counting in the next. */
static inline size_t hk_drawdown_read(struct hk_drawdown *d) {
    size_t m = d->max;
    d->max = d->run;
    return m;
}

#endif
