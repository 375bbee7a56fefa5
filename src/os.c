#define _GNU_SOURCE
#include "os.h"

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
