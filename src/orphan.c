#include "orphan.h"

#include <pthread.h>

#include "block.h"
#include "clock.h"
#include "pool.h"
#include "report.h"
#include "stats.h"
#include "trace.h"

static pthread_mutex_t hk_orphan_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct hk_slab *hk_orphan_partial[HK_NCLASS]; /* orphans with free blocks */
static struct hk_slab *hk_orphan_full[HK_NCLASS];    /* orphans without */
/* Length of hk_orphan_partial[c], changed under the lock and read without it, so a refill
 * that has nothing to adopt does not take the lock. */
static _Atomic unsigned hk_orphan_avail[HK_NCLASS];

static void hk_orphan_partial_push(struct hk_slab *s) {
    s->list = HK_LIST_ORPHAN_PARTIAL;
    hk_slab_list_push(&hk_orphan_partial[s->cls], s);
    atomic_fetch_add_explicit(&hk_orphan_avail[s->cls], 1, memory_order_relaxed);
}

static void hk_orphan_partial_unlink(struct hk_slab *s) {
    hk_slab_list_unlink(&hk_orphan_partial[s->cls], s);
    atomic_fetch_sub_explicit(&hk_orphan_avail[s->cls], 1, memory_order_relaxed);
}

void hk_orphan_abandon(struct hk_slab *s) {
    HK_ASSERT(s->used > 0);
    HK_STAT_INC(slab_abandon);
    pthread_mutex_lock(&hk_orphan_mutex);
    /* seq_cst store: a remote pusher that still sees the old owner pushes into the owner's
     * inbox, which the exiting owner drains after this (see hk_heap_teardown). */
    atomic_store(&s->owner, NULL);
    if (s->free || s->carved < s->capacity) {
        hk_orphan_partial_push(s);
    } else {
        s->list = HK_LIST_ORPHAN_FULL;
        hk_slab_list_push(&hk_orphan_full[s->cls], s);
    }
    pthread_mutex_unlock(&hk_orphan_mutex);
}

struct hk_slab *hk_orphan_adopt(unsigned c, struct hk_owner *o) {
    struct hk_slab *s;
    /* A stale zero only means this refill takes a fresh slab instead. */
    if (atomic_load_explicit(&hk_orphan_avail[c], memory_order_relaxed) == 0) return NULL;
    pthread_mutex_lock(&hk_orphan_mutex);
    if ((s = hk_orphan_partial[c]) != NULL) {
        hk_orphan_partial_unlink(s);
        s->list = HK_LIST_NONE;
        atomic_store_explicit(&s->owner, o, memory_order_release);
        HK_STAT_INC(slab_adopt);
        if (HK_TRACING(HK_T_THREAD))
            hk_trace(HK_T_THREAD, "adopt (an exited thread's slab)", "class_size", s->bsize,
                     "live", s->used, NULL, 0);
    }
    pthread_mutex_unlock(&hk_orphan_mutex);
    return s;
}

int hk_orphan_free(struct hk_slab *s, void *p) {
    void *b = p;
    pthread_mutex_lock(&hk_orphan_mutex);
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) != NULL) {
        pthread_mutex_unlock(&hk_orphan_mutex);
        return 0;
    }
    if (HK_UNLIKELY(s->used == 0 ||
                    (hk_marked_free(b) && hk_list_has(s->free, b, s->capacity)))) {
        pthread_mutex_unlock(&hk_orphan_mutex);
        hk_report("free", p, "double free");
        return 1;
    }
    hk_block_push(&s->free, b);
    if (--s->used == 0) {
        if (s->list == HK_LIST_ORPHAN_FULL) hk_slab_list_unlink(&hk_orphan_full[s->cls], s);
        else hk_orphan_partial_unlink(s);
        pthread_mutex_unlock(&hk_orphan_mutex);
        hk_pool_release(s, hk_now_ms());
        return 1;
    }
    if (s->list == HK_LIST_ORPHAN_FULL) {
        hk_slab_list_unlink(&hk_orphan_full[s->cls], s);
        hk_orphan_partial_push(s);
    }
    pthread_mutex_unlock(&hk_orphan_mutex);
    return 1;
}

void hk_orphan_lock_all(void) { pthread_mutex_lock(&hk_orphan_mutex); }
void hk_orphan_unlock_all(void) { pthread_mutex_unlock(&hk_orphan_mutex); }
