#define _GNU_SOURCE
#include "trace.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "text.h"

unsigned hk_trace_mask;
static int hk_trace_fd = 2;
static struct timespec hk_trace_t0;

void hk_trace_init(void) {
    clock_gettime(CLOCK_MONOTONIC, &hk_trace_t0);
    if (hk_cfg.trace_file[0]) {
        /* "%p" becomes the pid, so that the processes of one run keep apart. */
        char path[sizeof hk_cfg.trace_file + 16];
        hk_path_with_pid(path, sizeof path, hk_cfg.trace_file);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) hk_trace_fd = fd;
    }
    hk_trace_mask = hk_cfg.trace;
}

static void hk_put_field(struct hk_line *l, const char *name, unsigned long long v) {
    size_t n = 0;
    while (name[n]) n++;
    hk_put(l, " ");
    if (n && name[n - 1] == '@') {
        hk_put_n(l, name, n - 1);
        hk_put(l, " ");
        hk_put_hex(l, v);
    } else {
        hk_put(l, name);
        hk_put(l, " ");
        hk_put_uint(l, v);
    }
}

void hk_trace(unsigned cat, const char *what, const char *n1, unsigned long long v1,
              const char *n2, unsigned long long v2, const char *n3, unsigned long long v3) {
    static const char *const names[] = {"pool", "os", "large", "ace", "thread", "fail"};
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    long long us = (long long)(t.tv_sec - hk_trace_t0.tv_sec) * 1000000 +
                   (t.tv_nsec - hk_trace_t0.tv_nsec) / 1000;
    struct hk_line l = {.n = 0};
    hk_put(&l, "hakmem trace ");
    hk_put_uint(&l, (unsigned long long)(us / 1000000));
    hk_put(&l, ".");
    char frac[7];
    long long f = us % 1000000;
    for (int i = 5; i >= 0; i--, f /= 10) frac[i] = (char)('0' + f % 10);
    frac[6] = 0;
    hk_put(&l, frac);
    hk_put(&l, " ");
    hk_put(&l, names[__builtin_ctz(cat)]);
    hk_put(&l, ": ");
    hk_put(&l, what);
    if (n1) hk_put_field(&l, n1, v1);
    if (n2) hk_put_field(&l, n2, v2);
    if (n3) hk_put_field(&l, n3, v3);
    l.buf[l.n++] = '\n';
    for (size_t off = 0; off < l.n;) {
        ssize_t w = write(hk_trace_fd, l.buf + off, l.n - off);
        if (w <= 0) return;
        off += (size_t)w;
    }
}
