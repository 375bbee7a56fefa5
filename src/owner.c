#include "owner.h"

#include <pthread.h>

#include "lock.h"
#include "os.h"

#define HK_OWNER_CHUNK ((size_t)64 * 1024)
_Static_assert(sizeof(struct hk_owner) == 3 * 64, "an owner record is three cache lines");

static pthread_mutex_t hk_owner_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct hk_owner *hk_owner_free_list;
static struct hk_owner *hk_owner_bump, *hk_owner_end;
static struct hk_owner_cold *hk_owner_cold_bump; /* the cold parts of the chunk's records */
static struct hk_owner *_Atomic hk_owner_all; /* every record, newest first */
static struct hk_tally hk_owner_exited; /* the counts of threads that have exited */
static _Atomic uint64_t hk_owner_exited_pushes;

struct hk_owner *hk_owner_new(void) {
    struct hk_owner *o;
    hk_mutex_take(&hk_owner_mutex);
    if ((o = hk_owner_free_list) != NULL) {
        hk_owner_free_list = o->next_free;
    } else {
        if (hk_owner_bump == hk_owner_end) {
            const size_t n = HK_OWNER_CHUNK / sizeof *o;
            struct hk_owner *chunk = hk_os_map(HK_OWNER_CHUNK);
            struct hk_owner_cold *cold = chunk ? hk_os_map(n * sizeof *cold) : NULL;
            if (!cold) {
                if (chunk) hk_os_unmap(chunk, HK_OWNER_CHUNK);
                pthread_mutex_unlock(&hk_owner_mutex);
                return NULL;
            }
            hk_owner_bump = chunk;
            hk_owner_end = chunk + n;
            hk_owner_cold_bump = cold;
        }
        o = hk_owner_bump++;
        o->cold = hk_owner_cold_bump++;
        o->next_all = atomic_load_explicit(&hk_owner_all, memory_order_relaxed);
        atomic_store_explicit(&hk_owner_all, o, memory_order_release);
    }
    pthread_mutex_unlock(&hk_owner_mutex);
    o->next_free = NULL;
    /* Reopen: a late pusher holding a stale pointer to this record may now succeed; the new
     * owner finds its block belongs to a slab it does not own and passes it on. */
    for (unsigned i = 0; i < HK_LANES; i++)
        atomic_store_explicit(&o->inbox[i], NULL, memory_order_release);
    return o;
}

/* Adds a count into another and zeroes it. A count of 0 (every class's, unless HAKMEM_STATS
 * counts them) writes nothing: the process-wide counts are one set of lines that every
 * retiring record would otherwise write, 195 counts of two read-modify-writes each. */
static void hk_move(_Atomic uint64_t *to, _Atomic uint64_t *from) {
    if (atomic_load_explicit(from, memory_order_relaxed) == 0) return;
    atomic_fetch_add_explicit(to, atomic_exchange_explicit(from, 0, memory_order_relaxed),
                              memory_order_relaxed);
}

void hk_owner_retire(struct hk_owner *o) {
    hk_mutex_take(&hk_owner_mutex);
    /* The operation counts are written only while counting: otherwise their lines (in the
     * cold part, most often never touched) are not even read. */
    if (hk_counting) {
        struct hk_tally *t = &o->cold->tally, *x = &hk_owner_exited;
        for (unsigned c = 0; c < HK_NCLASS; c++) {
            hk_move(&x->allocs[c], &t->allocs[c]);
            hk_move(&x->frees[c], &t->frees[c]);
            hk_move(&x->remote_frees[c], &t->remote_frees[c]);
        }
        hk_move(&x->large_allocs, &t->large_allocs);
        hk_move(&x->large_frees, &t->large_frees);
    }
    hk_move(&hk_owner_exited_pushes, &o->remote_pushes);
    o->next_free = hk_owner_free_list;
    hk_owner_free_list = o;
    pthread_mutex_unlock(&hk_owner_mutex);
}

/* Parked records, newest first, doubly linked (next_parked, prev_parked) under the records'
 * mutex: a thread's start and a tick take the oldest, a free's successor or a flooded record
 * a given one, each in constant time however many threads just exited. A start took the
 * newest before: where threads start and exit all the time, the oldest records then waited
 * out HK_PARK_MS and were given up, their slabs orphaned, while newer ones were taken
 * (larson 16 1 8 1000 5000 1000 42 on 2 cores: 85 records given up and 9,895 slabs
 * abandoned in a second, and 18 and 2,295 taking the oldest). */
static struct hk_owner *hk_owner_parked_head, *hk_owner_parked_tail;
static _Atomic unsigned hk_owner_nparked;

void hk_owner_park(struct hk_owner *o, uint64_t now) {
    o->parked_at = now;
    atomic_store_explicit(&o->parked_pushes, 0, memory_order_relaxed);
    atomic_store_explicit(&o->parked_kib, 0, memory_order_relaxed);
    atomic_store_explicit(&o->parked_by, 0, memory_order_relaxed);
    hk_mutex_take(&hk_owner_mutex);
    o->prev_parked = NULL;
    o->next_parked = hk_owner_parked_head;
    if (hk_owner_parked_head) hk_owner_parked_head->prev_parked = o;
    else hk_owner_parked_tail = o;
    hk_owner_parked_head = o;
    atomic_store_explicit(&o->parked, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&hk_owner_nparked, 1, memory_order_relaxed);
    pthread_mutex_unlock(&hk_owner_mutex);
}

/* Under the mutex: takes parked record o off the list. */
static void hk_owner_unlink_parked(struct hk_owner *o) {
    if (o->prev_parked) o->prev_parked->next_parked = o->next_parked;
    else hk_owner_parked_head = o->next_parked;
    if (o->next_parked) o->next_parked->prev_parked = o->prev_parked;
    else hk_owner_parked_tail = o->prev_parked;
    o->next_parked = o->prev_parked = NULL;
    atomic_store_explicit(&o->parked, 0, memory_order_relaxed);
    atomic_fetch_sub_explicit(&hk_owner_nparked, 1, memory_order_relaxed);
}

struct hk_owner *hk_owner_unpark(uint64_t older) {
    if (!hk_owner_parked()) return NULL;
    hk_mutex_take(&hk_owner_mutex);
    struct hk_owner *o = hk_owner_parked_tail;
    if (o && older != 0 && o->parked_at >= older) o = NULL; /* not old enough */
    if (o) hk_owner_unlink_parked(o);
    pthread_mutex_unlock(&hk_owner_mutex);
    return o;
}

int hk_owner_unpark_this(struct hk_owner *o) {
    /* The flag changes under the mutex only: a record that reads as not parked here is not,
     * or is being parked or taken this instant, and either way is not this caller's. */
    if (!atomic_load_explicit(&o->parked, memory_order_relaxed)) return 0;
    hk_mutex_take(&hk_owner_mutex);
    int found = atomic_load_explicit(&o->parked, memory_order_relaxed);
    if (found) hk_owner_unlink_parked(o);
    pthread_mutex_unlock(&hk_owner_mutex);
    return found;
}

unsigned hk_owner_parked(void) {
    return atomic_load_explicit(&hk_owner_nparked, memory_order_relaxed);
}

struct hk_owner *hk_owner_first(void) {
    return atomic_load_explicit(&hk_owner_all, memory_order_acquire);
}

/* Adds one tally into a sum. */
static void hk_tally_add(struct hk_tally_sum *sum, struct hk_tally *t) {
#define HK_ADD(x, y) x += atomic_load_explicit(&y, memory_order_relaxed)
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        HK_ADD(sum->allocs[c], t->allocs[c]);
        HK_ADD(sum->frees[c], t->frees[c]);
        HK_ADD(sum->remote_frees[c], t->remote_frees[c]);
        HK_ADD(sum->retained[c], t->retained[c]);
    }
    HK_ADD(sum->large_allocs, t->large_allocs);
    HK_ADD(sum->large_frees, t->large_frees);
#undef HK_ADD
}

void hk_owner_tally(struct hk_tally_sum *sum) {
    *sum = (struct hk_tally_sum){0};
    hk_mutex_take(&hk_owner_mutex);
    hk_tally_add(sum, &hk_owner_exited);
    sum->remote_pushes = atomic_load_explicit(&hk_owner_exited_pushes, memory_order_relaxed);
    for (struct hk_owner *o = hk_owner_first(); o; o = o->next_all) {
        /* The cold part only where it was written: a report made while a thousand threads
         * wait would else make all their cold parts resident. */
        if (hk_counting || atomic_load_explicit(&o->kept, memory_order_relaxed))
            hk_tally_add(sum, &o->cold->tally);
        sum->remote_pushes += atomic_load_explicit(&o->remote_pushes, memory_order_relaxed);
    }
    pthread_mutex_unlock(&hk_owner_mutex);
}

int hk_owner_trylock(void) { return pthread_mutex_trylock(&hk_owner_mutex) == 0; }
void hk_owner_unlock(void) { pthread_mutex_unlock(&hk_owner_mutex); }
void hk_owner_lock_all(void) { pthread_mutex_lock(&hk_owner_mutex); }
void hk_owner_unlock_all(void) { pthread_mutex_unlock(&hk_owner_mutex); }
