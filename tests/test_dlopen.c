/* hakmem loaded at run time (dlopen, as a plugin linked with -lhakmem or Python's ctypes
 * would), not preloaded: its initial-exec thread-locals must fit in the static TLS that glibc
 * keeps spare for such libraries (about 1.6 KiB). With the thread heap in TLS (30 KiB) dlopen
 * failed: "cannot allocate memory in static TLS block". Loaded RTLD_LOCAL, so that the program's
 * malloc stays glibc's; the hak_ names serve this thread and another. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void *(*m)(size_t);
static void (*f)(void *);

static void *work(void *arg) {
    (void)arg;
    int ok = 1;
    for (size_t n = 8; n <= ((size_t)4 << 20); n *= 2) {
        char *p = m(n);
        ok &= p != NULL;
        if (!p) break;
        memset(p, 3, n);
        ok &= p[n - 1] == 3;
        f(p);
    }
    return ok ? (void *)1 : NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("FAIL: dlopen library loaded at run time: %s\n", dlerror());
        return 1;
    }
    m = (void *(*)(size_t))dlsym(lib, "hak_malloc");
    f = (void (*)(void *))dlsym(lib, "hak_free");
    int ok = m && f && work(NULL) != NULL;
    pthread_t t;
    void *r = NULL;
    ok = ok && pthread_create(&t, NULL, work, NULL) == 0 && pthread_join(t, &r) == 0 && r;
    printf("%s: dlopen library loaded at run time serves two threads\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
