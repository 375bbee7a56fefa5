#include "report.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

void hk_write_err(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

void hk_report(const char *op, const void *p, const char *problem) {
    char line[160];
    char hex[2 + 16 + 1];
    uintptr_t a = (uintptr_t)p;
    int i = 0;
    hex[i++] = '0';
    hex[i++] = 'x';
    int started = 0;
    for (int sh = 60; sh >= 0; sh -= 4) {
        unsigned d = (unsigned)(a >> sh) & 15;
        if (d || started || sh == 0) {
            hex[i++] = "0123456789abcdef"[d];
            started = 1;
        }
    }
    hex[i] = 0;
    line[0] = 0;
    strcat(line, "hakmem: ");
    strncat(line, op, 24);
    strcat(line, "(");
    strcat(line, hex);
    strcat(line, "): ");
    strncat(line, problem, 80);
    strcat(line, "\n");
    hk_write_err(line);
    if (hk_cfg.abort_on_misuse) abort();
}

#ifdef HK_DEBUG
void hk_assert_fail(const char *expr, const char *file, int line) {
    char num[16];
    int n = 0;
    char tmp[16];
    do tmp[n++] = (char)('0' + line % 10); while ((line /= 10) && n < 15);
    for (int i = 0; i < n; i++) num[i] = tmp[n - 1 - i];
    num[n] = 0;
    hk_write_err("hakmem: assertion failed: ");
    hk_write_err(expr);
    hk_write_err(" at ");
    hk_write_err(file);
    hk_write_err(":");
    hk_write_err(num);
    hk_write_err("\n");
    abort();
}
#endif
