#include "report.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "config.h"
#include "text.h"

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
    struct hk_line l = {.n = 0};
    hk_put(&l, "hakmem: ");
    hk_put_n(&l, op, 24);
    hk_put(&l, "(");
    hk_put_hex(&l, (uintptr_t)p);
    hk_put(&l, "): ");
    hk_put_n(&l, problem, 120);
    hk_line_end(&l);
    if (!warn) abort();
}

#ifdef HK_DEBUG
void hk_assert_fail(const char *expr, const char *file, int line) {
    struct hk_line l = {.n = 0};
    hk_put(&l, "hakmem: assertion failed: ");
    hk_put(&l, expr);
    hk_put(&l, " at ");
    hk_put(&l, file);
    hk_put(&l, ":");
    hk_put_uint(&l, (unsigned)line);
    hk_line_end(&l);
    abort();
}
#endif
