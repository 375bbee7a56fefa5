/* ACE, the adaptive cache engine: sets the policy (policy.h) from measured demand.
 *
 * Once per window (HK_ACE_WINDOW_MS), from the decay tick, it reads what the pool and the
 * large tier saw since the last window and decides:
 *   - each small class's soft cap (empty slabs a thread keeps): doubled, up to
 *     HAKMEM_SOFT_CAP's bytes, when threads took back from the pool, twice or more in the
 *     window, slabs of the class they had given up for the cap (thrash: pool.h,
 *     hk_pool_retaken); halved, down to one, after a long quiet spell (a mid class's stays 0);
 *   - the pool and large budgets (free resident bytes kept regardless of age): the deepest
 *     drawdown of the free memory kept in any recent window (how much of it was taken back,
 *     not how often), at least a floor; the large budget is also
 *     held under HAKMEM_LARGE_CACHE_MB and the recent peak of live large bytes. Memory that is
 *     freed and not taken again (a burst that is over) goes back at once;
 *   - the purge delay: doubled (up to 8 times HAKMEM_PURGE_DELAY_MS) when memory whose pages
 *     were released is wanted again soon after, halved back toward it when that stops;
 *   - under a cgroup memory limit (cgroup.h), as usage nears it: budgets, caches and caps
 *     shrink and the delay shortens (from 75% of the limit), down to keeping nothing free
 *     (from 90%).
 * With HAKMEM_ACE=0 the fixed policy from the configuration stays in force. */
#ifndef HK_ACE_H
#define HK_ACE_H

#include "common.h"

#define HK_ACE_WINDOW_MS 100

/* At start-up, after hk_policy_init: ACE's starting policy, and the cgroup limit. */
void hk_ace_init(void) HK_INTERNAL;
/* From the decay tick (one caller at a time): updates the policy once per window. */
void hk_ace_update(uint64_t now) HK_INTERNAL;

#endif
