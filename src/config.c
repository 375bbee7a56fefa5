/* Run-time configuration: every HAKMEM_* variable is declared once, in hk_vars below (name,
 * kind, default, range, meaning). The README's table is checked against it (tests/config.sh,
 * through HAKMEM_CONFIG=1). Read with getenv and a walk of environ: no allocation, no stdio,
 * safe before the heap exists. */
#include "config.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

extern char **environ;

struct hk_config hk_cfg = {
    .purge_delay_ms = 1000,
    .unmap_delay_ms = 10000,
    .ss_cache = 16,
    .large_cache_mb = 1024,
    .large_arenas = 0,
    .soft_cap = 8,
    .shared_blocks = 4,
    .ace = 1,
    .bg_thread = 0,
    .populate = HK_POPULATE_AUTO,
    .stats = 0,
    .on_error = HK_ON_ERROR_ABORT,
    .show = 0,
    .trace = 0,
    .trace_file = "",
    .stats_file = "",
    .cgroup = "",
};

enum { HK_VAR_UINT, HK_VAR_BOOL, HK_VAR_CHOICE, HK_VAR_FLAGS, HK_VAR_PATH, HK_VAR_LAUNCHER };

struct hk_var {
    const char *name;
    int kind;
    void *dst;           /* unsigned * (UINT, FLAGS), int * (BOOL, CHOICE), char[max] (PATH) */
    unsigned max;        /* UINT: largest value accepted (the smallest is 0); PATH: buffer */
    const char *choices; /* CHOICE: the words, '|' between, their index is the value; FLAGS:
                          * the words, bit i for word i, any list of them with ',' or "all"; PATH: what it names */
    const char *meaning; /* one line, for HAKMEM_CONFIG=1 */
};

#define HK_HOUR_MS (3600u * 1000u)
static const struct hk_var hk_vars[] = {
    {"HAKMEM_PURGE_DELAY_MS", HK_VAR_UINT, &hk_cfg.purge_delay_ms, HK_HOUR_MS, NULL,
     "idle time before free pages are released (ms)"},
    {"HAKMEM_UNMAP_DELAY_MS", HK_VAR_UINT, &hk_cfg.unmap_delay_ms, HK_HOUR_MS, NULL,
     "idle time before free SuperSlabs go to the page heap, its free mappings unmapped (ms)"},
    {"HAKMEM_SS_CACHE", HK_VAR_UINT, &hk_cfg.ss_cache, 1u << 20, NULL,
     "most free SuperSlabs the pool keeps (the rest go back to the page heap)"},
    {"HAKMEM_LARGE_CACHE_MB", HK_VAR_UINT, &hk_cfg.large_cache_mb, 1u << 24, NULL,
     "most free large-tier memory kept resident (MiB)"},
    {"HAKMEM_LARGE_ARENAS", HK_VAR_UINT, &hk_cfg.large_arenas, HK_LARGE_ARENAS_MAX, NULL,
     "large-tier arenas, each under its own lock (0: one per CPU, at most 64; one on 2 CPUs or fewer)"},
    {"HAKMEM_SOFT_CAP", HK_VAR_UINT, &hk_cfg.soft_cap, 1024, NULL,
     "most empty 64 KiB slabs a thread keeps per class"},
    {"HAKMEM_SHARED_BLOCKS", HK_VAR_UINT, &hk_cfg.shared_blocks, 64, NULL,
     "a thread's first blocks of each small class that come from a slab all threads share"},
    {"HAKMEM_ACE", HK_VAR_BOOL, &hk_cfg.ace, 1, NULL, "adapt caps, caches and delays to demand"},
    {"HAKMEM_BG_THREAD", HK_VAR_BOOL, &hk_cfg.bg_thread, 1, NULL,
     "a background thread releases idle memory on time"},
    {"HAKMEM_POPULATE", HK_VAR_CHOICE, &hk_cfg.populate, 2, "auto|off|on",
     "fill a big block's untouched pages at its malloc (auto: while the program fills its blocks)"},
    {"HAKMEM_CGROUP", HK_VAR_PATH, hk_cfg.cgroup, sizeof hk_cfg.cgroup, "a directory",
     "cgroup v2 directory ACE watches (empty: the process's own)"},
    {"HAKMEM_STATS", HK_VAR_CHOICE, &hk_cfg.stats, 2, "0|1|json",
     "print the report at exit (1: text, json: one JSON object)"},
    {"HAKMEM_STATS_FILE", HK_VAR_PATH, hk_cfg.stats_file, sizeof hk_cfg.stats_file, "a file",
     "write the report to this file (%p: the pid; empty: stderr)"},
    {"HAKMEM_ON_ERROR", HK_VAR_CHOICE, &hk_cfg.on_error, 1, "abort|warn",
     "what a detected misuse does after its report"},
    {"HAKMEM_CONFIG", HK_VAR_BOOL, &hk_cfg.show, 1, NULL,
     "print the configuration at start-up"},
    {"HAKMEM_TRACE", HK_VAR_FLAGS, &hk_cfg.trace, 0, "pool|os|large|ace|thread|fail",
     "trace these categories (a list with ',', or all)"},
    {"HAKMEM_TRACE_FILE", HK_VAR_PATH, hk_cfg.trace_file, sizeof hk_cfg.trace_file, "a file",
     "trace to this file (%p: the pid; empty: stderr)"},
    {"HAKMEM_LIB", HK_VAR_LAUNCHER, NULL, 0, NULL, "the library bin/hakmem preloads"},
};
#define HK_NVARS (sizeof hk_vars / sizeof hk_vars[0])

/* The value of v as text: its default before parsing, its effective value after. */
static void hk_put_value(struct hk_line *l, const struct hk_var *v) {
    switch (v->kind) {
    case HK_VAR_UINT: hk_put_uint(l, *(const unsigned *)v->dst); break;
    case HK_VAR_BOOL: hk_put_uint(l, (unsigned)*(const int *)v->dst); break;
    case HK_VAR_CHOICE: {
        int k = *(const int *)v->dst;
        const char *c = v->choices;
        for (; k > 0 && *c; c++)
            if (*c == '|') k--;
        while (*c && *c != '|' && l->n + 2 < sizeof l->buf) l->buf[l->n++] = *c++;
        break;
    }
    case HK_VAR_FLAGS: {
        unsigned bits = *(const unsigned *)v->dst, k = 0;
        int first = 1;
        for (const char *c = v->choices; *c; k++) {
            const char *end = strchr(c, '|');
            size_t len = end ? (size_t)(end - c) : strlen(c);
            if (bits & (1u << k)) {
                if (!first) hk_put(l, ",");
                hk_put_n(l, c, len);
                first = 0;
            }
            c += len + (end != NULL);
        }
        break;
    }
    case HK_VAR_PATH: hk_put(l, (const char *)v->dst); break;
    default: hk_put(l, "(bin/hakmem only)"); break;
    }
}

/* "hakmem: HAKMEM_X=value is WHY; using the default D" */
static void hk_warn_value(const struct hk_var *v, const char *value, const char *why) {
    struct hk_line l = {.n = 0};
    hk_put(&l, "hakmem: ");
    hk_put(&l, v->name);
    hk_put(&l, "=");
    hk_put(&l, value);
    hk_put(&l, " is ");
    hk_put(&l, why);
    hk_put(&l, "; using the default ");
    hk_put_value(&l, v);
    hk_line_end(&l);
}

/* --- parsing ------------------------------------------------------------------------------ */

static int hk_parse_uint(const char *s, unsigned max, unsigned *out, int *range) {
    unsigned long v = 0;
    *range = 0;
    if (!*s) return 0;
    int over = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return 0; /* "12x" is no number, whatever max is */
        if (!over) v = v * 10 + (unsigned long)(*s - '0');
        over |= v > max;
    }
    *range = over;
    if (over) return 0;
    *out = (unsigned)v;
    return 1;
}

/* Index of word s among choices ("a|b|c"), or -1. */
static int hk_parse_choice(const char *s, const char *choices) {
    int k = 0;
    size_t n = strlen(s);
    for (const char *c = choices;; k++) {
        const char *end = strchr(c, '|');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        if (len == n && !strncmp(c, s, n)) return k;
        if (!end) return -1;
        c = end + 1;
    }
}

static void hk_parse(const struct hk_var *v, const char *s) {
    struct hk_line l = {.n = 0}; /* why the value is refused */
    switch (v->kind) {
    case HK_VAR_UINT:
    case HK_VAR_BOOL: {
        unsigned x;
        int range;
        if (hk_parse_uint(s, v->max, &x, &range)) {
            if (v->kind == HK_VAR_UINT) *(unsigned *)v->dst = x;
            else *(int *)v->dst = (int)x;
            return;
        }
        hk_put(&l, range ? "out of range (0 to " : "not a number from 0 to ");
        hk_put_uint(&l, v->max);
        if (range) hk_put(&l, ")");
        break;
    }
    case HK_VAR_CHOICE: {
        int k = hk_parse_choice(s, v->choices);
        if (k >= 0) {
            *(int *)v->dst = k;
            return;
        }
        hk_put(&l, "not one of ");
        hk_put(&l, v->choices);
        break;
    }
    case HK_VAR_FLAGS: {
        unsigned bits = 0;
        int ok = 1;
        if (!strcmp(s, "all")) {
            bits = ~0u;
        } else {
            for (const char *w = s; ok;) {
                const char *end = strchr(w, ',');
                size_t len = end ? (size_t)(end - w) : strlen(w);
                char word[32];
                ok = len > 0 && len < sizeof word;
                if (ok) {
                    memcpy(word, w, len);
                    word[len] = 0;
                    int k = hk_parse_choice(word, v->choices);
                    ok = k >= 0;
                    if (ok) bits |= 1u << k;
                }
                if (!end) break;
                w = end + 1;
            }
        }
        if (ok) {
            int nwords = 1;
            for (const char *c = v->choices; *c; c++) nwords += *c == '|';
            *(unsigned *)v->dst = bits & ((1u << nwords) - 1);
            return;
        }
        hk_put(&l, "not a list of ");
        hk_put(&l, v->choices);
        hk_put(&l, " or all");
        break;
    }
    case HK_VAR_PATH:
        if (strlen(s) < v->max) {
            strcpy((char *)v->dst, s);
            return;
        }
        hk_put(&l, "longer than ");
        hk_put_uint(&l, v->max - 1);
        hk_put(&l, " bytes");
        break;
    default: return;
    }
    l.buf[l.n] = 0;
    hk_warn_value(v, s, l.buf);
}

/* Warns of HAKMEM_ names in the environment that no row declares (a typo keeps a default). */
static void hk_check_unknown(void) {
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "HAKMEM_", 7) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        int known = 0;
        for (size_t i = 0; i < HK_NVARS && !known; i++)
            known = strlen(hk_vars[i].name) == len && !strncmp(hk_vars[i].name, *e, len);
        if (known) continue;
        struct hk_line l = {.n = 0};
        hk_put(&l, "hakmem: unknown variable ");
        hk_put_n(&l, *e, len);
        hk_put(&l, " (ignored; HAKMEM_CONFIG=1 lists the known ones)");
        hk_line_end(&l);
    }
}

/* The values v accepts, as the README's table gives them. */
static void hk_put_range(struct hk_line *l, const struct hk_var *v) {
    switch (v->kind) {
    case HK_VAR_UINT:
        hk_put(l, "0..");
        hk_put_uint(l, v->max);
        break;
    case HK_VAR_BOOL: hk_put(l, "0|1"); break;
    case HK_VAR_CHOICE: hk_put(l, v->choices); break;
    case HK_VAR_FLAGS:
        hk_put(l, v->choices);
        hk_put(l, "|all");
        break;
    case HK_VAR_PATH: hk_put(l, v->choices); break;
    default: hk_put(l, "a file"); break;
    }
}

/* HAKMEM_CONFIG=1: "hakmem config: NAME=VALUE (default D; values R): meaning", one a line. */
static void hk_config_show(const unsigned *defaults) {
    for (size_t i = 0; i < HK_NVARS; i++) {
        const struct hk_var *v = &hk_vars[i];
        struct hk_line l = {.n = 0};
        hk_put(&l, "hakmem config: ");
        hk_put(&l, v->name);
        hk_put(&l, "=");
        hk_put_value(&l, v);
        hk_put(&l, " (default ");
        if (v->kind == HK_VAR_FLAGS) {
            hk_put(&l, "none");
        } else if (v->kind == HK_VAR_CHOICE) {
            int now = *(int *)v->dst;
            *(int *)v->dst = (int)defaults[i];
            hk_put_value(&l, v);
            *(int *)v->dst = now;
        } else if (v->kind == HK_VAR_PATH) {
            hk_put(&l, "\"\"");
        } else if (v->kind == HK_VAR_LAUNCHER) {
            hk_put(&l, "build/libhakmem.so");
        } else {
            hk_put_uint(&l, defaults[i]);
        }
        hk_put(&l, "; values ");
        hk_put_range(&l, v);
        hk_put(&l, "): ");
        hk_put(&l, v->meaning);
        hk_line_end(&l);
    }
}

static _Atomic int hk_cfg_state; /* 0 not read, 1 being read, 2 read */

void hk_config_load(void) {
    int st = atomic_load_explicit(&hk_cfg_state, memory_order_acquire);
    if (HK_LIKELY(st == 2)) return;
    st = 0;
    if (!atomic_compare_exchange_strong(&hk_cfg_state, &st, 1)) {
        while (atomic_load_explicit(&hk_cfg_state, memory_order_acquire) != 2) sched_yield();
        return;
    }
    unsigned defaults[HK_NVARS];
    for (size_t i = 0; i < HK_NVARS; i++) {
        const struct hk_var *v = &hk_vars[i];
        defaults[i] = v->kind == HK_VAR_UINT || v->kind == HK_VAR_FLAGS ? *(unsigned *)v->dst
                      : v->kind == HK_VAR_BOOL || v->kind == HK_VAR_CHOICE
                          ? (unsigned)*(int *)v->dst
                          : 0;
        /* An empty value is no value: the default holds, without a word. */
        const char *s = getenv(v->name);
        if (s && *s && v->kind != HK_VAR_LAUNCHER) hk_parse(v, s);
    }
    hk_check_unknown();
    /* Pages are released before mappings: an unmap delay shorter than the purge delay would
     * leave nothing to release. */
    if (hk_cfg.unmap_delay_ms < hk_cfg.purge_delay_ms) hk_cfg.unmap_delay_ms = hk_cfg.purge_delay_ms;
    if (hk_cfg.show) hk_config_show(defaults);
    atomic_store_explicit(&hk_cfg_state, 2, memory_order_release);
}
