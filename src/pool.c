#include "pool.h"

#include <pthread.h>

#include "../include/hakmem.h"
#include "config.h"
#include "os.h"
#include "stats.h"

enum { HK_SSL_NONE = 0, HK_SSL_PARTIAL, HK_SSL_CACHE };

static pthread_mutex_t hk_pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct hk_slab *hk_empty[HK_NCLASS];   /* stage 1: EMPTY slots by last class */
static struct hk_superslab *hk_partial;      /* SuperSlabs with ACTIVE and non-ACTIVE slots */
static struct hk_superslab *hk_cache_head, *hk_cache_tail; /* fully empty, most recent first */
static size_t hk_ncache, hk_nss, hk_nactive_slabs;

/* --- intrusive doubly linked lists ------------------------------------------------------ */

static void hk_ss_push(struct hk_superslab **head, struct hk_superslab *ss) {
    ss->prev = NULL;
    ss->next = *head;
    if (*head) (*head)->prev = ss;
    *head = ss;
}

static void hk_ss_unlink(struct hk_superslab **head, struct hk_superslab *ss) {
    if (ss->prev) ss->prev->next = ss->next;
    else *head = ss->next;
    if (ss->next) ss->next->prev = ss->prev;
    ss->next = ss->prev = NULL;
}

/* --- the cache of empty SuperSlabs ------------------------------------------------------ */

static void hk_cache_remove(struct hk_superslab *ss) {
    if (ss == hk_cache_tail) hk_cache_tail = ss->prev;
    hk_ss_unlink(&hk_cache_head, ss);
    ss->in_list = HK_SSL_NONE;
    hk_ncache--;
}

static void hk_cache_insert(struct hk_superslab *ss) {
    hk_ss_push(&hk_cache_head, ss);
    if (!hk_cache_tail) hk_cache_tail = ss;
    ss->in_list = HK_SSL_CACHE;
    hk_ncache++;
    /* The hot window keeps its pages; the SuperSlab that just left it gives them back. */
    if (hk_ncache > hk_cfg.ss_hot) {
        struct hk_superslab *c = hk_cache_head;
        for (unsigned i = 0; i < hk_cfg.ss_hot && c; i++) c = c->next;
        if (c && !c->cold) {
            /* Keep slab 0 (the header) resident; release the block slabs. */
            hk_os_release((char *)c + HK_SLAB_SIZE, HK_SS_SIZE - HK_SLAB_SIZE);
            c->cold = 1;
        }
    }
    while (hk_ncache > hk_cfg.ss_cache) {
        struct hk_superslab *old = hk_cache_tail;
        hk_cache_remove(old);
        hk_nss--;
        hk_ss_unmap(old);
    }
}

/* --- acquire and release ---------------------------------------------------------------- */

static struct hk_slab *hk_activate(struct hk_superslab *ss, struct hk_slab *s, unsigned c) {
    s->state = HK_SLOT_ACTIVE;
    s->list = HK_LIST_NONE;
    ss->nactive++;
    hk_nactive_slabs++;
    if (ss->nactive == HK_SLABS - 1 && ss->in_list == HK_SSL_PARTIAL) {
        hk_ss_unlink(&hk_partial, ss);
        ss->in_list = HK_SSL_NONE;
    }
    hk_slab_format(s, c);
    return s;
}

/* First non-ACTIVE slot of ss; the caller knows there is one. */
static struct hk_slab *hk_free_slot(struct hk_superslab *ss) {
    for (unsigned i = 1; i < HK_SLABS; i++) {
        struct hk_slab *s = &ss->slabs[i];
        if (s->state == HK_SLOT_EMPTY) {
            hk_slab_list_unlink(&hk_empty[s->last_cls], s);
            return s;
        }
        if (s->state == HK_SLOT_UNUSED) return s;
    }
    return NULL;
}

struct hk_slab *hk_pool_acquire(unsigned c) {
    struct hk_slab *s;
    struct hk_superslab *ss;
    pthread_mutex_lock(&hk_pool_mutex);
    if ((s = hk_empty[c]) != NULL) {
        hk_slab_list_unlink(&hk_empty[c], s);
        HK_STAT_INC(acquire_stage1);
        s = hk_activate(hk_ss_of((uintptr_t)s), s, c);
    } else if ((ss = hk_partial) != NULL) {
        s = hk_free_slot(ss);
        HK_ASSERT(s != NULL);
        HK_STAT_INC(acquire_stage2);
        s = hk_activate(ss, s, c);
    } else {
        if ((ss = hk_cache_head) != NULL) {
            hk_cache_remove(ss);
            ss->cold = 0;
            HK_STAT_INC(acquire_stage3_cache);
        } else if ((ss = hk_ss_map()) != NULL) {
            hk_nss++;
            HK_STAT_INC(acquire_stage3_mmap);
        } else {
            pthread_mutex_unlock(&hk_pool_mutex);
            return NULL;
        }
        hk_ss_push(&hk_partial, ss);
        ss->in_list = HK_SSL_PARTIAL;
        s = hk_activate(ss, hk_free_slot(ss), c);
    }
    pthread_mutex_unlock(&hk_pool_mutex);
    return s;
}

void hk_pool_release(struct hk_slab *s) {
    struct hk_superslab *ss = hk_ss_of((uintptr_t)s);
    HK_ASSERT(s->state == HK_SLOT_ACTIVE && s->used == 0);
    HK_STAT_INC(slab_release);
    pthread_mutex_lock(&hk_pool_mutex);
    s->cls = HK_CLS_NONE;
    s->state = HK_SLOT_EMPTY;
    s->free = NULL;
    s->list = HK_LIST_POOL_EMPTY;
    hk_nactive_slabs--;
    if (ss->nactive-- == HK_SLABS - 1) {
        hk_ss_push(&hk_partial, ss);
        ss->in_list = HK_SSL_PARTIAL;
    }
    if (ss->nactive == 0) {
        /* Whole SuperSlab empty: its EMPTY slots leave the stage-1 lists with it. */
        for (unsigned i = 1; i < HK_SLABS; i++) {
            struct hk_slab *e = &ss->slabs[i];
            if (e != s && e->state == HK_SLOT_EMPTY) hk_slab_list_unlink(&hk_empty[e->last_cls], e);
            e->state = HK_SLOT_UNUSED; /* a cached SuperSlab starts over */
            e->list = HK_LIST_NONE;
        }
        hk_ss_unlink(&hk_partial, ss);
        hk_cache_insert(ss);
    } else {
        hk_slab_list_push(&hk_empty[s->last_cls], s);
    }
    pthread_mutex_unlock(&hk_pool_mutex);
}

size_t hk_pool_trim(void) {
    size_t n = 0;
    pthread_mutex_lock(&hk_pool_mutex);
    while (hk_cache_tail) {
        struct hk_superslab *old = hk_cache_tail;
        hk_cache_remove(old);
        hk_nss--;
        hk_ss_unmap(old);
        n++;
    }
    pthread_mutex_unlock(&hk_pool_mutex);
    return n;
}

void hk_pool_stats(struct hak_stats *out) {
    pthread_mutex_lock(&hk_pool_mutex);
    out->superslabs_now = hk_nss;
    out->superslabs_cached_now = hk_ncache;
    out->slabs_active_now = hk_nactive_slabs;
    out->mapped_bytes_now += hk_nss * HK_SS_SIZE;
    pthread_mutex_unlock(&hk_pool_mutex);
}

void hk_pool_lock_all(void) { pthread_mutex_lock(&hk_pool_mutex); }
void hk_pool_unlock_all(void) { pthread_mutex_unlock(&hk_pool_mutex); }
