/* Start-up with every pthread key already taken (run under LD_PRELOAD): hakmem cannot install
 * its thread-exit hook, and must still serve every thread. Before the fix, the first malloc
 * left start-up half done and every later thread spun forever. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < 10000; i++) {
        char *p = malloc(16 + (size_t)(i % 3000));
        if (!p) return (void *)1;
        memset(p, 1, 16);
        free(p);
    }
    return NULL;
}

int main(void) {
    pthread_key_t k;
    int keys = 0;
    while (pthread_key_create(&k, NULL) == 0) keys++; /* before any malloc */
    pthread_t t[4];
    int ok = keys > 0;
    for (int i = 0; i < 4; i++) ok &= pthread_create(&t[i], NULL, work, NULL) == 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ok &= r == NULL;
    }
    printf("%s: no_keys threads allocate with every pthread key taken (%d keys)\n",
           ok ? "PASS" : "FAIL", keys);
    return ok ? 0 : 1;
}
