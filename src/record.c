#define _GNU_SOURCE /* syscall */
#include "record.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lock.h"
#include "os.h"
#include "owned.h"

static struct hk_slab *hk_oslab_none[1];

const struct hk_heap hk_heap_none = {
    .otab = (struct hk_owned *)&hk_owned_none,
    .oslab = hk_oslab_none,
};

static struct hk_lock hk_records_lock = HK_LOCK_INIT;
/* Records given back, linked by next_record: those a thread wrote past the first page of
 * (rest_written), and those it did not. A thread takes the first kind first: their pages are
 * resident already, and the threads that write there are those that own slabs, which come
 * first where threads start in rounds. crowd's first 32 threads of each round took records
 * the threads before them had written one page of, and each round 32 more records kept three
 * pages resident. */
static struct hk_heap *hk_records, *hk_records_clean;
/* New records are mapped HK_RECORDS_MAPPED at a time, each on a page of its own, and handed
 * out in turn: a thread that found none to take mapped one of its own, and where threads
 * start in bursts (crowd: 300 at a time, 3 rounds) 466 of 900 did. Each mapping takes the
 * write side of the kernel's lock on the process's mappings, which page faults and other
 * threads' stacks wait on, and leaves one more mapping in its list. Under the records'
 * lock: the rest of the last mapping. */
#define HK_RECORDS_MAPPED 16
static char *hk_records_next, *hk_records_end;

/* Records whose threads were torn down: the thread goes on using its record for what its
 * later destructors free (and allocate: a heap set up again is torn down again at the hook's
 * next round), so it is used again only once the thread is gone (hk_record_reap). */
static struct hk_heap *hk_records_parting;

void hk_record_parting(struct hk_heap *h) {
    if (h->parting) return; /* torn down again: listed already */
    h->parting = 1;
    h->tid = (int)syscall(SYS_gettid);
    hk_lock(&hk_records_lock);
    h->next_record = hk_records_parting;
    hk_records_parting = h;
    hk_unlock(&hk_records_lock);
}

/* Pushes the records of list l (linked by next_record) onto *to; under the records' lock. */
static void hk_records_push(struct hk_heap **to, struct hk_heap *l) {
    while (l) {
        struct hk_heap *h = l;
        l = h->next_record;
        h->next_record = *to;
        *to = h;
    }
}

/* Sorts the records of parting threads in l, which the caller took off hk_records_parting:
 * those of threads that are gone, whose heap is not set up (it was not set up again after the
 * last round), become free ones, one of them returned to the caller (NULL if none); those of
 * threads still alive go back to wait. A thread's id that another thread of the process took
 * since counts as alive: its record waits. One set up again and gone is dropped: its heap's
 * record stays as it is, published to its owner record, as a thread's static TLS would have
 * stayed with its owner in the same case. The kernel is asked about each thread (tgkill)
 * without the lock: under it, the first thread of a burst to find no free record asked about
 * every thread of the burst before, and the rest of the burst waited for it (crowd ... 0, 300
 * threads a round: 206 of 2,182 futex calls were waits for the lock there, 2 now). A fork
 * meanwhile leaves the records being sorted to the parent alone: its child lacks them. */
static struct hk_heap *hk_record_reap(struct hk_heap *l) {
    pid_t pid = getpid();
    struct hk_heap *alive = NULL, *dirty = NULL, *clean = NULL;
    while (l) {
        struct hk_heap *h = l;
        l = h->next_record;
        struct hk_heap **to;
        if (syscall(SYS_tgkill, pid, h->tid, 0) == 0 || errno != ESRCH) to = &alive;
        else if (h->owner == NULL) to = h->rest_written ? &dirty : &clean;
        else continue; /* set up again and gone: dropped */
        h->next_record = *to;
        *to = h;
    }
    struct hk_heap **from = dirty ? &dirty : &clean, *mine = *from;
    if (mine) *from = mine->next_record;
    if (alive || dirty || clean) {
        hk_lock(&hk_records_lock);
        hk_records_push(&hk_records_parting, alive);
        hk_records_push(&hk_records, dirty);
        hk_records_push(&hk_records_clean, clean);
        hk_unlock(&hk_records_lock);
    }
    return mine;
}

/* fork holds the records' lock across, so that a child finds the lists whole (a thread of
 * the parent that took it is not in the child). Registered by the first record taken; the
 * lock is a leaf (taken with no other held), so it goes first. */
static void hk_records_prefork(void) { hk_lock(&hk_records_lock); }
static void hk_records_postfork(void) { hk_unlock(&hk_records_lock); }
static atomic_int hk_records_forkable;

/* The part of a record that holds anything but zero in hk_heap_none, and that every thread
 * writes (heap.h): its first page. */
#define HK_RECORD_HOT offsetof(struct hk_heap, cur)
_Static_assert(HK_RECORD_HOT == HK_PAGE_SIZE, "a record's first part is its first page");

#ifdef HK_DEBUG
/* Whether the fields past the first page of record h are all zero: those of a record whose
 * threads never noted writing them (every write there must be noted). */
static int hk_rest_is_zero(const struct hk_heap *h) {
    const unsigned char *p = (const unsigned char *)h + HK_RECORD_HOT;
    for (size_t i = 0; i < sizeof *h - HK_RECORD_HOT; i++)
        if (p[i]) return 0;
    return 1;
}
#endif

/* A record never used (zero), or NULL if the OS refuses the memory. */
static struct hk_heap *hk_record_new(void) {
    const size_t size = (sizeof(struct hk_heap) + HK_PAGE_SIZE - 1) & ~(HK_PAGE_SIZE - 1);
    hk_lock(&hk_records_lock);
    if (hk_records_next == hk_records_end) {
        size_t n = HK_RECORDS_MAPPED;
        char *m = hk_os_map(size * n);
        if (!m) m = hk_os_map(size * (n = 1));
        if (m) hk_records_next = m, hk_records_end = m + size * n;
    }
    struct hk_heap *h = NULL;
    if (hk_records_next != hk_records_end) {
        h = (struct hk_heap *)(void *)hk_records_next;
        hk_records_next += size;
    }
    hk_unlock(&hk_records_lock);
    return h;
}

struct hk_heap *hk_record_take(void) {
    int e = errno; /* the reaping's tgkill may set it */
    hk_lock(&hk_records_lock);
    struct hk_heap **from = hk_records ? &hk_records : &hk_records_clean;
    struct hk_heap *h = *from, *parting = NULL;
    if (h) {
        *from = h->next_record;
    } else {
        parting = hk_records_parting; /* sorted without the lock (hk_record_reap) */
        hk_records_parting = NULL;
    }
    hk_unlock(&hk_records_lock);
    if (parting) h = hk_record_reap(parting);
    errno = e;
    /* The rest of a record is zero in the template, and a new mapping is zero: it is not
     * written, so that a thread that owns no slab makes one page of its record resident, not
     * three (crowd: 1,000 threads each holding 8 blocks of 16 B..4 KiB). */
    if (h) {
        struct hk_owned *spare = h->ospare; /* the table a thread before grew stays */
        size_t spare_n = h->ospare_n;
        struct hk_side *side = h->side; /* so do its side lists' storage */
        int rest = h->rest_written;
        memcpy(h, &hk_heap_none, HK_RECORD_HOT);
        if (rest) memset((char *)h + HK_RECORD_HOT, 0, sizeof *h - HK_RECORD_HOT);
        else HK_ASSERT(hk_rest_is_zero(h));
        h->rest_written = (uint8_t)rest; /* resident still: cleared again, and taken first */
        h->ospare = spare;
        h->ospare_n = spare_n;
        h->side = side;
    } else {
        if ((h = hk_record_new()) == NULL) return NULL;
        memcpy(h, &hk_heap_none, HK_RECORD_HOT);
    }
    return h;
}

void hk_record_forkable(void) {
    if (HK_UNLIKELY(!atomic_load_explicit(&hk_records_forkable, memory_order_relaxed)) &&
        !atomic_exchange(&hk_records_forkable, 1))
        pthread_atfork(hk_records_prefork, hk_records_postfork, hk_records_postfork);
}
