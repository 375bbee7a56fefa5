/* stats_workload N: a multi-threaded run whose operation counts are known, for tests/stats.sh.
 * Four threads each allocate N blocks of 200, 1500 and 50000 bytes and 2 large blocks; each
 * hands half of every kind to the main thread, frees a quarter itself, and exits holding the
 * last quarter (so those stay live). The main thread frees what it was handed after the
 * threads have exited and a trim has given their heaps up (frees of slabs it does not own).
 * Per class, the report must then show 4N allocations, 3N frees of which 2N remote, and N
 * live blocks more than a run with N = 0; and 8 large blocks allocated, 4 freed. */
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
static const size_t sizes[] = {200, 1500, 50000};
static int n;
static void **handed[THREADS];
static void *volatile kept[THREADS];

static void *work(void *arg) {
    int t = (int)(long)arg, k = 0;
    void **mine = malloc(sizeof(void *) * (size_t)(3 * n));
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < n; i++) {
            void *p = malloc(sizes[s]);
            memset(p, 1, 16);
            if (i % 2 == 0) handed[t][k++] = p; /* half to the main thread */
            else mine[s * n + i] = p;
        }
    for (int s = 0; s < 3; s++)
        for (int i = 1; i < n; i += 4) free(mine[s * n + i]); /* a quarter freed here */
    handed[t][k++] = malloc(3 << 20);
    kept[t] = malloc(3 << 20); /* stays live */
    free(mine);
    return NULL;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atoi(argv[1]) : 0;
    if (n % 4) return 2;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        handed[i] = malloc(sizeof(void *) * (size_t)(3 * n / 2 + 1));
        pthread_create(&t[i], NULL, work, (void *)(long)i);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    /* The threads handed their heaps over as they exited; no thread takes them, and a trim
     * gives them up: their slabs become orphans, whose lock stripes the frees below take. */
    malloc_trim(0);
    for (int i = 0; i < THREADS; i++) {
        for (int k = 0; k < 3 * n / 2 + 1; k++) free(handed[i][k]);
        free(handed[i]);
    }
    return 0;
}
