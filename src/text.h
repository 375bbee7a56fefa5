/* Lines of text for stderr, built and written without allocation or stdio: usable before the
 * heap exists and from inside malloc. A leaf: config, report and snapshot write through it. */
#ifndef HK_TEXT_H
#define HK_TEXT_H

#include <stddef.h>
#include <unistd.h>

#include "common.h"

struct hk_line {
    char buf[512];
    size_t n;
};

/* Appends the first n bytes of s (up to its end); what does not fit is cut. */
static inline void hk_put_n(struct hk_line *l, const char *s, size_t n) {
    for (; n && *s && l->n + 2 < sizeof l->buf; n--) l->buf[l->n++] = *s++;
}
static inline void hk_put(struct hk_line *l, const char *s) { hk_put_n(l, s, (size_t)-1); }

static inline void hk_put_uint(struct hk_line *l, unsigned long long v) {
    char tmp[24];
    int n = 0;
    do tmp[n++] = (char)('0' + v % 10); while ((v /= 10) && n < 23);
    while (n && l->n + 2 < sizeof l->buf) l->buf[l->n++] = tmp[--n];
}

static inline void hk_put_hex(struct hk_line *l, unsigned long long v) {
    hk_put(l, "0x");
    int started = 0;
    for (int sh = 60; sh >= 0; sh -= 4) {
        unsigned d = (unsigned)(v >> sh) & 15;
        if ((d || started || sh == 0) && l->n + 2 < sizeof l->buf) {
            l->buf[l->n++] = "0123456789abcdef"[d];
            started = 1;
        }
    }
}

/* Writes s to stderr with write(2), retrying short writes. */
static inline void hk_write_err(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Copies path to dst (size bytes), with each "%p" replaced by the process id. */
static inline void hk_path_with_pid(char *dst, size_t size, const char *path) {
    struct hk_line l = {.n = 0};
    for (const char *s = path; *s; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            hk_put_uint(&l, (unsigned long long)getpid());
            s++;
        } else {
            hk_put_n(&l, s, 1);
        }
    }
    size_t n = l.n < size - 1 ? l.n : size - 1;
    for (size_t i = 0; i < n; i++) dst[i] = l.buf[i];
    dst[n] = 0;
}

/* Ends the line with a newline and writes it. */
static inline void hk_line_end(struct hk_line *l) {
    l->buf[l->n++] = '\n';
    l->buf[l->n] = 0;
    hk_write_err(l->buf);
}

#endif
