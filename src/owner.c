#include "owner.h"

#include <pthread.h>

#include "os.h"

#define HK_OWNER_CHUNK ((size_t)64 * 1024)

static pthread_mutex_t hk_owner_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct hk_owner *hk_owner_free_list;
static struct hk_owner *hk_owner_bump, *hk_owner_end;

struct hk_owner *hk_owner_new(void) {
    struct hk_owner *o;
    pthread_mutex_lock(&hk_owner_mutex);
    if ((o = hk_owner_free_list) != NULL) {
        hk_owner_free_list = o->next_free;
    } else {
        if (hk_owner_bump == hk_owner_end) {
            struct hk_owner *chunk = hk_os_map(HK_OWNER_CHUNK);
            if (!chunk) {
                pthread_mutex_unlock(&hk_owner_mutex);
                return NULL;
            }
            hk_owner_bump = chunk;
            hk_owner_end = chunk + HK_OWNER_CHUNK / sizeof *chunk;
        }
        o = hk_owner_bump++;
    }
    pthread_mutex_unlock(&hk_owner_mutex);
    o->next_free = NULL;
    /* Reopen: a late pusher holding a stale pointer to this record may now succeed; the new
     * owner finds its block belongs to a slab it does not own and passes it on. */
    atomic_store_explicit(&o->inbox, NULL, memory_order_release);
    return o;
}

void hk_owner_retire(struct hk_owner *o) {
    pthread_mutex_lock(&hk_owner_mutex);
    o->next_free = hk_owner_free_list;
    hk_owner_free_list = o;
    pthread_mutex_unlock(&hk_owner_mutex);
}

void hk_owner_lock_all(void) { pthread_mutex_lock(&hk_owner_mutex); }
void hk_owner_unlock_all(void) { pthread_mutex_unlock(&hk_owner_mutex); }
