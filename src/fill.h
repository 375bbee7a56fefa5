/* Filling big blocks ahead: whether a block cut from untouched memory gets its pages in one
 * call at its malloc (madvise(MADV_POPULATE_WRITE), os.c) instead of one fault a page as the
 * program writes them.
 *
 * A program that writes the whole of its big blocks pays a fault for every page of each one
 * cut from untouched memory; filled in one call, the pages cost a fraction of that (here, a
 * virtual machine that shadows page tables: 15 us a fault against 9 for a filled page and
 * its first touch; on any machine, the trap and return of each fault). But a block of which
 * the program writes a few pages (a buffer that a short answer uses the start of) would hold
 * every page. So the decision follows what the program did with its blocks: while filling is
 * off, blocks cut from untouched memory are probes, left to fault, and their free looks
 * (mincore) at how much of them the program wrote; so does the cut of the next candidate of
 * their arena, which counts the probe then only if it is written whole already (a program
 * that makes a wave of blocks before it frees any learns from the first at the second). The
 * first probe written whole turns filling on (after one that was not, two in a row); while
 * on, one candidate in HK_FILL_PROBE_EVERY is still a probe, and one probe not written whole
 * turns filling off, after which probes come less and less often (one candidate in 2, 4, 8,
 * then 16) until they find blocks written whole again. HAKMEM_POPULATE=on fills every
 * candidate, off none.
 *
 * Candidates are program blocks from HK_FILL_MIN to below HK_HUGE bytes (not SuperSlabs: the
 * pool fills a fresh slab's carves itself) at least half of whose pages were untouched when
 * cut; a huge block may be an array the program means to use in part, and is never filled,
 * and near a cgroup limit nothing is. The state is one score for the process, read and
 * written with relaxed atomics: a race loses an update, which the next probe makes good. */
#ifndef HK_FILL_H
#define HK_FILL_H

#include "common.h"

#define HK_FILL_MIN ((size_t)256 << 10)
#define HK_FILL_PROBE_EVERY 8

enum { HK_FILL_NONE, HK_FILL_PROBE, HK_FILL_POPULATE };

/* What to do with a program block of len bytes (below HK_HUGE: the caller's check), fresh of
 * them untouched, just cut: nothing, make it a probe (its cutter calls hk_fill_learn with
 * what hk_fill_written shows, later), or fill it (hk_fill, once the cutter's lock is
 * released). */
int hk_fill_plan(size_t len, size_t fresh) HK_INTERNAL;

/* Fills the pages of block [p, p + len) (hk_fill_plan said so). */
void hk_fill(void *p, size_t len) HK_INTERNAL;

/* Whether the program has written block [p, p + len) whole, as far as a sample of its pages
 * shows (mincore: its resident pages are those written). */
int hk_fill_written(const void *p, size_t len) HK_INTERNAL;

/* What a probe showed: written whole or not. Moves the score. */
void hk_fill_learn(int whole) HK_INTERNAL;

#endif
