#include "transfer.h"

#include <stdatomic.h>

#include "block.h"
#include "lock.h"
#include "report.h"
#include "size_class.h"
#include "superslab.h"

#define HK_NXFER (HK_NCLASS - HK_XFER_FIRST)

static struct hk_lock hk_xfer_locks[HK_LOCK_STRIPES] = HK_LOCK_STRIPES_INIT;

static struct {
    void *head;
    size_t bytes;
    _Atomic uint32_t n;     /* blocks on the list: read without the lock, so that a refill of
                             * a class with an empty list takes no lock */
    /* Events a look compares: blocks taken by refills, and times the list stopped being
     * empty, so far; changed under the stripe, read without it. */
    _Atomic uint64_t takes, fills;
    /* hk_xfer_take_idle's (under hk_xfer_check): the events at its last look, and since when
     * the list has held blocks that no refill took from. */
    uint64_t seen, since;
} __attribute__((aligned(64))) hk_xfer[HK_NXFER]; /* a line each: every refill of a class reads
                                                   * its count, and its puts and takes write it */

/* Whether n, the link of a block on class c's list, is one too: NULL, or a carved block start
 * of a span of class c that carries the free mark. A program that writes to a block after freeing
 * it can overwrite the link; a list is walked only on slow paths, so the whole check is cheap
 * there. */
static int hk_xfer_link_ok(const void *n, unsigned c) {
    if (!n) return 1;
    uintptr_t a = (uintptr_t)n;
    if ((a & 15) || !hk_is_superslab(a)) return 0;
    const struct hk_slab *s = hk_slab_of(a);
    if (__atomic_load_n(&s->cls, __ATOMIC_RELAXED) != c || hk_slab_block_index(s, a) < 0)
        return 0;
#ifdef HK_HARDENED
    return 1; /* no free marks there (its lists are used by the tests only) */
#else
    return hk_marked_free(n);
#endif
}

/* Under the stripe: the link of b, the block about to leave class c's list, or NULL (and the
 * rest of the list dropped, its blocks lost) where it was overwritten. */
static void *hk_xfer_next(void *b, unsigned c) {
    void *n = hk_link_get(b);
    if (HK_LIKELY(hk_xfer_link_ok(n, c))) return n;
    hk_report("malloc", b, "corrupted free list (a freed block was written to)");
    return NULL;
}

/* One thread at a time looks for idle lists; another that finds it busy skips its look. */
static pthread_mutex_t hk_xfer_check = PTHREAD_MUTEX_INITIALIZER;
/* When the last look began. Every thread's tick calls for one, and a look reads and writes
 * every list's line, which other threads' puts and takes write too: 16 threads each looked
 * every 10 ms, and every new thread at its first refill (about 1,000 instructions). */
static _Atomic uint64_t hk_xfer_looked;

static struct hk_lock *hk_xfer_lock(unsigned c) { return &hk_xfer_locks[c % HK_LOCK_STRIPES]; }

int hk_xfer_any(unsigned c) {
    return atomic_load_explicit(&hk_xfer[c - HK_XFER_FIRST].n, memory_order_relaxed) != 0;
}

int hk_xfer_put(unsigned c, void *head, void *tail, uint32_t n) {
    unsigned i = c - HK_XFER_FIRST;
    HK_ASSERT(c >= HK_XFER_FIRST && c < HK_NCLASS);
    size_t size = hk_class_size[c], cap = c < HK_NSMALL ? HK_XFER_SMALL_BYTES : HK_XFER_BYTES;
    size_t max = cap > 2 * size ? cap : 2 * size;
    hk_lock(hk_xfer_lock(c));
    int ok = hk_xfer[i].bytes + n * size <= max;
    if (ok) {
        uint32_t was = atomic_load_explicit(&hk_xfer[i].n, memory_order_relaxed);
        if (was == 0)
            atomic_store_explicit(&hk_xfer[i].fills,
                                  atomic_load_explicit(&hk_xfer[i].fills, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
        hk_link_set(tail, hk_xfer[i].head);
        hk_xfer[i].head = head;
        hk_xfer[i].bytes += n * size;
        atomic_store_explicit(&hk_xfer[i].n, was + n, memory_order_relaxed);
    }
    hk_unlock(hk_xfer_lock(c));
    return ok;
}

void *hk_xfer_take(unsigned c, uint32_t max) {
    unsigned i = c - HK_XFER_FIRST;
    HK_ASSERT(c >= HK_XFER_FIRST && c < HK_NCLASS && max > 0);
    /* A stale count only means this refill looks elsewhere first. */
    if (!hk_xfer_any(c)) return NULL;
    hk_lock(hk_xfer_lock(c));
    void *b = hk_xfer[i].head, *last = b, *rest = NULL;
    uint32_t k = 0;
    if (b) {
        /* The first max blocks, each link checked before it is followed. */
        for (k = 1;; k++) {
            rest = hk_xfer_next(last, c);
            if (!rest || k == max) break;
            last = rest;
        }
        hk_link_set(last, NULL);
        hk_xfer[i].head = rest;
        uint32_t n = atomic_load_explicit(&hk_xfer[i].n, memory_order_relaxed);
        hk_xfer[i].bytes = rest ? hk_xfer[i].bytes - k * (size_t)hk_class_size[c] : 0;
        atomic_store_explicit(&hk_xfer[i].n, rest && n > k ? n - k : 0, memory_order_relaxed);
        atomic_store_explicit(&hk_xfer[i].takes,
                              atomic_load_explicit(&hk_xfer[i].takes, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    }
    hk_unlock(hk_xfer_lock(c));
    return b;
}

/* Under the stripe of class c: empties its list and returns it. */
static void *hk_xfer_detach(unsigned i) {
    void *b = hk_xfer[i].head;
    hk_xfer[i].head = NULL;
    hk_xfer[i].bytes = 0;
    atomic_store_explicit(&hk_xfer[i].n, 0, memory_order_relaxed);
    return b;
}

void *hk_xfer_take_idle(uint64_t now, int all) {
    void *out = NULL;
    if (all) {
        pthread_mutex_lock(&hk_xfer_check);
    } else {
        if (now - atomic_load_explicit(&hk_xfer_looked, memory_order_relaxed) < HK_XFER_LOOK_MS ||
            pthread_mutex_trylock(&hk_xfer_check) != 0)
            return NULL;
        atomic_store_explicit(&hk_xfer_looked, now, memory_order_relaxed);
    }
    for (unsigned i = 0; i < HK_NXFER; i++) {
        unsigned c = HK_XFER_FIRST + i;
        /* Both counts in one number: a change of either is all a look needs to see. */
        uint64_t events = atomic_load_explicit(&hk_xfer[i].takes, memory_order_relaxed) +
                          (atomic_load_explicit(&hk_xfer[i].fills, memory_order_relaxed) << 32);
        void *b = NULL;
        if (atomic_load_explicit(&hk_xfer[i].n, memory_order_relaxed) == 0 ||
            events != hk_xfer[i].seen) {
            /* Empty, filled or taken from since the last look: idle from now on at the
             * earliest. */
            hk_xfer[i].seen = events;
            hk_xfer[i].since = now;
            if (!all) continue;
        } else if (!all && now - hk_xfer[i].since < HK_XFER_IDLE_MS) {
            continue;
        }
        hk_lock(hk_xfer_lock(c));
        b = hk_xfer_detach(i);
        hk_unlock(hk_xfer_lock(c));
        /* Appended to what earlier classes gave: a list holds a few MiB of big blocks. */
        while (b) {
            void *next = hk_xfer_next(b, c);
            hk_block_push(&out, b);
            b = next;
        }
    }
    pthread_mutex_unlock(&hk_xfer_check);
    return out;
}

void hk_xfer_locks_add(size_t *taken, size_t *waited) {
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) hk_lock_add(&hk_xfer_locks[i], taken, waited);
}

void hk_xfer_lock_all(void) {
    pthread_mutex_lock(&hk_xfer_check);
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) pthread_mutex_lock(&hk_xfer_locks[i].m);
}

void hk_xfer_unlock_all(void) {
    for (unsigned i = 0; i < HK_LOCK_STRIPES; i++) pthread_mutex_unlock(&hk_xfer_locks[i].m);
    pthread_mutex_unlock(&hk_xfer_check);
}
