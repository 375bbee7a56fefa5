#define _GNU_SOURCE
#include "os.h"

#include <stdatomic.h>
#include <sys/mman.h>

#include "stats.h"
#include "trace.h"

void *hk_os_map(size_t size) {
    HK_STAT_INC(os_mmap);
    HK_STAT_ADD(os_mmap_bytes, size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, p == MAP_FAILED ? "mmap failed" : "mmap", "addr@",
                 p == MAP_FAILED ? 0 : (uintptr_t)p, "bytes", size, NULL, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Consecutive exact mappings that came back misaligned; past HK_EXACT_TRIES, no more tries. */
#define HK_EXACT_TRIES 4
static _Atomic unsigned hk_exact_misses;

void *hk_os_map_aligned(size_t size, size_t align) {
    /* Kernels since 6.7 place an anonymous mapping whose length is a multiple of 2 MiB on a
     * 2 MiB boundary (for transparent huge pages), so an exact mapping is often aligned
     * already: one mmap, where over-mapping takes an mmap and one or two munmaps (each a TLB
     * shoot-down on every core the process runs on). Where the kernel does not, the exact
     * tries stop after a few misses. */
    if (atomic_load_explicit(&hk_exact_misses, memory_order_relaxed) < HK_EXACT_TRIES) {
        char *q = hk_os_map(size);
        if (!q) return NULL;
        if (((uintptr_t)q & (align - 1)) == 0) {
            atomic_store_explicit(&hk_exact_misses, 0, memory_order_relaxed);
            return q;
        }
        hk_os_unmap(q, size);
        atomic_fetch_add_explicit(&hk_exact_misses, 1, memory_order_relaxed);
    }
    /* Over-map by the alignment, then trim both ends so exactly [p, p+size) stays mapped. */
    size_t span = size + align;
    if (span < size) return NULL;
    char *raw = hk_os_map(span);
    if (!raw) return NULL;
    char *p = (char *)hk_align_up((uintptr_t)raw, align);
    size_t head = (size_t)(p - raw);
    size_t tail = span - head - size;
    if (head) hk_os_unmap(raw, head);
    if (tail) hk_os_unmap(p + size, tail);
    return p;
}

void hk_os_unmap(void *p, size_t size) {
    HK_STAT_INC(os_munmap);
    HK_STAT_ADD(os_munmap_bytes, size);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, "munmap", "addr@", (uintptr_t)p, "bytes", size, NULL, 0);
    munmap(p, size);
}

void hk_os_release(void *p, size_t size) {
    HK_STAT_INC(os_madvise);
    HK_STAT_ADD(os_madvise_bytes, size);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, "madvise DONTNEED", "addr@", (uintptr_t)p, "bytes", size, NULL, 0);
    madvise(p, size, MADV_DONTNEED);
}

void *hk_os_remap(void *p, size_t old_size, size_t new_size) {
    HK_STAT_INC(os_mremap);
    HK_STAT_ADD(os_mremap_bytes, new_size);
    void *q = mremap(p, old_size, new_size, MREMAP_MAYMOVE);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, q == MAP_FAILED ? "mremap failed" : "mremap", "addr@", (uintptr_t)p,
                 "bytes", old_size, "to", new_size);
    return q == MAP_FAILED ? NULL : q;
}

int hk_os_move(void *from, size_t size, void *to) {
    HK_STAT_INC(os_mremap);
    HK_STAT_ADD(os_mremap_bytes, size);
    void *q = mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, q == MAP_FAILED ? "mremap (move) failed" : "mremap (move)", "addr@",
                 (uintptr_t)from, "bytes", size, "to@", (uintptr_t)to);
    return q != MAP_FAILED;
}
