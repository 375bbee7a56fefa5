#define _GNU_SOURCE
#include "snapshot.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../include/hakmem.h"
#include "owner.h"
#include "config.h"
#include "init.h"
#include "large.h"
#include "orphan.h"
#include "os.h"
#include "policy.h"
#include "pool.h"
#include "stats.h"
#include "text.h"
#include "transfer.h"

HK_EXPORT void hak_stats_get(struct hak_stats *out) {
    hk_init(); /* the policy reported is the configured one, even before any allocation */
    memset(out, 0, sizeof *out);
#define HK_LOAD(f) out->f = atomic_load_explicit(&hk_ctr.f, memory_order_relaxed)
    HK_LOAD(os_mmap);
    HK_LOAD(os_munmap);
    HK_LOAD(os_madvise);
    HK_LOAD(os_mremap);
    HK_LOAD(acquire_stage1);
    HK_LOAD(acquire_stage2);
    HK_LOAD(acquire_stage3_cache);
    HK_LOAD(acquire_stage3_mmap);
    HK_LOAD(slab_release);
    HK_LOAD(slab_adopt);
    HK_LOAD(slab_abandon);
    HK_LOAD(inbox_helps);
    HK_LOAD(os_mmap_bytes);
    HK_LOAD(os_munmap_bytes);
    HK_LOAD(os_madvise_bytes);
    HK_LOAD(threads_started);
    HK_LOAD(threads_exited);
    HK_LOAD(heaps_taken_over);
    HK_LOAD(heaps_taken_in);
    HK_LOAD(heaps_given_up);
    HK_LOAD(os_mremap_bytes);
    HK_LOAD(os_populate);
    HK_LOAD(os_populate_bytes);
#undef HK_LOAD
    out->large_filled = atomic_load_explicit(&hk_ctr.fill_blocks, memory_order_relaxed);
    out->large_filled_bytes = atomic_load_explicit(&hk_ctr.fill_bytes, memory_order_relaxed);
    out->large_fill_probes = atomic_load_explicit(&hk_ctr.fill_probes, memory_order_relaxed);
    out->large_fill_probes_filled =
        atomic_load_explicit(&hk_ctr.fill_probes_filled, memory_order_relaxed);
    out->superslabs_unmapped = atomic_load_explicit(&hk_ctr.ss_unmapped, memory_order_relaxed);
    hk_pool_stats(out);
    hk_large_stats(out);
    hk_orphan_locks_add(&out->orphan_lock, &out->orphan_lock_waited);
    hk_xfer_locks_add(&out->xfer_lock, &out->xfer_lock_waited);
    out->purge_delay_ms = hk_pol_purge_delay();
    out->unmap_delay_ms = hk_pol_unmap_delay();
    out->pool_budget = atomic_load_explicit(&hk_pol.pool_budget, memory_order_relaxed);
    out->large_budget = atomic_load_explicit(&hk_pol.large_budget, memory_order_relaxed);
    out->ss_cache_max = atomic_load_explicit(&hk_pol.ss_cache, memory_order_relaxed);
    out->nclass = HK_NCLASS;
    out->counted = (size_t)hk_counting;
    struct hk_tally_sum t;
    hk_owner_tally(&t);
    out->large_allocs = t.large_allocs;
    out->large_frees = t.large_frees;
    /* Remote frees of threads with a heap are counted in their tallies, the rest here. */
    out->remote_free = t.remote_pushes + atomic_load_explicit(&hk_ctr.remote_free,
                                                              memory_order_relaxed);
    for (unsigned c = 0; c < HK_NCLASS; c++) {
        out->class_size[c] = hk_class_size[c];
        out->soft_cap[c] = hk_pol_soft_cap(c);
        out->class_slabs_retained[c] = t.retained[c];
        out->class_allocs[c] = t.allocs[c];
        out->class_frees[c] = t.frees[c];
        out->class_remote_frees[c] = t.remote_frees[c];
        out->class_live[c] = t.allocs[c] - t.frees[c];
    }
}

/* Every scalar field of struct hak_stats, for the JSON report. */
#define HK_STATS_SCALARS(X)                                                                    \
    X(os_mmap) X(os_munmap) X(os_madvise) X(os_mremap) X(mapped_bytes_now) X(superslabs_now)   \
    X(superslabs_cached_now) X(slabs_active_now) X(large_now) X(large_bytes_now)               \
    X(acquire_stage1) X(acquire_stage2) X(acquire_stage3_cache) X(acquire_stage3_mmap)         \
    X(slab_release) X(slab_adopt) X(slab_abandon) X(remote_free) X(inbox_helps)                \
    X(pool_empty_bytes_now)                                                                    \
    X(pool_purged_bytes) X(superslabs_unmapped) X(large_free_dirty_now)                        \
    X(large_free_clean_now) X(large_cache_hits) X(large_cache_misses) X(large_purged_bytes)    \
    X(large_realloc_in_place) X(large_realloc_mremap) X(large_realloc_copied) X(large_gathers)  \
    X(large_gathered_bytes) X(large_arenas) X(large_steals) X(large_queued_frees)              \
    X(large_filled) X(large_filled_bytes) X(large_fill_probes) X(large_fill_probes_filled)     \
    X(purge_delay_ms)                                                                          \
    X(unmap_delay_ms)                                                                          \
    X(pool_budget) X(large_budget) X(ss_cache_max) X(os_mmap_bytes) X(os_munmap_bytes)            \
    X(os_madvise_bytes) X(os_mremap_bytes) X(os_populate) X(os_populate_bytes) X(pool_lock)      \
    X(pool_lock_waited)                                                                        \
    X(pool_class_lock) X(pool_class_lock_waited)                                               \
    X(large_lock) X(large_lock_waited) X(orphan_lock) X(orphan_lock_waited)                    \
    X(xfer_lock) X(xfer_lock_waited)                                                           \
    X(threads_started) X(threads_exited) X(heaps_taken_over) X(heaps_taken_in)                  \
    X(heaps_given_up)                                                                          \
    X(counted) X(large_allocs) X(large_frees)

/* Appends to buf at *n what fmt makes, if it fits. */
static void hk_out(char *buf, size_t size, int *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void hk_out(char *buf, size_t size, int *n, const char *fmt, ...) {
    if (*n < 0 || (size_t)*n >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, size - (size_t)*n, fmt, ap);
    va_end(ap);
    *n = k < 0 ? -1 : *n + k;
}

/* The report as one JSON object (HAKMEM_STATS=json): every field of struct hak_stats, the
 * classes used, and the process's page faults and peak RSS. */
static int hk_stats_json(const struct hak_stats *s, const struct rusage *ru, char *buf,
                         size_t size) {
    int n = 0;
    hk_out(buf, size, &n, "{\"pid\": %ld", (long)getpid());
#define HK_JSON(f) hk_out(buf, size, &n, ", \"" #f "\": %zu", s->f);
    HK_STATS_SCALARS(HK_JSON)
#undef HK_JSON
    hk_out(buf, size, &n, ", \"minor_faults\": %ld, \"major_faults\": %ld, \"peak_rss_kb\": %ld",
           ru->ru_minflt, ru->ru_majflt, ru->ru_maxrss);
    hk_out(buf, size, &n, ", \"classes\": [");
    int first = 1;
    for (size_t c = 0; c < s->nclass; c++) {
        if (!s->class_slabs_acquired[c] && !s->class_allocs[c]) continue;
        hk_out(buf, size, &n,
               "%s{\"size\": %zu, \"allocs\": %zu, \"frees\": %zu, \"remote_frees\": %zu, "
               "\"live\": %zu, \"slabs_acquired\": %zu, \"slabs_held\": %zu, "
               "\"slabs_retained\": %zu, \"slabs_empty\": %zu, \"soft_cap\": %zu}",
               first ? "" : ", ", s->class_size[c], s->class_allocs[c], s->class_frees[c],
               s->class_remote_frees[c], s->class_live[c], s->class_slabs_acquired[c],
               s->class_slabs_held[c], s->class_slabs_retained[c], s->class_slabs_empty[c],
               s->soft_cap[c]);
        first = 0;
    }
    hk_out(buf, size, &n, "]}\n");
    return n;
}

static int hk_stats_text(const struct hak_stats *s, const struct rusage *ru, char *buf,
                         size_t size) {
    /* The pid tells apart the reports of a program and the programs it starts (they all
     * inherit HAKMEM_STATS). */
    int n = 0;
    hk_out(buf, size, &n,
           "hakmem stats (pid %ld):\n"
           "  os: mmap %zu, munmap %zu, madvise %zu, mremap %zu, populate %zu (%zu bytes)\n"
           "  mapped now %zu bytes: %zu SuperSlabs (%zu cached), %zu active slots, "
           "%zu large blocks (%zu bytes)\n"
           "  slab acquire: stage1 %zu, stage2 %zu, stage3 cache %zu, stage3 mmap %zu\n"
           "  slab release %zu, abandon %zu, adopt %zu; remote frees %zu (idle owners' applied by "
           "others %zu)\n"
           "  free memory kept: pool %zu bytes EMPTY, large %zu bytes resident + %zu released; "
           "given back: pool %zu bytes, large %zu bytes, %zu SuperSlabs to the page heap\n"
           "  large: %zu arenas (%zu free extents moved between them, %zu frees left for the lock's holder), %zu hits, %zu misses (%zu gathered free pages, %zu bytes); realloc %zu in "
           "place, %zu copied into resident free memory, %zu by mremap; filled at malloc %zu (%zu "
           "bytes), probes %zu (%zu filled)\n"
           "  policy: purge delay %zu ms, unmap delay %zu ms, budgets pool %zu / large %zu "
           "bytes, SuperSlab cache %zu\n"
           "  process: %ld minor and %ld major page faults, peak RSS %ld KiB\n"
           "  os bytes: mmap %zu, munmap %zu, madvise %zu, mremap %zu; threads %zu started, %zu "
           "exited (heaps taken over %zu, taken in %zu, given up %zu)\n"
           "  locks (acquisitions, waited): pool %zu, %zu; pool by class %zu, %zu; large %zu, %zu; "
           "orphans by class %zu, %zu; transfer lists %zu, %zu\n",
           (long)getpid(), s->os_mmap, s->os_munmap, s->os_madvise, s->os_mremap,
           s->os_populate, s->os_populate_bytes,
           s->mapped_bytes_now, s->superslabs_now, s->superslabs_cached_now,
           s->slabs_active_now, s->large_now, s->large_bytes_now, s->acquire_stage1,
           s->acquire_stage2, s->acquire_stage3_cache, s->acquire_stage3_mmap, s->slab_release,
           s->slab_abandon, s->slab_adopt, s->remote_free, s->inbox_helps, s->pool_empty_bytes_now,
           s->large_free_dirty_now, s->large_free_clean_now, s->pool_purged_bytes,
           s->large_purged_bytes, s->superslabs_unmapped, s->large_arenas, s->large_steals, s->large_queued_frees, s->large_cache_hits,
           s->large_cache_misses, s->large_gathers, s->large_gathered_bytes,
           s->large_realloc_in_place, s->large_realloc_copied, s->large_realloc_mremap,
           s->large_filled, s->large_filled_bytes, s->large_fill_probes,
           s->large_fill_probes_filled,
           s->purge_delay_ms, s->unmap_delay_ms, s->pool_budget, s->large_budget,
           s->ss_cache_max, ru->ru_minflt, ru->ru_majflt, ru->ru_maxrss, s->os_mmap_bytes,
           s->os_munmap_bytes, s->os_madvise_bytes, s->os_mremap_bytes, s->threads_started,
           s->threads_exited, s->heaps_taken_over, s->heaps_taken_in, s->heaps_given_up,
           s->pool_lock, s->pool_lock_waited, s->pool_class_lock,
           s->pool_class_lock_waited, s->large_lock,
           s->large_lock_waited, s->orphan_lock, s->orphan_lock_waited, s->xfer_lock,
           s->xfer_lock_waited);
    if (s->counted)
        hk_out(buf, size, &n, "  large blocks: %zu allocated, %zu freed\n", s->large_allocs,
               s->large_frees);
    /* slabs: taken from the pool so far; held by threads now (active + retained); retained:
     * empty ones threads keep; empty: EMPTY in the pool, last used by this class. */
    hk_out(buf, size, &n, "  %8s %10s %10s %10s %8s %7s %6s %8s %6s %4s\n", "class", "allocs",
           "frees", "remote", "live", "slabs", "held", "retained", "empty", "cap");
    for (size_t c = 0; c < s->nclass; c++) {
        if (!s->class_slabs_acquired[c] && !s->class_allocs[c]) continue;
        char ops[64] = "         -          -          -        -";
        if (s->counted)
            snprintf(ops, sizeof ops, "%10zu %10zu %10zu %8zu", s->class_allocs[c],
                     s->class_frees[c], s->class_remote_frees[c], s->class_live[c]);
        hk_out(buf, size, &n, "  %8zu %s %7zu %6zu %8zu %6zu %4zu\n", s->class_size[c], ops,
               s->class_slabs_acquired[c], s->class_slabs_held[c], s->class_slabs_retained[c],
               s->class_slabs_empty[c], s->soft_cap[c]);
    }
    return n;
}

/* What a report is made in: a mapping of its own, as this may run on any thread (malloc_stats,
 * or exit() with HAKMEM_STATS set), and on the stack it took 40 KiB, more than a thread of the
 * smallest stack has (PTHREAD_STACK_MIN, 16 KiB). */
struct hk_report {
    struct hak_stats s;
    struct rusage ru;
    char path[sizeof hk_cfg.stats_file + 16];
    char text[(size_t)32 << 10]; /* every class, in JSON, fits with room to spare */
};

/* Writes the report, as text or JSON, to stderr or to HAKMEM_STATS_FILE, in one write (so
 * that reports appended to one file do not interleave). snprintf with integer conversions
 * does not allocate in glibc. */
void hk_stats_dump(int json) {
    struct hk_report *r = hk_os_map(sizeof *r);
    if (!r) {
        hk_write_err("hakmem: no memory for the report\n");
        return;
    }
    hak_stats_get(&r->s);
    /* The report's own mapping is not the program's: it is gone when the report is out. */
    r->s.os_mmap -= 1;
    r->s.os_mmap_bytes -= sizeof *r;
    getrusage(RUSAGE_SELF, &r->ru);
    int n = json ? hk_stats_json(&r->s, &r->ru, r->text, sizeof r->text)
                 : hk_stats_text(&r->s, &r->ru, r->text, sizeof r->text);
    if (n >= 0 && (size_t)n >= sizeof r->text) n = (int)sizeof r->text - 1;
    int fd = 2;
    if (n > 0 && hk_cfg.stats_file[0]) {
        hk_path_with_pid(r->path, sizeof r->path, hk_cfg.stats_file);
        fd = open(r->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) fd = 2;
    }
    for (int off = 0; off < n;) {
        ssize_t w = write(fd, r->text + off, (size_t)(n - off));
        if (w <= 0) break;
        off += (int)w;
    }
    if (fd != 2) close(fd);
    hk_os_unmap(r, sizeof *r);
}

HK_EXPORT void hak_stats_print(void) { hk_stats_dump(hk_cfg.stats == HK_STATS_JSON); }

/* Runs at exit when the library is loaded; prints the report if HAKMEM_STATS asks for one.
 * The program's buffered output is flushed first, so that in `prog >log 2>&1` the report
 * comes after the program's last lines, not above them. */
__attribute__((destructor)) static void hk_stats_at_exit(void) {
    if (!hk_cfg.stats) return;
    fflush(NULL);
    hk_stats_dump(hk_cfg.stats == HK_STATS_JSON);
}
