#include "report.h"

#include <stdatomic.h>
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

/* HAKMEM_ON_ERROR=warn reports each address once: addresses reported so far, in an open
 * hash table (no allocation; when it is full, reports are no longer deduplicated). */
#define HK_SEEN 1024
#define HK_SEEN_PROBES 16
static _Atomic uintptr_t hk_seen[HK_SEEN];

/* Whether p was reported before; records it if not. */
static int hk_seen_before(uintptr_t a) {
    uintptr_t key = a ? a : 1;
    size_t h = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 54);
    for (unsigned i = 0; i < HK_SEEN_PROBES; i++) {
        _Atomic uintptr_t *slot = &hk_seen[(h + i) & (HK_SEEN - 1)];
        uintptr_t v = atomic_load_explicit(slot, memory_order_relaxed);
        if (v == key) return 1;
        if (v == 0) {
            if (atomic_compare_exchange_strong(slot, &v, key)) return 0;
            if (v == key) return 1;
        }
    }
    return 0;
}

void hk_report(const char *op, const void *p, const char *problem) {
    /* The first call into hakmem may be a bad free: the configuration is read here too. */
    hk_config_load();
    int warn = hk_cfg.on_error == HK_ON_ERROR_WARN;
    if (warn && hk_seen_before((uintptr_t)p)) return;
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
    if (!warn) abort();
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
