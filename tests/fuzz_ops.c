/* libFuzzer harness: operation sequences on hakmem's hak_* API, checked against a shadow model.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined together with the sources in src/ and
 * -DHK_NO_OVERRIDE, so that libFuzzer and the sanitizers keep glibc's malloc and only the
 * hak_* calls below reach hakmem (`make fuzz` builds it and runs tests/fuzz.sh).
 *
 * The model: 64 slots, each empty or holding a live block with its requested size, its usable
 * size, the alignment it was asked for and a fill byte. Every block holds pattern(fill, i) at
 * byte i: all of it up to 64 KiB, above that the first 4 KiB, 16 bytes at each end of every
 * 4 KiB page and the last 16 bytes (every page is touched, so a page lost by a purge or a
 * mremap shows). Checked on every allocation: non-NULL, alignment, hak_usable_size >= size
 * (and not far above it where README.md promises so), hak_owns, no overlap with any other live
 * block; on free and realloc: the contents (up to the smaller size after a realloc).
 *
 * Input format: a sequence of operations, each an opcode byte (low 4 bits; the high ones are
 * ignored) followed by its argument bytes; an operation cut short by the end of the input is
 * dropped. SLOT is one byte (low 6 bits: the slot; bit 7 of FREE_SIZED: use
 * hak_free_aligned_sized). ALIGN is one byte: 2^(3 + (b & 31) % 19), 8 bytes .. 2 MiB; for
 * MEMALIGN, bit 7 asks for 1.5 times that, which hakmem must round up to a power of two; for
 * ALIGNED_ALLOC, bit 7 calls hak_valloc instead, or with bit 6 too hak_pvalloc.
 * SIZE is four bytes T V0 V1 V2, V = V0 | V1 << 8 | V2 << 16, by T & 7:
 *   0: V % 257 (0 .. 256)             1: V % 32769 (0 .. 32 KiB, the small tier)
 *   2: 32 KiB + V % (1 MiB - 32 KiB + 1) (the mid tier)    3: 1 MiB + V % (4 MiB + 1) (large)
 *   4..7: an edge size from a table (indexed by V0) plus (V1 & 63) - 32, at least 0.
 * SPLIT is one byte k: the size n is passed as nmemb = 2^(k & 7) elements of n >> (k & 7).
 *   0 MALLOC SLOT SIZE          1 CALLOC SLOT SPLIT SIZE (the block must read as zeros)
 *   2 POSIX_MEMALIGN SLOT ALIGN SIZE    3 ALIGNED_ALLOC SLOT ALIGN SIZE
 *   4 MEMALIGN SLOT ALIGN SIZE  5 REALLOC SLOT SIZE     6 REALLOCARRAY SLOT SPLIT SIZE
 *   7 FREE SLOT                 8 FREE_SIZED SLOT       9 USABLE SLOT (also writes the slack
 *                                                         between the size and the usable size)
 *  10 CHECK SLOT (contents)    11 FILL SLOT BYTE (rewrite the block with a new fill byte)
 *  12 SWITCH: the following operations run on the other thread (main or the worker)
 *  13 RETIRE: the worker thread exits (its slabs with live blocks become orphans); the next
 *     SWITCH starts a new one      14 TRIM: hak_trim
 *  15 BAD KIND: a request that must fail (sizes above PTRDIFF_MAX, overflowing products, bad
 *     alignments), leaving every block as it was
 * Allocating into a live slot frees its block first. An allocation or growth that would take
 * the model's live bytes above 64 MiB is skipped. At the end of each input every live block is
 * checked and freed, and hakmem must then report no live large block.
 *
 * The worker thread persists across inputs; each operation is handed over and waited for, so a
 * run stays deterministic. tests/fuzz_seeds.py writes the seed corpus, one example per file.
 * FUZZ_OPS_TRACE=1 build/fuzz/fuzz_ops FILE prints the operations of FILE as they run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"

#define NSLOTS 64
#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define BUDGET (64 * MIB)      /* most live bytes the model allows */
#define DENSE_MAX (64 * KIB)   /* blocks up to this size are written and checked in full */
#define PAGE ((size_t)4096)
#define EDGE 16                /* bytes kept at each end of a page of a big block */

enum {
    OP_MALLOC, OP_CALLOC, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC, OP_MEMALIGN, OP_REALLOC,
    OP_REALLOCARRAY, OP_FREE, OP_FREE_SIZED, OP_USABLE, OP_CHECK, OP_FILL, OP_SWITCH,
    OP_RETIRE, OP_TRIM, OP_BAD, NOPS
};
static const char *const op_names[NOPS] = {
    "malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "realloc",
    "reallocarray", "free", "free_sized", "usable_size", "check", "fill", "switch", "retire",
    "trim", "bad",
};

struct op {
    unsigned code, slot, arg; /* arg: the ALIGN, SPLIT, BYTE or KIND byte */
    int flag;                 /* bit 7 of the SLOT or ALIGN byte */
    size_t size;
};

struct slot {
    unsigned char *p; /* NULL: empty */
    size_t size, usable, align; /* align: 0 unless an aligned call made the block */
    uint8_t fill;
};

static struct slot slots[NSLOTS];
static size_t live_bytes;
static unsigned serial; /* allocations in this input: gives each block its own fill byte */

/* What is running, for the failure report. */
static unsigned cur_index;
static const struct op *cur_op;

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "fuzz_ops: operation %u (%s", cur_index,
            cur_op ? op_names[cur_op->code] : "end of input");
    if (cur_op) fprintf(stderr, ", slot %u, size %zu", cur_op->slot, cur_op->size);
    fprintf(stderr, "): ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

/* --- block contents --------------------------------------------------------------------- */

/* Position-dependent, so that a copy from the wrong offset or the wrong block shows. */
static inline uint8_t pattern(uint8_t fill, size_t i) {
    return (uint8_t)(fill + i * 7 + (i >> 12) * 13);
}

enum { WRITE, VERIFY, ZEROS };

/* Writes or checks bytes [lo, hi) of p; returns the first wrong index, or SIZE_MAX. */
static size_t span(unsigned char *p, size_t lo, size_t hi, uint8_t fill, int mode) {
    for (size_t i = lo; i < hi; i++) {
        if (mode == WRITE) {
            p[i] = pattern(fill, i);
        } else {
            uint8_t want = mode == ZEROS ? 0 : pattern(fill, i);
            if (p[i] != want) return i;
        }
    }
    return SIZE_MAX;
}

/* The bytes of [0, n) the model keeps: all of them when the block was written dense, else the
 * first page and the first and last EDGE bytes of every 4 KiB page after it. These positions
 * do not depend on n, so a block shrunk by realloc keeps a subset of them. tail adds the last
 * EDGE bytes of n, written with the block but not kept by a shrink. */
static size_t visit(unsigned char *p, size_t n, int dense, int tail, uint8_t fill, int mode) {
    size_t bad;
    if (dense) return span(p, 0, n, fill, mode);
    if ((bad = span(p, 0, n < PAGE ? n : PAGE, fill, mode)) != SIZE_MAX) return bad;
    for (size_t base = PAGE; base < n; base += PAGE) {
        if ((bad = span(p, base, base + EDGE < n ? base + EDGE : n, fill, mode)) != SIZE_MAX)
            return bad;
        size_t hi = base + PAGE < n ? base + PAGE : n;
        if (base + PAGE - EDGE < hi &&
            (bad = span(p, base + PAGE - EDGE, hi, fill, mode)) != SIZE_MAX)
            return bad;
    }
    if (tail && n > PAGE) return span(p, n - EDGE, n, fill, mode);
    return SIZE_MAX;
}

static void write_block(struct slot *s) {
    visit(s->p, s->size, s->size <= DENSE_MAX, 1, s->fill, WRITE);
}

/* Checks the first n bytes of slot s (n <= its size) as written. */
static void verify_block(const struct slot *s, size_t n, const char *when) {
    size_t bad = visit(s->p, n, s->size <= DENSE_MAX, n == s->size, s->fill, VERIFY);
    if (bad != SIZE_MAX)
        fail("%s: block %p (size %zu, fill 0x%02x) byte %zu is 0x%02x, expected 0x%02x", when,
             (void *)s->p, s->size, s->fill, bad, s->p[bad], pattern(s->fill, bad));
}

/* --- model checks ------------------------------------------------------------------------ */

static size_t page_up(size_t n) { return (n + PAGE - 1) & ~(PAGE - 1); }

static size_t pow2_up(size_t a) {
    size_t r = 1;
    while (r < a) r <<= 1;
    return r;
}

enum { FRESH, CLEARED, MOVED }; /* what adopt does with the contents */

/* A new block p of n bytes for slot i, asked with alignment align (0: none). Checks it against
 * the model and every other live block and records it with a new fill byte. A FRESH block gets
 * its pattern; a CLEARED one (calloc) must read as zeros first; a MOVED one (realloc) is left
 * to the caller. */
static void adopt(unsigned i, void *p, size_t n, size_t align, int how) {
    if (!p) fail("returned NULL for %zu bytes (alignment %zu)", n, align);
    uintptr_t a = (uintptr_t)p;
    size_t want = align ? align : n >= 16 ? 16 : 1;
    if (a & (want - 1)) fail("%p is not %zu-byte aligned", p, want);
    if (!hak_owns(p)) fail("hak_owns(%p) is 0 for a live block", p);
    size_t u = hak_usable_size(p);
    if (u < n) fail("usable size %zu of %p is below the %zu bytes asked", u, p, n);
    size_t ua = u ? u : 1;
    for (unsigned j = 0; j < NSLOTS; j++) {
        const struct slot *o = &slots[j];
        if (j == i || !o->p) continue;
        uintptr_t b = (uintptr_t)o->p;
        if (a < b + (o->usable ? o->usable : 1) && b < a + ua)
            fail("%p (usable %zu) overlaps slot %u's %p (usable %zu)", p, u, j, (void *)o->p,
                 o->usable);
    }
    struct slot *s = &slots[i];
    s->p = p;
    s->size = n;
    s->usable = u;
    s->align = align;
    s->fill = (uint8_t)(1 + serial++ % 255); /* never 0: fresh memory must not pass for it */
    live_bytes += n;
    if (how == MOVED) return;
    if (how == CLEARED) {
        size_t bad = visit(s->p, n, n <= DENSE_MAX, 1, 0, ZEROS);
        if (bad != SIZE_MAX)
            fail("calloc block %p of %zu bytes has 0x%02x at byte %zu", p, n, s->p[bad], bad);
    }
    write_block(s);
}

/* Checks slot i's block, frees it with hak_free (or the sized calls) and empties the slot. */
static void release(unsigned i, int sized, int aligned) {
    struct slot *s = &slots[i];
    verify_block(s, s->size, "before free");
    if (!hak_owns(s->p)) fail("hak_owns(%p) is 0 for a live block", (void *)s->p);
    if (aligned && s->align)
        hak_free_aligned_sized(s->p, s->align, s->size);
    else if (sized && !s->align)
        hak_free_sized(s->p, s->size);
    else
        hak_free(s->p);
    live_bytes -= s->size;
    memset(s, 0, sizeof *s);
}

/* Room for a block of n bytes in slot i (whose block, if any, is about to be replaced). */
static int fits_budget(unsigned i, size_t n) {
    return live_bytes - (slots[i].p ? slots[i].size : 0) + n <= BUDGET;
}

/* README.md: up to 1 MiB, usable sizes are at most 25% above the request beyond 128 bytes
 * (classes 16 apart below), from 4 to 32 KiB the largest block of as many a 64 KiB slab as
 * the request rounded up to 64 bytes fits where that is more, larger blocks are
 * page-granular, and an aligned block's usable size stays close to the request. The most a
 * fresh block of n bytes asked with alignment align (0: none) may offer: */
static size_t usable_limit(size_t n, size_t align) {
    if (align > 64 * KIB || (n > align ? n : align) > MIB) return page_up(n ? n : 1);
    /* Small and mid blocks asked with a larger alignment come from the first class that is a
     * multiple of it; the power of two at or above the request is one. */
    if (align > 16) return pow2_up(n > align ? n : align);
    size_t limit = n + n / 4 + 16;
    if (n > 4 * KIB && n <= 32 * KIB) {
        size_t per = 64 * KIB / ((n + 63) & ~(size_t)63), most = 64 * KIB / per & ~(size_t)15;
        if (most > limit) limit = most;
    }
    return limit;
}

static void check_usable_bound(unsigned i, size_t align) {
    const struct slot *s = &slots[i];
    size_t limit = usable_limit(s->size, align);
    if (s->usable > limit)
        fail("usable size %zu of %p is above %zu for %zu bytes (alignment %zu)", s->usable,
             (void *)s->p, limit, s->size, align);
}

static void do_alloc(const struct op *o) {
    size_t n = o->size;
    if (!fits_budget(o->slot, n)) return;
    if (slots[o->slot].p) release(o->slot, 0, 0);
    void *p = NULL;
    size_t align = 0;
    int rc;
    switch (o->code) {
    case OP_MALLOC:
        p = hak_malloc(n);
        adopt(o->slot, p, n, 0, FRESH);
        check_usable_bound(o->slot, 0);
        return;
    case OP_CALLOC: {
        unsigned k = o->arg & 7;
        n = (n >> k) << k;
        p = hak_calloc((size_t)1 << k, n >> k);
        adopt(o->slot, p, n, 0, CLEARED);
        check_usable_bound(o->slot, 0);
        return;
    }
    case OP_POSIX_MEMALIGN:
        align = (size_t)1 << (3 + (o->arg & 31) % 19);
        rc = hak_posix_memalign(&p, align, n);
        if (rc != 0) fail("posix_memalign(%zu) returned %d", align, rc);
        break;
    case OP_ALIGNED_ALLOC:
        if (o->arg & 0x80) { /* page-aligned; pvalloc also rounds the size up to pages */
            align = PAGE;
            p = o->arg & 0x40 ? hak_pvalloc(n) : hak_valloc(n);
            if (o->arg & 0x40 && p && hak_usable_size(p) < page_up(n ? n : 1))
                fail("pvalloc(%zu) gave usable size %zu", n, hak_usable_size(p));
            break;
        }
        align = (size_t)1 << (3 + (o->arg & 31) % 19);
        p = hak_aligned_alloc(align, n);
        break;
    default: { /* OP_MEMALIGN */
        size_t asked = (size_t)1 << (3 + (o->arg & 31) % 19);
        if (o->flag) asked += asked / 2;
        align = pow2_up(asked);
        p = hak_memalign(asked, n);
        break;
    }
    }
    adopt(o->slot, p, n, align, FRESH);
    check_usable_bound(o->slot, align);
}

/* realloc or reallocarray of slot i to n bytes: the contents up to the smaller size move. */
static void do_realloc(const struct op *o) {
    struct slot *s = &slots[o->slot];
    size_t n = o->size;
    unsigned k = o->arg & 7;
    if (o->code == OP_REALLOCARRAY) n = (n >> k) << k;
    if (!s->p) { /* realloc(NULL, n) is malloc(n) */
        if (!fits_budget(o->slot, n)) return;
        void *p = o->code == OP_REALLOC ? hak_realloc(NULL, n)
                                        : hak_reallocarray(NULL, (size_t)1 << k, n >> k);
        adopt(o->slot, p, n, 0, FRESH);
        return;
    }
    if (n > s->size && !fits_budget(o->slot, n)) return;
    verify_block(s, s->size, "before realloc");
    void *old = s->p;
    void *p = o->code == OP_REALLOC ? hak_realloc(old, n)
                                    : hak_reallocarray(old, (size_t)1 << k, n >> k);
    if (n == 0) { /* glibc: frees the block, returns NULL */
        if (p) fail("realloc(%p, 0) returned %p, not NULL", old, p);
        live_bytes -= s->size;
        memset(s, 0, sizeof *s);
        return;
    }
    if (!p) fail("realloc(%p, %zu) returned NULL", old, n);
    struct slot was = *s;
    live_bytes -= s->size;
    adopt(o->slot, p, n, 0, MOVED);
    /* The old pattern, as written for the old size, up to the smaller size; then the block is
     * rewritten in full for its new size, with the same fill. */
    was.p = p;
    verify_block(&was, n < was.size ? n : was.size, "after realloc");
    s->fill = was.fill;
    write_block(s);
}

/* Requests that must fail with errno set, and leave every block alone. */
static void do_bad(const struct op *o) {
    struct slot *s = &slots[o->slot];
    void *p = NULL, *q;
    int rc;
    errno = 0;
    switch (o->arg & 7) {
    case 0:
        q = hak_malloc((size_t)PTRDIFF_MAX + 1 + o->size);
        if (q || errno != ENOMEM) fail("malloc above PTRDIFF_MAX: %p, errno %d", q, errno);
        break;
    case 1:
        q = hak_calloc(SIZE_MAX / 2 + 1, 2 + o->size % 64);
        if (q || errno != ENOMEM) fail("calloc overflowing: %p, errno %d", q, errno);
        break;
    case 2: { /* not a power of two, or below sizeof(void *) */
        size_t bad = o->size & 1 ? 4 : 24 + 16 * (o->size % 64);
        rc = hak_posix_memalign(&p, bad, 100);
        if (rc != EINVAL || p) fail("posix_memalign(%zu): %d, %p", bad, rc, p);
        break;
    }
    case 3:
        q = hak_aligned_alloc(48, 100);
        if (q || errno != EINVAL) fail("aligned_alloc(48): %p, errno %d", q, errno);
        break;
    case 4:
    case 5:
        if (!s->p) return;
        q = (o->arg & 7) == 4 ? hak_realloc(s->p, (size_t)PTRDIFF_MAX + 1)
                              : hak_reallocarray(s->p, SIZE_MAX / 4, 8);
        if (q || errno != ENOMEM) fail("realloc too big of %p: %p, errno %d", (void *)s->p, q,
                                       errno);
        verify_block(s, s->size, "after a failed realloc");
        break;
    case 6: {
        static char not_ours[64];
        hak_free(NULL);
        hak_free_sized(NULL, 0);
        if (hak_usable_size(NULL) != 0) fail("hak_usable_size(NULL) is not 0");
        if (hak_owns(NULL) || hak_owns(not_ours) || hak_owns(&p))
            fail("hak_owns is nonzero for memory that is not hakmem's");
        break;
    }
    default:
        /* glibc: up to SIZE_MAX / 2 + 1 an alignment is rounded up to a power of two, and one
         * that cannot be met is ENOMEM; above it, EINVAL. */
        q = hak_memalign((size_t)PTRDIFF_MAX, 100);
        if (q || errno != ENOMEM) fail("memalign(PTRDIFF_MAX): %p, errno %d", q, errno);
        q = hak_memalign(SIZE_MAX / 2 + 2, 100);
        if (q || errno != EINVAL) fail("memalign(SIZE_MAX / 2 + 2): %p, errno %d", q, errno);
        q = hak_aligned_alloc(16, SIZE_MAX - o->size % 4096);
        if (q || errno != ENOMEM) fail("aligned_alloc(16, ~SIZE_MAX): %p, errno %d", q, errno);
        break;
    }
}

/* Runs one operation on the calling thread. */
static void execute(const struct op *o) {
    struct slot *s = &slots[o->slot];
    switch (o->code) {
    case OP_MALLOC: case OP_CALLOC: case OP_POSIX_MEMALIGN: case OP_ALIGNED_ALLOC:
    case OP_MEMALIGN:
        do_alloc(o);
        break;
    case OP_REALLOC: case OP_REALLOCARRAY:
        do_realloc(o);
        break;
    case OP_FREE:
        if (s->p) release(o->slot, 0, 0);
        break;
    case OP_FREE_SIZED:
        if (s->p) release(o->slot, 1, o->flag);
        break;
    case OP_USABLE:
        if (s->p) {
            size_t u = hak_usable_size(s->p);
            if (u < s->size) fail("usable size %zu below size %zu", u, s->size);
            if (!hak_owns(s->p)) fail("hak_owns(%p) is 0 for a live block", (void *)s->p);
            /* The slack is the program's to use: a usable size that lies lets these writes
             * land in a neighbour, whose check then fails. */
            size_t lo = s->size, hi = u;
            size_t head = lo + 64 < hi ? lo + 64 : hi, tail = hi >= head + 64 ? hi - 64 : head;
            memset(s->p + lo, 0xa5, head - lo);
            memset(s->p + tail, 0xa5, hi - tail);
            s->usable = u;
        }
        break;
    case OP_CHECK:
        if (s->p) {
            verify_block(s, s->size, "check");
            if (!hak_owns(s->p)) fail("hak_owns(%p) is 0 for a live block", (void *)s->p);
        }
        break;
    case OP_FILL:
        if (s->p) {
            verify_block(s, s->size, "before refill");
            s->fill = (uint8_t)(o->arg ? o->arg : 1);
            write_block(s);
        }
        break;
    case OP_TRIM:
        hak_trim();
        break;
    case OP_BAD:
        do_bad(o);
        break;
    default: /* SWITCH and RETIRE are the dispatcher's */
        break;
    }
}

/* --- the worker thread ------------------------------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t tid;
    int running, quit;
    const struct op *job; /* handed over; NULL once done */
} worker = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, NULL};

static int on_worker; /* the operations go to the worker */

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&worker.mu);
    for (;;) {
        while (!worker.job && !worker.quit) pthread_cond_wait(&worker.cv, &worker.mu);
        if (!worker.job) break;
        const struct op *o = worker.job;
        pthread_mutex_unlock(&worker.mu);
        execute(o);
        pthread_mutex_lock(&worker.mu);
        worker.job = NULL;
        pthread_cond_broadcast(&worker.cv);
    }
    pthread_mutex_unlock(&worker.mu);
    return NULL; /* hakmem's thread exit runs now: slabs with live blocks become orphans */
}

/* Runs o on the current thread, waiting for the worker when it is the worker. */
static void dispatch(const struct op *o) {
    if (!on_worker) {
        execute(o);
        return;
    }
    if (!worker.running) {
        int rc = pthread_create(&worker.tid, NULL, worker_main, NULL);
        if (rc) {
            fprintf(stderr, "fuzz_ops: pthread_create: %s\n", strerror(rc));
            abort();
        }
        worker.running = 1;
    }
    pthread_mutex_lock(&worker.mu);
    worker.job = o;
    pthread_cond_broadcast(&worker.cv);
    while (worker.job) pthread_cond_wait(&worker.cv, &worker.mu);
    pthread_mutex_unlock(&worker.mu);
}

static void retire_worker(void) {
    if (worker.running) {
        pthread_mutex_lock(&worker.mu);
        worker.quit = 1;
        pthread_cond_broadcast(&worker.cv);
        pthread_mutex_unlock(&worker.mu);
        pthread_join(worker.tid, NULL);
        worker.running = 0;
        worker.quit = 0;
    }
    on_worker = 0;
}

/* --- decoding ---------------------------------------------------------------------------- */

struct reader {
    const uint8_t *p;
    size_t left;
};

static int take(struct reader *r, size_t n, const uint8_t **out) {
    if (r->left < n) return 0;
    *out = r->p;
    r->p += n;
    r->left -= n;
    return 1;
}

static const size_t edges[] = {
    0, 8, 16, 128, 1024, 4096, 16 * KIB, 32 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 2 * MIB,
    4 * MIB,
};

static size_t decode_size(const uint8_t *b) {
    size_t v = b[1] | (size_t)b[2] << 8 | (size_t)b[3] << 16;
    switch (b[0] & 7) {
    case 0: return v % 257;
    case 1: return v % (32 * KIB + 1);
    case 2: return 32 * KIB + v % (MIB - 32 * KIB + 1);
    case 3: return MIB + v % (4 * MIB + 1);
    default: {
        size_t e = edges[b[1] % (sizeof edges / sizeof edges[0])];
        size_t d = b[2] & 63;
        return d >= 32 ? e + (d - 32) : e > 32 - d ? e - (32 - d) : 0;
    }
    }
}

/* The next operation, or 0 at the end of the input. */
static int decode(struct reader *r, struct op *o) {
    const uint8_t *b;
    memset(o, 0, sizeof *o);
    if (!take(r, 1, &b)) return 0;
    o->code = b[0] & 15;
    switch (o->code) {
    case OP_SWITCH: case OP_RETIRE: case OP_TRIM:
        return 1;
    default:
        break;
    }
    if (!take(r, 1, &b)) return 0;
    o->slot = b[0] & (NSLOTS - 1);
    o->flag = (b[0] & 0x80) != 0;
    switch (o->code) {
    case OP_FREE: case OP_FREE_SIZED: case OP_USABLE: case OP_CHECK:
        return 1;
    case OP_CALLOC: case OP_POSIX_MEMALIGN: case OP_ALIGNED_ALLOC: case OP_MEMALIGN:
    case OP_REALLOCARRAY: case OP_FILL: case OP_BAD:
        if (!take(r, 1, &b)) return 0;
        o->arg = b[0];
        if (o->code == OP_MEMALIGN) o->flag = (b[0] & 0x80) != 0;
        if (o->code == OP_FILL) return 1;
        break;
    default:
        break;
    }
    if (!take(r, 4, &b)) return 0;
    o->size = decode_size(b);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer calls it */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int trace = -1;
    if (trace < 0) trace = getenv("FUZZ_OPS_TRACE") != NULL;
    struct reader r = {data, size};
    struct op o;
    serial = 0;
    cur_index = 0;
    while (decode(&r, &o)) {
        cur_op = &o;
        if (trace)
            fprintf(stderr, "fuzz_ops: %u %s%s slot %u arg 0x%02x%s size %zu\n", cur_index,
                    op_names[o.code], on_worker ? " (worker)" : "", o.slot, o.arg,
                    o.flag ? " flag" : "", o.size);
        if (o.code == OP_SWITCH)
            on_worker = !on_worker;
        else if (o.code == OP_RETIRE)
            retire_worker();
        else
            dispatch(&o);
        cur_index++;
    }
    /* Leave nothing to the next input: check and free every block, on whichever thread. */
    struct op end = {OP_FREE, 0, 0, 0, 0};
    for (unsigned i = 0; i < NSLOTS; i++) {
        if (!slots[i].p) continue;
        end.slot = i;
        cur_op = &end;
        dispatch(&end);
    }
    on_worker = 0;
    cur_op = NULL;
    if (live_bytes != 0) fail("the model counts %zu live bytes after freeing all", live_bytes);
    struct hak_stats st;
    hak_stats_get(&st);
    if (st.large_now != 0 || st.large_bytes_now != 0)
        fail("hakmem reports %zu live large blocks (%zu bytes) after every block was freed",
             st.large_now, st.large_bytes_now);
    return 0;
}
