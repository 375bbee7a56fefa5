/*
 * bench/common.h - helpers shared by the hakmem benchmark programs.
 *
 * Every program is a single C11 translation unit that includes this header
 * (cache_thrash and cache_scratch are the same one, false_sharing.c, built
 * twice).
 * The allocator under test is chosen at run time with LD_PRELOAD, so nothing
 * here depends on a particular malloc implementation.
 *
 * Output convention (see docs/BENCHMARKS.md):
 *   - optional lines starting with '#' describe the parameters;
 *   - the LAST line of stdout is the result line:
 *       bench=<name> <primary>=<value> [<key>=<value> ...]
 *     where <primary> is either ops_per_sec (higher is better) or seconds
 *     (lower is better).  peak_rss_kb is always present.
 */
#ifndef HAKMEM_BENCH_COMMON_H
#define HAKMEM_BENCH_COMMON_H

#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* usage / argument parsing                                            */
/* ------------------------------------------------------------------ */

/* Set by bench_init(): the program name (used in messages and in the
 * output lines) and the usage text after it. */
static const char *bench_name;
static const char *bench_usage;

/* Print "<lead><bench_name><sep>", fmt with ap, and a newline on out. */
__attribute__((format(printf, 4, 0)))
static void vput_line(FILE *out, const char *lead, const char *sep,
                      const char *fmt, va_list ap)
{
    fprintf(out, "%s%s%s", lead, bench_name, sep);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
}

static void usage_exit(int code, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

static void usage_exit(int code, const char *fmt, ...)
{
    FILE *out = code == 0 ? stdout : stderr;
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vput_line(out, "", ": ", fmt, ap);
        va_end(ap);
    }
    fprintf(out, "usage: %s %s\n", bench_name, bench_usage);
    exit(code);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vput_line(stderr, "", ": fatal: ", fmt, ap);
    va_end(ap);
    exit(1);
}

/* First thing in every main(): name the program, give its usage text, handle
 * -h/--help and reject more than max_args positional arguments. */
static void bench_init(int argc, char **argv, const char *name, const char *usage,
                       int max_args)
{
    bench_name = name;
    bench_usage = usage;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            usage_exit(0, NULL);
    }
    if (argc - 1 > max_args)
        usage_exit(2, "too many arguments (%d, at most %d)", argc - 1, max_args);
}

/* Positional unsigned argument idx (1-based) or default when absent. */
__attribute__((unused))
static uint64_t arg_u64(int argc, char **argv, int idx, const char *what,
                        uint64_t def, uint64_t lo, uint64_t hi)
{
    if (idx >= argc)
        return def;
    const char *s = argv[idx];
    char *end = NULL;
    if (*s == '\0' || *s == '-' || *s == '+')
        usage_exit(2, "%s: not a non-negative integer: '%s'", what, s);
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* accept k/m/g suffixes for convenience (powers of 1000) */
    if (errno == 0 && end != s) {
        unsigned long long mul = 1;
        if (*end == 'k' || *end == 'K') mul = 1000ULL, end++;
        else if (*end == 'm' || *end == 'M') mul = 1000000ULL, end++;
        else if (*end == 'g' || *end == 'G') mul = 1000000000ULL, end++;
        if (mul > 1 && v > ULLONG_MAX / mul)
            errno = ERANGE;
        else
            v *= mul;
    }
    if (errno != 0 || end == s || *end != '\0')
        usage_exit(2, "%s: not a non-negative integer: '%s'", what, s);
    if (v < lo || v > hi)
        usage_exit(2, "%s: %llu out of range [%" PRIu64 ", %" PRIu64 "]",
                   what, v, lo, hi);
    return (uint64_t)v;
}

__attribute__((unused))
static double arg_double(int argc, char **argv, int idx, const char *what,
                         double def, double lo, double hi)
{
    if (idx >= argc)
        return def;
    const char *s = argv[idx];
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
        usage_exit(2, "%s: not a number: '%s'", what, s);
    if (v < lo || v > hi)
        usage_exit(2, "%s: %g out of range [%g, %g]", what, v, lo, hi);
    return v;
}

/* The THREADS argument of the threaded programs: 1..4096, default 2. */
__attribute__((unused))
static uint64_t arg_threads(int argc, char **argv, int idx)
{
    return arg_u64(argc, argv, idx, "THREADS", 2, 1, 4096);
}

/* Usage error unless max >= min (named as in the usage text). */
__attribute__((unused))
static void check_min_max(const char *min_name, uint64_t min,
                          const char *max_name, uint64_t max)
{
    if (max < min)
        usage_exit(2, "%s (%" PRIu64 ") must be >= %s (%" PRIu64 ")",
                   max_name, max, min_name, min);
}

/* ------------------------------------------------------------------ */
/* allocation helpers                                                  */
/* ------------------------------------------------------------------ */

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (__builtin_expect(p == NULL, 0))
        die("malloc(%zu) returned NULL", n);
    return p;
}

static inline void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n, sz);
    if (p == NULL)
        die("calloc(%zu, %zu) returned NULL", n, sz);
    return p;
}

/* Prevent the compiler from reasoning about / eliding an allocation. */
static inline void escape(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* Write a few bytes of a fresh block of n bytes: one byte every stride bytes
 * from the start, and the last byte.  Values are non-zero so that a
 * malloc+write sequence can never be turned into calloc by the compiler. */
static inline void touch_every(void *p, size_t n, size_t stride, unsigned char v)
{
    unsigned char *c = p;
    v |= 1;
    for (size_t i = 0; i < n; i += stride)
        c[i] = v;
    c[n - 1] = v;
}

/* One byte per 64-byte line plus the last byte. */
static inline void touch_lines(void *p, size_t n, unsigned char v)
{
    touch_every(p, n, 64, v);
}

/* One byte per 4 KiB page plus the last byte: enough to fault pages in. */
static inline void touch_pages(void *p, size_t n, unsigned char v)
{
    touch_every(p, n, 4096, v);
}

/* ------------------------------------------------------------------ */
/* random numbers: splitmix64 seeding + xorshift64*                    */
/* ------------------------------------------------------------------ */

typedef struct { uint64_t s; } rng_t;

static inline uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed * 0x100000001B3ULL + stream;
    r->s = splitmix64(&x);
    if (r->s == 0)
        r->s = 0x2545F4914F6CDD1DULL;
}

static inline uint64_t rng_next(rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, n) (n > 0); multiply-shift, negligible bias. */
static inline uint64_t rng_below(rng_t *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline uint64_t rng_range(rng_t *r, uint64_t lo, uint64_t hi)
{
    return lo + rng_below(r, hi - lo + 1);
}

/* Log-uniform in [lo, hi] (lo >= 1): every power of two equally likely. */
static inline uint64_t rng_log_range(rng_t *r, uint64_t lo, uint64_t hi)
{
    double u = (double)(rng_next(r) >> 11) * 0x1.0p-53;
    double v = exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    uint64_t s = (uint64_t)v;
    if (s < lo) s = lo;
    if (s > hi) s = hi;
    return s;
}

/* Allocates blocks of lo..hi bytes (log-uniform), writing one byte per page, until they hold
 * at least target bytes, into *blk (*cap entries, doubled by realloc as needed). Returns how
 * many. */
static inline size_t fill_blocks(rng_t *r, void ***blk, size_t *cap, uint64_t target,
                                 uint64_t lo, uint64_t hi)
{
    size_t n = 0;
    for (uint64_t total = 0; total < target;) {
        size_t sz = (size_t)rng_log_range(r, lo, hi);
        if (n == *cap) {
            void **nb = realloc(*blk, 2 * *cap * sizeof **blk);
            if (nb == NULL)
                die("realloc(%zu) returned NULL", 2 * *cap * sizeof **blk);
            *blk = nb;
            *cap *= 2;
        }
        void *p = xmalloc(sz);
        touch_pages(p, sz, (unsigned char)n);
        (*blk)[n++] = p;
        total += sz;
    }
    return n;
}

/* Shuffles a[0..n) (Fisher-Yates), deterministically for a given generator state. */
static inline void shuffle_ptrs(rng_t *r, void **a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(r, i);
        void *tmp = a[i - 1];
        a[i - 1] = a[j];
        a[j] = tmp;
    }
}

/* ------------------------------------------------------------------ */
/* time and memory                                                     */
/* ------------------------------------------------------------------ */

static inline double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void sleep_ms(uint64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Current resident set size in KiB from /proc/self/statm (no stdio, so no
 * allocation happens while measuring). */
static inline long current_rss_kb(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = buf;
    strtol(p, &p, 10);            /* size */
    long resident = strtol(p, &p, 10);
    long page_kb = sysconf(_SC_PAGESIZE) / 1024;
    return resident * page_kb;
}

/* Peak resident set size of the process in KiB: getrusage's ru_maxrss, or
 * the current RSS when that is larger (the kernel's high-water mark is
 * updated lazily, so it can lag behind /proc/self/statm a little). */
static inline long peak_rss_kb(void)
{
    struct rusage ru;
    long peak = -1;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        peak = ru.ru_maxrss;
    long cur = current_rss_kb();
    return cur > peak ? cur : peak;
}

/* ------------------------------------------------------------------ */
/* output lines (see the top of this file)                             */
/* ------------------------------------------------------------------ */

/* The parameter line "# <name> <fmt...>", flushed at once. */
__attribute__((unused, format(printf, 1, 2)))
static void print_params(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vput_line(stdout, "# ", " ", fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* print_result(NO_OPS, ...): seconds is the primary figure. */
#define NO_OPS (-1.0)

/* Minor page faults of the whole process so far (getrusage): a page fault
 * is the price of memory the allocator gave back and takes again, or never
 * kept. */
static inline long minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
}

/* The result line, the last line of stdout:
 *   bench=<name> ops_per_sec=<ops/secs> seconds=<secs><fmt...> minflt=<n> peak_rss_kb=<kb>
 * or, when ops is NO_OPS,
 *   bench=<name> seconds=<secs><fmt...> minflt=<n> peak_rss_kb=<kb>
 * fmt (NULL for nothing) adds " key=value" pairs.  The peak RSS and the
 * fault count are taken before anything is printed. */
__attribute__((unused, format(printf, 3, 4)))
static void print_result(double ops, double secs, const char *fmt, ...)
{
    long rss = peak_rss_kb();
    long flt = minor_faults();
    printf("bench=%s ", bench_name);
    if (ops >= 0)
        printf("ops_per_sec=%.4e ", ops / secs);
    printf("seconds=%.4f", secs);
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
    }
    printf(" minflt=%ld peak_rss_kb=%ld\n", flt, rss);
}

/* ------------------------------------------------------------------ */
/* threads                                                             */
/* ------------------------------------------------------------------ */

static inline void xpthread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(t, NULL, fn, arg);
    if (rc != 0)
        die("pthread_create: %s", strerror(rc));
}

static inline void xpthread_join(pthread_t t)
{
    int rc = pthread_join(t, NULL);
    if (rc != 0)
        die("pthread_join: %s", strerror(rc));
}

/* Join the n threads tid[0..n-1], in order. */
static inline void xpthread_join_all(const pthread_t *tid, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        xpthread_join(tid[i]);
}

/* A thread's share of a run of steps split between threads. */
struct split_worker {
    uint64_t index;
    uint64_t steps;
};

/* Runs fn on n threads, each given its split_worker: steps split as evenly as they go.
 * Returns the seconds from the first thread's start to the last one's end. */
static inline double run_split(uint64_t n, uint64_t steps, void *(*fn)(void *))
{
    struct split_worker *w = xcalloc((size_t)n, sizeof *w);
    pthread_t *tid = xcalloc((size_t)n, sizeof *tid);
    for (uint64_t i = 0; i < n; i++) {
        w[i].index = i;
        w[i].steps = steps / n + (i < steps % n ? 1 : 0);
    }
    double t0 = now_sec();
    for (uint64_t i = 0; i < n; i++)
        xpthread_create(&tid[i], fn, &w[i]);
    xpthread_join_all(tid, n);
    double t1 = now_sec();
    free(w);
    free(tid);
    return t1 - t0;
}

#endif /* HAKMEM_BENCH_COMMON_H */
