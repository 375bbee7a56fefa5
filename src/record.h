/* Heap records: the memory of thread heaps (heap.h, struct hk_heap).
 *
 * A thread's heap is a record mapped apart, not its static TLS (heap.h, struct hk_tls). A
 * thread starts on hk_heap_none, which is what a record starts as: empty caches, so both fast
 * paths go to the slow path, and the slow path takes the thread a record (heap.c,
 * hk_heap_self) before it writes anything. The exit hook (heap.c) is armed when a record is
 * taken, so that a thread that never set its heap up gives its record back too. After the
 * teardown the thread keeps its record for what later destructors do (glibc's own free of its
 * key blocks among them), as it kept its TLS; the record is used again by a thread that
 * starts once that thread is gone (hk_record_reap). Records are never unmapped, so a helper
 * that read a heap's address just before its thread exited reads a record, not freed memory.
 * Without a key to be had (exit_key.h) a thread's record stays with it after it exits, as its
 * slabs do.
 *
 * A record is 3 pages; what every thread writes lies in the first (heap.h). The rest is zero
 * in the template and in a new mapping, and is not copied; a thread writes it once it holds a
 * slab, sends blocks to another thread or to a transfer list (rest_written notes it), and
 * reads it only for the classes it holds slabs of (slabbed). So a thread that takes its few
 * blocks from the shared slabs and waits makes one page of its record resident: crowd (1,000
 * threads, 8 blocks of 16 B..4 KiB each) kept 37.4 KiB a thread, now 30.0. This machine's
 * kernel gives a read of an untouched page a page of its own, so reads count as writes. A
 * record used again is cleared past its first page only where a thread before noted a
 * write there. */
#ifndef HK_RECORD_H
#define HK_RECORD_H

#include "heap.h"

/* The record every thread starts on: empty caches and an owned-slab table that admits
 * nothing, so that both fast paths go to the slow path. Never written. */
extern const struct hk_heap hk_heap_none HK_INTERNAL;

/* A record for the calling thread: one given back by a thread that is gone (those whose
 * rest was written first), else a new one; its first page as hk_heap_none's, the rest zero,
 * but for the owned-slab table a thread before grew (ospare), which stays. NULL only if the
 * OS refuses the memory. errno is as it was. The caller makes it the thread's (hk_tls). */
struct hk_heap *hk_record_take(void) HK_INTERNAL;
/* Registers the records' fork handlers, once: after the first record is a thread's, since
 * pthread_atfork may allocate. */
void hk_record_forkable(void) HK_INTERNAL;
/* Record h's thread is exiting, its heap torn down: h is given back once the thread is gone
 * (a second call, for a heap set up again and torn down again, changes nothing). */
void hk_record_parting(struct hk_heap *h) HK_INTERNAL;

#endif
