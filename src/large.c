#include "large.h"

#include <errno.h>
#include <pthread.h>

#include "../include/hakmem.h"
#include "os.h"

struct hk_large {
    uintptr_t ptr;  /* user pointer; 0 = empty slot */
    uintptr_t base; /* start of the mapping */
    size_t len;     /* length of the mapping */
};

static pthread_mutex_t hk_large_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct hk_large *hk_tab;
static size_t hk_tab_cap; /* a power of two, or 0 */
static size_t hk_tab_n, hk_tab_bytes;

static inline size_t hk_hash(uintptr_t p, size_t cap) {
    return (size_t)(((p >> 12) * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static struct hk_large *hk_tab_find(uintptr_t p) {
    if (!hk_tab_cap) return NULL;
    for (size_t i = hk_hash(p, hk_tab_cap);; i = (i + 1) & (hk_tab_cap - 1)) {
        if (hk_tab[i].ptr == p) return &hk_tab[i];
        if (hk_tab[i].ptr == 0) return NULL;
    }
}

static void hk_tab_put(struct hk_large *t, size_t cap, struct hk_large e) {
    size_t i = hk_hash(e.ptr, cap);
    while (t[i].ptr) i = (i + 1) & (cap - 1);
    t[i] = e;
}

/* Keeps the load factor at most 1/2. */
static int hk_tab_reserve(void) {
    if ((hk_tab_n + 1) * 2 <= hk_tab_cap) return 1;
    size_t cap = hk_tab_cap ? hk_tab_cap * 2 : 256;
    struct hk_large *t = hk_os_map(cap * sizeof *t);
    if (!t) return 0;
    for (size_t i = 0; i < hk_tab_cap; i++)
        if (hk_tab[i].ptr) hk_tab_put(t, cap, hk_tab[i]);
    if (hk_tab) hk_os_unmap(hk_tab, hk_tab_cap * sizeof *hk_tab);
    hk_tab = t;
    hk_tab_cap = cap;
    return 1;
}

/* Removes entry e, shifting later entries of its probe run back (no tombstones). */
static void hk_tab_remove(struct hk_large *e) {
    size_t i = (size_t)(e - hk_tab), mask = hk_tab_cap - 1;
    for (size_t j = (i + 1) & mask; hk_tab[j].ptr; j = (j + 1) & mask) {
        size_t home = hk_hash(hk_tab[j].ptr, hk_tab_cap);
        /* Entry j may move to i if its home is not cyclically within (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            hk_tab[i] = hk_tab[j];
            i = j;
        }
    }
    hk_tab[i].ptr = 0;
}

void *hk_large_alloc(size_t n, size_t align) {
    if (align < HK_PAGE_SIZE) align = HK_PAGE_SIZE;
    if (n == 0) n = 1; /* memalign(big, 0) still gets a distinct, non-empty block */
    size_t len = hk_align_up(n, HK_PAGE_SIZE);
    if (len < n || len + (align - HK_PAGE_SIZE) < len) {
        errno = ENOMEM;
        return NULL;
    }
    len += align - HK_PAGE_SIZE; /* slack to place the block on its alignment */
    char *base = hk_os_map(len);
    if (!base) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t p = hk_align_up((uintptr_t)base, align);
    pthread_mutex_lock(&hk_large_mutex);
    if (!hk_tab_reserve()) {
        pthread_mutex_unlock(&hk_large_mutex);
        hk_os_unmap(base, len);
        errno = ENOMEM;
        return NULL;
    }
    hk_tab_put(hk_tab, hk_tab_cap, (struct hk_large){p, (uintptr_t)base, len});
    hk_tab_n++;
    hk_tab_bytes += len;
    pthread_mutex_unlock(&hk_large_mutex);
    return (void *)p;
}

int hk_large_free(void *p) {
    pthread_mutex_lock(&hk_large_mutex);
    struct hk_large *e = hk_tab_find((uintptr_t)p);
    if (!e) {
        pthread_mutex_unlock(&hk_large_mutex);
        return 0;
    }
    struct hk_large copy = *e;
    hk_tab_remove(e);
    hk_tab_n--;
    hk_tab_bytes -= copy.len;
    pthread_mutex_unlock(&hk_large_mutex);
    hk_os_unmap((void *)copy.base, copy.len);
    return 1;
}

size_t hk_large_usable(const void *p) {
    pthread_mutex_lock(&hk_large_mutex);
    struct hk_large *e = hk_tab_find((uintptr_t)p);
    size_t n = e ? e->base + e->len - e->ptr : 0;
    pthread_mutex_unlock(&hk_large_mutex);
    return n;
}

void *hk_large_realloc(void *p, size_t n) {
    size_t len = hk_align_up(n, HK_PAGE_SIZE);
    if (len < n) return NULL;
    pthread_mutex_lock(&hk_large_mutex);
    struct hk_large *e = hk_tab_find((uintptr_t)p);
    if (!e || e->ptr != e->base) {
        /* Over-aligned blocks keep their alignment by the caller's copy path. */
        pthread_mutex_unlock(&hk_large_mutex);
        return NULL;
    }
    if (len == e->len) {
        pthread_mutex_unlock(&hk_large_mutex);
        return p;
    }
    /* The mapping is remapped under the lock so no other thread can look it up half-moved. */
    void *q = hk_os_remap((void *)e->base, e->len, len);
    if (!q) {
        pthread_mutex_unlock(&hk_large_mutex);
        return NULL;
    }
    hk_tab_bytes = hk_tab_bytes - e->len + len;
    hk_tab_remove(e);
    hk_tab_put(hk_tab, hk_tab_cap, (struct hk_large){(uintptr_t)q, (uintptr_t)q, len});
    pthread_mutex_unlock(&hk_large_mutex);
    return q;
}

void hk_large_stats(struct hak_stats *out) {
    pthread_mutex_lock(&hk_large_mutex);
    out->large_now = hk_tab_n;
    out->large_bytes_now = hk_tab_bytes;
    out->mapped_bytes_now += hk_tab_bytes;
    pthread_mutex_unlock(&hk_large_mutex);
}

void hk_large_lock_all(void) { pthread_mutex_lock(&hk_large_mutex); }
void hk_large_unlock_all(void) { pthread_mutex_unlock(&hk_large_mutex); }
