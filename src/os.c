#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "stats.h"
#include "trace.h"

/* Calls that change the page tables of a range (munmap, madvise(DONTNEED), mremap) cover at
 * most one 2 MiB-aligned stretch each. On a virtual machine that shadows the guest's page
 * tables (this project's machines), one call over several such stretches (4 MiB and more,
 * about every other time) made the host drop its shadow of the whole process: every page the
 * program touched afterwards, anywhere, cost about 10 us once, as a fresh page's fault does
 * (a 32 MiB buffer untouched by the call: 0.03 us a page before it, 9-11 after). Stretch by
 * stretch, nothing of the kind was seen, and the calls themselves ran faster (32 MiB: madvise
 * 2.3 ms against 4.4, munmap 2.0 against 4.6, and mremap 0.47 against 2.9 where source and
 * destination lie alike in their stretches, as the kernel then moves whole page tables). On
 * other machines it costs a system call per 2 MiB. */
#define HK_OS_STRETCH ((uintptr_t)2 << 20)

/* The bytes from a to the end of its stretch, or to end if that comes first. */
static inline size_t hk_os_piece(uintptr_t a, uintptr_t end) {
    uintptr_t next = (a | (HK_OS_STRETCH - 1)) + 1;
    return (size_t)((next < end ? next : end) - a);
}

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
    HK_STAT_ADD(os_munmap_bytes, size);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, "munmap", "addr@", (uintptr_t)p, "bytes", size, NULL, 0);
    for (uintptr_t a = (uintptr_t)p, end = a + size; a < end;) {
        size_t k = hk_os_piece(a, end);
        HK_STAT_INC(os_munmap);
        munmap((void *)a, k);
        a += k;
    }
}

int hk_os_release(void *p, size_t size) {
    int failed = 0;
    HK_STAT_ADD(os_madvise_bytes, size);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, "madvise DONTNEED", "addr@", (uintptr_t)p, "bytes", size, NULL, 0);
    for (uintptr_t a = (uintptr_t)p, end = a + size; a < end;) {
        size_t k = hk_os_piece(a, end);
        HK_STAT_INC(os_madvise);
        failed |= madvise((void *)a, k, MADV_DONTNEED) != 0;
        a += k;
    }
    return failed ? -1 : 0;
}

/* Zeroes [p, p + size) with its last page (p page-aligned), stretch by stretch: a stretch of
 * which fewer than half the pages are resident is released (its pages read as zero, and fault
 * in at their next touch as writing them would have made them do), the others are written
 * (a resident page costs 0.2 us to clear, a fault 12-13 us on this project's machines). A page
 * that is not resident may still hold data (swapped out), which is why it is released, not
 * skipped. calloc of blocks of 5..25 MiB that the program then leaves mostly unwritten, cut
 * from freed ones: 3.1 s for 2,000 (110,963 page faults, 435 MiB peak RSS) when each was
 * written whole, jemalloc 0.008 s (476 faults). */
void hk_os_zero(void *p, size_t size) {
    unsigned char v[HK_OS_STRETCH / HK_PAGE_SIZE];
    int saved = errno; /* a calloc that succeeds leaves errno as it found it */
    for (uintptr_t a = (uintptr_t)p, end = hk_align_up(a + size, HK_PAGE_SIZE); a < end;) {
        size_t k = hk_os_piece(a, end), pages = k / HK_PAGE_SIZE, resident = 0;
        if (mincore((void *)a, k, v) == 0) {
            for (size_t i = 0; i < pages; i++) resident += v[i] & 1;
        } else {
            resident = pages;
        }
        if (resident * 2 >= pages || hk_os_release((void *)a, k) != 0) memset((void *)a, 0, k);
        a += k;
    }
    errno = saved;
}

/* Whether the kernel takes MADV_POPULATE_WRITE: 0 until one call said EINVAL (before Linux
 * 5.14) or EPERM (a filter). Any thread may clear it; a stale read costs one more refusal. */
static int hk_os_no_populate;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* On this project's machines (a virtual machine that shadows page tables) a fresh page's
 * fault costs 15-19 us, and the first touch of a page filled by this call about 9 (the host
 * still fills in its shadow), with the call itself about 2 us: a carve of 16 KiB of blocks
 * in fresh pages, 4 faults, runs some 20 us faster. Elsewhere it saves the fault's entry and
 * exit for each page. Pages that hold something already would cost the call for nothing,
 * which is why only fresh ones come here (superslab.h, struct hk_slab's clean; a big block
 * mostly untouched, fill.h). */
void hk_os_populate(void *p, size_t size) {
    int saved = errno; /* a malloc that succeeds leaves errno as it found it */
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(HK_PAGE_SIZE - 1);
    uintptr_t end = hk_align_up((uintptr_t)p + size, HK_PAGE_SIZE);
    while (a < end && !__atomic_load_n(&hk_os_no_populate, __ATOMIC_RELAXED)) {
        size_t k = hk_os_piece(a, end);
        HK_STAT_INC(os_populate);
        HK_STAT_ADD(os_populate_bytes, k);
        if (HK_TRACING(HK_T_OS))
            hk_trace(HK_T_OS, "madvise POPULATE_WRITE", "addr@", a, "bytes", k, NULL, 0);
        if (madvise((void *)a, k, MADV_POPULATE_WRITE) != 0 && (errno == EINVAL || errno == EPERM))
            __atomic_store_n(&hk_os_no_populate, 1, __ATOMIC_RELAXED);
        a += k;
    }
    errno = saved;
}

size_t hk_os_move(void *from, size_t size, void *to) {
    uintptr_t a = (uintptr_t)from, end = a + size;
    ptrdiff_t d = (char *)to - (char *)from;
    while (a < end) {
        size_t k = hk_os_piece(a, end);
        HK_STAT_INC(os_mremap);
        if (mremap((void *)a, k, k, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(a + d)) ==
            MAP_FAILED)
            break;
        a += k;
    }
    size_t moved = (size_t)(a - (uintptr_t)from);
    HK_STAT_ADD(os_mremap_bytes, moved);
    if (HK_TRACING(HK_T_OS))
        hk_trace(HK_T_OS, moved < size ? "mremap (move) failed" : "mremap (move)", "addr@",
                 (uintptr_t)from, "bytes", moved, "to@", (uintptr_t)to);
    return moved;
}

void *hk_os_remap(void *p, size_t old_size, size_t new_size) {
    /* In place where the address space after the mapping is free: nothing moves. */
    HK_STAT_INC(os_mremap);
    if (mremap(p, old_size, new_size, 0) != MAP_FAILED) {
        HK_STAT_ADD(os_mremap_bytes, new_size);
        if (HK_TRACING(HK_T_OS))
            hk_trace(HK_T_OS, "mremap (in place)", "addr@", (uintptr_t)p, "bytes", old_size,
                     "to", new_size);
        return p;
    }
    /* Elsewhere: new address space that lies in its stretches as p does, so that the kernel
     * moves whole page tables (hk_os_move), the slack trimmed off. */
    char *r = hk_os_map(new_size + HK_OS_STRETCH);
    if (!r) return NULL;
    char *q = r + (((uintptr_t)p - (uintptr_t)r) & (HK_OS_STRETCH - 1));
    if (q > r) hk_os_unmap(r, (size_t)(q - r));
    hk_os_unmap(q + new_size, (size_t)(r + HK_OS_STRETCH - q)); /* q < r + HK_OS_STRETCH */
    size_t moved = hk_os_move(p, old_size, q);
    if (moved < old_size) { /* a stretch would not move (hk_os_move): the rest copied */
        memcpy(q + moved, (char *)p + moved, old_size - moved);
        hk_os_unmap((char *)p + moved, old_size - moved);
    }
    return q;
}
