/* The thread heap: per thread, per class, the current slab and a free list of its blocks.
 *
 * Fast paths (inlined into malloc and free, see malloc.c):
 *   malloc(n): class from malloc's class table (hk_malloc_class), pop free[c] (its link
 *              checked, hk_link_ok), count it in taken[c] (see "Reuse"), prefetch the new head
 *              (hk_block_prefetch), clear the block's free mark (block.h).
 *   free(p):   e = ftab[(p >> 16) % n]; off = p - e->base times e->mul below e->lim
 *              (HK_BLOCK_MUL: one multiply and compare) means p is a block start in the
 *              carved part of one of this thread's small slabs, current or not, or of its
 *              current span of a mid class it allocates again after freeing it (owned.h,
 *              hk_owned_admits: each of the span's slots has an entry alike); p
 *              without the free mark is not free already: push p onto e->head, the cache of
 *              its class, and take 1 from the class's room (hk_heap_free_fast), which lies one
 *              array after the caches. Every free to one of the thread's small slabs takes
 *              this one path, whichever slab it is, so that is no branch to mispredict, and
 *              the block is the next one malloc hands out, while this core still holds its
 *              lines. Full slabs keep their entry: the block waits in the cache, and the
 *              slab becomes partial when it goes home. (The hardened build pushes a block of
 *              another slab than the current one onto that slab's free list and takes 1 from
 *              its `used`: its caches hold the current slab's blocks only, so a block pushed
 *              onto the slab's own list takes 1 and one into the cache 0; there a full slab
 *              has no entry, and the first free to one makes it partial on the slow path.)
 * With HAKMEM_STATS set at start-up both fast paths stay off (the class table maps every
 * size to an always-empty class; the owned-slab table stays empty), so that the slow paths
 * count every call. No lock, no atomic read-modify-write, no call and no map lookup on either.
 * A miss goes to the slow path: another thread's slab (into the stash, see "Reuse" below; its
 * common cases, and those of the next item, on a short path of their own, free by slab
 * metadata: heap.c, hk_free_by_meta), a mid block, a large block, a foreign pointer, NULL, a
 * slab whose table entry another slab took (into the stash too), a full slab (hardened
 * build), and blocks marked free are validated in full.
 *
 * Two ways to free (not in the hardened build): where threads free each other's blocks at
 * random, whether a free finds its slab in the table is a coin toss, and free's first branch
 * mispredicts about once a miss (about 20 cycles, then the second try). A thread whose frees
 * missed its table a quarter of the time or more since its last tick (heap.c,
 * hk_heap_choose_free, from counts its slow paths keep: the fast path counts nothing, the
 * room it uses tells how many frees it took) frees by slab metadata: free's view of the
 * table (ftab) becomes an entry that admits nothing, and every free takes the second try,
 * its own blocks too, whose branches then go the same way whoever's block it is (the
 * longer path costs its own frees about 8 cycles each). Below an eighth of its frees being
 * other threads', it frees by its table again: single-threaded programs never leave it.
 * shared_swap (2 threads, 1,000 slots, both on one core): 3.5e7 steps/s freeing by the
 * table, 4.3e7 now (tcmalloc 5.4e7); 2 threads on 2 cores, 100,000 slots: 1.05 times as
 * fast.
 *
 * Accounting (DESIGN invariant 1): slab->used counts the carved blocks that are not on
 * slab->free, i.e. held by users, by a thread's cache, or waiting in a batch or an inbox. A
 * cache holds what its last refill put there (the current slab's free list, or a carve) and
 * at most a room's worth of blocks more, of any slab, so it is bounded, and a slab has used
 * == its exact live count plus the blocks of it the caches hold: it is empty the moment the
 * last of them goes home (hk_heap_slab_live counts the calling thread's cache out; tests that
 * count slabs exactly send the caches home first, hk_heap_flush). A block on a side list
 * (heap.c, "Side lists") is counted as a cached one: a slab with a side list empties when the
 * last of its blocks is pushed there, or when its side list goes back.
 *
 * Reuse (the room): a refill sets room[c] to the class's full room, HK_ROOM_BYTES of blocks
 * (HK_ROOM_MIN to HK_ROOM_MAX) at first, more for a class the thread allocates and frees in
 * waves longer than that (room.h, HK_ROOM_GROW_BYTES); each block free puts into the cache takes
 * 1, and malloc counts each block it takes in taken[c] (apart: a count both change would chain
 * each free to the malloc before it through memory). When the room runs out, the blocks malloc
 * took are given back as room (up to the full room); if that leaves none (malloc took nothing
 * meanwhile: the thread frees the class without reusing it), the whole cache goes home in one
 * walk (hk_heap_cache_full), with those of the other classes torn down so (heap.c,
 * hk_heap_torn_walk): to the current slab's free list, the thread's other slabs, or
 * other threads; the class's slabs get side lists, which free pushes onto from then on (heap.c,
 * "Side lists"); and the room is an eighth of the full one (HK_ROOM_TORN blocks at most)
 * until malloc takes blocks again, when what the cache still holds goes home at the next
 * refill of another class (heap.c, hk_heap_torn_home) (for
 * blocks above 512 bytes, whose rooms are a few blocks, the newest half goes, as the room's
 * half; for a class the thread has never allocated, everything goes and the room is 8
 * blocks, HK_ROOM_FREER). So the cache follows what the thread allocates, as a tcmalloc
 * thread cache does: a thread whose mallocs and frees of a class balance reuses every block
 * it frees, last freed first, and one that frees more than it allocates sends the surplus
 * home in batches. Before, a free to another of the thread's slabs than the current one went
 * onto that slab's free list, to be handed out only once the slab was current again, its
 * lines long cold (scatter, blocks of 8 bytes to 16 KiB, 4 to 64 to a slab: 1.2 times the
 * speed now). A valid small block that
 * the owned-slab table misses goes into the cache the same way (the stash) if the thread
 * allocates its class (it has a current slab of it), and so does another live thread's mid
 * block of up to 64 KiB, up to HK_MID_ROOM_BYTES of the class: its owner may not run for a
 * while, and a block
 * waiting in an inbox is memory nobody can use (16 threads on 2 cores sharing blocks of 64
 * KiB..1 MiB: 200-290 MB waited in inboxes beside 354 MB live). The thread's own mid frees
 * go to their span, where it can empty, but where the thread allocates the class again after
 * a free: then free's fast path keeps the blocks of its current span in the class's cache
 * where 8 classes of 40 to 224 KiB are concerned (room.h, HK_MID_OWN_BYTES, its room), and
 * its slow path keeps the last one freed of each class (up to 1 MiB in all), for the thread's
 * next malloc of the class (heap.c, hk_mid_keep). A small block stashed is another thread's (not
 * one of a slab adopted from an exited thread: a thread that inherited another's data frees
 * each of those once, and stashing would make each a block of another thread's slab for the
 * rest of its life, every free of it a slow one; larson with 16 threads), or one of this
 * thread's whose entry another slab took. Beyond the room, blocks go home: to their slab, or in
 * batches to their owner; a block of 1,280 bytes or more of a class the thread has allocated
 * joins the class's transfer list instead, for any thread's next refill (transfer.h; a small
 * one with others of its class, a batch at a time). A class that sat idle for a
 * tick (10 ms of slow-path activity without a refill of it or a change to its cache), or that
 * has no current slab, gives its cache back; so do trim and thread exit. Not in the hardened
 * build, whose caches hold blocks of the current slab only (its link check requires it) and
 * which stashes nothing.
 *
 * Changes to slab state (free lists, counts, heap lists) happen with the heap marked busy,
 * so that another thread may apply the inbox of an idle owner (heap.c, "Idle owners"). Free's
 * fast path changes none (it pushes onto the thread's cache, which helpers leave alone), so
 * it does not mark the heap; the hardened build's, which takes from a slab's count, stores
 * busy, checks that no helper has claimed the heap (a flag in the heap itself, so the check
 * is one load), and clears busy.
 *
 * Footprint: a class whose cache and current slab have not changed for the purge delay, as
 * the thread's ticks see them, gives its cache back to the slab and the slab up (to the
 * heap's lists, or kept or released if it is empty), so that a thread that used many classes
 * briefly does not hold a slab of each for ever. A thread that has just left 4 MiB or more
 * idle within a tick (heap.c, HK_BEAT_BYTES) has its rooms beat (HK_ROOM_BEAT) for the purge
 * delay, so that a slow path that looks at the clock, and may run the tick that releases
 * that memory, is at most twice that many frees of a class away.
 *
 * Retention (the soft cap): a slab that empties is kept by the thread, up to the policy's
 * soft cap for its class, if the thread has allocated the class, and reused before any
 * other; one more goes to the pool. Where a mid class's cap is 0, a span that other threads'
 * frees emptied (applied from the thread's inbox) is kept all the same, one per class, for a
 * tick or two (hk_heap_keep).
 * Kept slabs go to the pool once idle for the purge delay (checked on the thread's slow
 * paths), beyond the cap at a tick, those kept before the last tick of a class not
 * refilled since when the thread takes a slab of another class from the pool (to the pool
 * proper, for that class to reuse: heap.c, hk_heap_unretain_idle), on malloc_trim, and at
 * thread exit, when the cache is returned to its slab, empty slabs are released and the
 * rest is handed over whole to the next thread that sets up a heap (heap.c, "Handover"), or
 * orphaned (orphan.h) if none takes it soon. */
#ifndef HK_HEAP_H
#define HK_HEAP_H

#include "block.h"
#ifdef HK_HARDENED
#include "guard.h"
#endif
#include "owner.h"
#include "size_class.h"
#include "superslab.h"
#include "transfer.h"

/* Owned-slab table entries a thread starts with (a power of two), in its heap record: 64
 * entries (2 KiB, and 512 bytes for their slabs) hold 4 MiB of small slabs, and keep the
 * record within 3 pages, which every thread has resident however little it allocates (512
 * entries made it 8 pages, 6 of them resident in a thread of one block: 1,000 threads of
 * bench/crowd, 8 blocks each, peaked at 75 MiB, and at 56 MiB with 64). A thread that owns
 * more slabs than that moves to a larger table, mapped apart (owned.c, hk_owned_grow): 4 times
 * larger each time a quarter of the table's size of its frees miss their slab's entry for
 * another's, or of its slabs take each other's entries, within a tick, up to HK_OWNED_MAX
 * entries (8 MiB, and 2 MiB for their slabs: 16 GiB of small slabs). With a table too small,
 * a thread that held 480 MB of small blocks and freed them in random order sent half its
 * frees to the slow path and spent 98 ns a free, against 57 ns with every slab in the
 * table. */
#define HK_OWNED 64
#define HK_OWNED_MAX ((size_t)1 << 18)
/* The table grows only where those misses are 1 in this many of the thread's small frees or
 * more (owned.c, hk_owned_missed): some 100 slabs share a few entries in a table of any size. */
#define HK_OWNED_MISS_SHARE 16
/* The largest table a heap record keeps when it moves to another, or its thread exits, for its
 * next growth (owned.c, hk_owned_grow): 40 KiB. */
#define HK_OWNED_SPARE ((size_t)1 << 10)

/* One of the thread's small slabs (not kept empty; in the hardened build not full either), in
 * entry (base >> 16) % (the table's size); a slab whose entry another took is freed to by the
 * slow path (and so is a full one in the hardened build). */
struct hk_owned {
    uintptr_t base; /* the slab's first byte */
    uint64_t lim;   /* the bytes carved from it times mul, modulo 2^64 (0: the entry is
                     * empty): p is a carved block start when (p - base) * mul < lim */
    void **head;    /* where a freed block goes: the cache of its class (the hardened build:
                     * that for the current slab, else the slab's free list) */
    uint64_t mul;   /* HK_BLOCK_MUL of its class size */
};
/* 32 bytes, so that free finds its entry with a shift and a mask (a multiply by 5 before):
 * the slab itself, which only slow paths read, is kept beside the table (owned_slab). */
_Static_assert(sizeof(struct hk_owned) == 32, "owned-slab entries are 32 bytes");

/* A thread's first blocks of a small class come from the class's shared slab (orphan.h) only
 * while more than this many threads have heaps: a slab a class costs each thread a page or
 * two, which matters where threads are many, and its own slabs keep its blocks beside its
 * own (a write past one of them lands in the thread's own cache, where malloc finds it). */
#define HK_SHARE_THREADS 32

/* Remote frees are collected per destination owner and handed over a batch at a time, with
 * one CAS (owner.h): a batch goes when it holds HK_BATCH_BLOCKS blocks or HK_BATCH_BYTES
 * bytes, when its entry is wanted for another owner, when the thread refills, trims or
 * exits. So at most HK_BATCHES * HK_BATCH_BYTES of a thread's remote frees wait in it. */
#define HK_BATCHES 8
#define HK_BATCH_BLOCKS 32
#define HK_BATCH_BYTES (64u * 1024)

/* Blocks of orphans (slabs whose owner exited) wait in a batch of their own, filled on a
 * short path of free's slow path (heap.c, hk_orphan_fast): it goes with the others (at a
 * refill, trim or exit) or at HK_ORPHAN_BATCH_BLOCKS blocks or HK_ORPHAN_BATCH_BYTES bytes.
 * It is kept as a list per small class, and orphan.c takes each lock stripe once for all of
 * them; blocks of one slab that follow each other in a list join its free list at once. So a
 * thread that frees what exited threads allocated one after another (their results, in
 * order) frees whole runs of a slab at a time. Nobody waits for an orphan's blocks as an
 * owner waits for its inbox, so its bounds are 8 times the others': with 16 threads leaving
 * 1,000 blocks each to the main thread (thread_churn 16 300 2000 16 3072 42 main), the
 * orphans' stripes were taken 2.41 million times with batches of 32, and 1.00 million with
 * 256. */
#define HK_ORPHAN_BATCH_BLOCKS 256
#define HK_ORPHAN_BATCH_BYTES (512u * 1024)

struct hk_batch {
    struct hk_owner *to; /* the owner of every block here (at the time of its free) */
    void *head[HK_LANES], *tail[HK_LANES]; /* the blocks dealt out to the inbox's lanes, linked
                                            * and marked free, for hk_owner_push_list */
    uint32_t n, bytes;
};

/* A heap record lies in two parts (record.h). The first page holds what every thread
 * writes: the fast paths' caches and rooms, and the flags and counts its slow paths,
 * tick and exit keep. The rest holds what a thread writes only once it owns slabs or sends
 * blocks to other threads: its slab lists, owned-slab table, batches and tick history. A
 * thread that takes a few blocks from the shared slabs (orphan.h) and waits, as a thousand
 * threads of a server may, writes only the first page: the rest of a new record stays the
 * zero page, and a record used again is cleared only where it was written. Fields that hold
 * anything but zero in hk_heap_none lie in the first page too. */
struct hk_heap {
    /* --- the first page ------------------------------------------------------------------ */
    void *free[HK_NCLASS + 1];            /* the caches: fast-path free lists */
    /* How many more blocks free may put into the cache of each class (see "Reuse"): set at
     * a refill, 1 less for each block freed into it, made up from taken[] when it runs out. It
     * lies one array after free[], so that an owned-slab entry's head leads to both. */
    intptr_t room[HK_NCLASS + 1];
    /* Room of each class not on the counter above: what was put aside when the room was last
     * set (beyond HK_ROOM_BEAT), and a block for each one malloc's fast path took since,
     * which makes room for one more free. Put on the counter when it runs out
     * (hk_heap_cache_full). */
    uintptr_t taken[HK_NCLASS + 1];
    /* The slab of each entry of otab below (NULL: none). Free's fast path sees the table
     * through the thread's hk_tls.ftab and fmask (see struct hk_tls). */
    struct hk_slab **oslab;
    _Atomic unsigned char busy;           /* changing slab state (see above) */
    _Atomic unsigned char claimed;        /* set by a helper that has claimed this heap
                                           * (heap.c, "Idle owners"): wait for it */
    uint8_t hooked;                       /* the thread-exit hook will tear this heap down */
    uint8_t exiting;                      /* torn down once: the thread is exiting */
    uint8_t no_stash;                     /* trim or teardown under way: nothing is stashed */
    uint8_t free_any;                     /* frees by slab metadata (see "Two ways to free") */
    uint8_t take_ok;                      /* caches may take blocks (heap.c, hk_heap_may_take) */
    uint8_t no_xfer;                      /* trim, or transfer lists going home: none is used */
    uint8_t draining;                     /* applying its own inbox (heap.c, hk_heap_keep) */
    uint8_t parting;                      /* its thread's exit hook ran (heap records) */
    uint8_t rest_written;                 /* a field past this page was written, by this
                                           * record's thread or one before it: a record
                                           * used again clears them, and is taken before
                                           * one never written (heap records) */
    unsigned char flushed;                /* a free sent a batch away or stashed: count it for
                                           * the tick */
    struct hk_owner *owner;               /* NULL until the first slow-path call */
    /* The owned-slab table: entry (p >> 16) % n of otab, n a power of two, is where free's
     * fast path looks for p's slab (through ftab above); omask is (n - 1) * 32, the entry's
     * byte offset in the table taken from p >> 11. Until the heap is set up, otab is
     * hk_owned_none, whose one entry admits nothing; then owned[] below; and a mapping of its
     * own once the thread owns more slabs than that holds. */
    struct hk_owned *otab;
    uintptr_t omask;
    /* A mapped table of ospare_n entries that the record keeps for its next growth (heap.c,
     * hk_owned_grow), or NULL and 0. */
    struct hk_owned *ospare;
    size_t ospare_n;
    /* The storage of its side lists (side.h; heap.c, "Side lists"), mapped at their first
     * use and kept with the record like the spare table (no slot is in use when a thread
     * leaves the record), and the classes that have slabs on them (the default build). */
    struct hk_side *side;
    uint64_t side_classes;
    uint64_t next_tick;                   /* hk_now_ms at which the next tick is due */
    uint16_t tick_countdown;              /* slow-path events until the clock is read again */
    uint16_t mid_countdown;               /* kept mid frees until then (hk_heap_free_mid) */
    uint32_t omiss;                       /* misses of the owned-slab table since the last
                                           * tick or growth (owned.c, hk_owned_missed) */
    uint32_t ogrow_at;                    /* omiss at which the table is weighed for growth */
    unsigned batch_mask;                  /* entries of batch[] that hold blocks */
    uint64_t ofrees;                      /* small frees counted then (hk_small_frees) */
    uint64_t rng;                         /* hk_heap_random's state (0 until first used) */
    uint64_t refilled;                    /* classes refilled since the last tick (bits) */
    uint64_t gave_up;                     /* classes an emptied slab of which went to the pool
                                           * past the soft cap (heap.c, hk_heap_emptied)... */
    uint64_t gave_up_at;                  /* ...since this time (ms), the last of them */
    uint64_t allocated;                   /* classes the thread has ever refilled (a bit each) */
    uint64_t retained_mask;               /* classes with retained slabs */
    uint64_t mid_kept;                    /* mid classes whose cache may hold a block of the
                                           * thread's own spans (heap.c, hk_mid_keep) */
    uint64_t mid_freed, mid_reuse;        /* mid classes it freed to their spans since their
                                           * last refill; those it keeps blocks of */
    /* Blocks of classes of one block a span borrowed from the large tier (malloc.c,
     * hk_mid_borrow): the last one, until the thread's next request of such a class; and a
     * score, up HK_BORROW_DIED for each block the thread freed before that request, down
     * one for each that outlived it, reset at the tick. A thread whose borrowed blocks die
     * that young is served best by its cache, which a large block never joins. */
    void *borrowed;
    unsigned borrow_score;
    /* Classes of which the heap may hold slabs (current, partial, full or kept): a bit set
     * when one joins it, all cleared when it is handed over. Slow paths read a class's slab
     * lists only where its bit is set (heap.c, hk_heap_cur), so that a thread that owns no
     * slab reads nothing beyond this page: on a kernel that gives a read of an untouched page
     * a page of its own, as this one does, reading is touching. */
    uint64_t slabbed;
    struct hk_owner *give_up;             /* a parked record this thread's frees flooded
                                           * (heap.c, hk_heap_give_up_wanted) */
    struct hk_owner *park_to;             /* the parked record its frees went to last (only
                                           * compared: it may be recycled meanwhile) */
    uint32_t park_mine, park_mine_kib;    /* blocks they brought it since, and their KiB */
    /* Heap records (record.c): once the thread's exit hook ran (parting), the thread's id; and
     * the next on the list of free or of parting records. */
    int tid;
    struct hk_heap *next_record;
    /* When the thread last left memory idle for the pools to release (a slab emptied, a large
     * block freed), once it left HK_BEAT_BYTES within a tick, net of what it took back
     * (left_idle counts them); 0 when that was longer than the purge delay ago: meanwhile its
     * rooms beat (HK_ROOM_BEAT). */
    uint64_t beat_since;
    intptr_t left_idle;
    /* Orphans' blocks on their way (see above): a list per small class, linked and marked
     * free, with the classes that have one in oclasses; orphan_n and orphan_bytes count them.
     * Here because a thread that took shared blocks frees them this way. */
    void *olist[HK_NSMALL];
    uint64_t oclasses;
    uint32_t orphan_n, orphan_bytes;
#ifndef HK_HARDENED
    uint64_t xpend_mask; /* classes with blocks in xpend[] below */
    uint64_t room_sent;  /* classes whose cache sent blocks home since their last refill */
    uint32_t room_grown; /* bytes all rooms have grown by, at most HK_ROOM_GROWN_MAX */
    uint64_t room_set;   /* classes whose room has been set (room.c, hk_rooms_used) */
    /* Frees that rooms running out may still take before hk_heap_cache_full looks at the
     * clock, and what each class's room last put on free's counter. */
    intptr_t beat_left;
    uint16_t room_given[HK_NCLASS + 1];
    /* How much each class's full room for this thread (see "Reuse") has grown beyond its
     * first, hk_room_max (hk_room_grow): the full room is the sum (room.h, hk_room_full). */
    uint16_t room_more[HK_NCLASS];
    /* Since the last choice between the two ways to free (see "Two ways to free"): the room
     * that frees used up before its last setting, the small frees that free's second try
     * refused, and the blocks of those that slow paths put into a cache all the same. */
    uint64_t fused, frefused, fpushed;
    uint64_t ftaken;      /* blocks free's second try took, ever, counted a countdown at a
                           * time when it looks at the clock (off by fewer than 96) */
    int32_t fclock;       /* blocks it takes before the one that looks at the clock */
    uint32_t fperiod;     /* blocks of the countdown now running (32 to 95) */
    uint64_t ftaken_seen; /* ftaken at the last choice */
    uint32_t fown;        /* of the second try's frees since then, those of the thread's slabs:
                           * its refusals exactly, its takes by one sample a countdown */
    uint64_t fused_seen;  /* room used since its last setting, as the last choice saw it */
    /* Blocks of each small class that the thread took from the class's shared slab (orphan.h,
     * hk_orphan_share), up to HAKMEM_SHARED_BLOCKS; set when a thread sets the heap up: 0, or
     * UINT8_MAX for a class in outgrew below. */
    uint8_t shared_n[HK_NSMALL];
    /* Classes of which the thread took a slab of its own (hk_heap_fill), or its predecessor
     * did, where it took over an exited thread's heap: it takes no shared blocks of them. */
    uint64_t outgrew;
    /* Classes torn down since their last refill (heap.c, hk_heap_torn_home). */
    uint64_t torn;
#endif
    /* This thread's tag, 1..255, drawn in turn as it sets its heap up: a slab's free list
     * made of its own frees alone carries it (superslab.h, list_tag). Two threads may share
     * one: a list the other made (a heap taken over) is then ordered too, from a bitmap as
     * whole as any, its blocks written where their lines lie in the other core's cache. */
    uint8_t tag;
    /* --- the rest: slabs of its own, other threads' blocks ------------------------------- */
    struct hk_slab *cur[HK_NCLASS + 1] __attribute__((aligned(4096))); /* current slab per
                                                                        * class */
    struct hk_slab *partial[HK_NCLASS];   /* owned slabs with free blocks, oldest first */
    struct hk_slab *partial_tail[HK_NCLASS];
    struct hk_slab *full[HK_NCLASS];      /* owned slabs without */
    struct hk_slab *retained[HK_NCLASS];  /* owned empty slabs, most recently emptied first */
    uint16_t nretained[HK_NCLASS];
    /* Each class's current slab and cache as the last tick saw them, and since when they
     * have not changed: a class quiet for the purge delay lets its current slab go. */
    void *seen_head[HK_NCLASS];
    uint32_t seen_used[HK_NCLASS];
    uint64_t quiet_since[HK_NCLASS];
    struct hk_owned owned[HK_OWNED];      /* the first owned-slab table */
    struct hk_slab *owned_slab[HK_OWNED]; /* the slab of each of its entries */
    uint8_t carves[HK_NSMALL];            /* carves of the class so far, until its batch is
                                           * whole (carve.h, hk_heap_carve) */
    /* The first block of the thread's last carve of a fresh slab (carve.h, hk_heap_carve):
     * nothing has been written to it but its first two words. calloc, when the block it gets
     * is this one and the carve happened within its call, clears only those, and realloc
     * fills the pages its copy will write in one call (malloc.c). */
    void *zero_block;
    struct hk_batch batch[HK_BATCHES];    /* remote frees on their way, by owner */
#ifndef HK_HARDENED
    /* Other threads' blocks of the small classes with transfer lists, on their way to the
     * class's list (heap.c, hk_xpend_add): a list per class, linked and marked free, with the
     * classes that have one in xpend_mask (above). */
    void *xpend[HK_NSMALL - HK_XFER_FIRST];
    uint8_t xpend_n[HK_NSMALL - HK_XFER_FIRST];
#endif
};

/* retained_mask, refilled, allocated and room_sent hold a bit per class. */
_Static_assert(HK_NCLASS <= 64, "a class bitmask is 64 bits");

/* Notes that h's fields past its first page are being written (see rest_written). */
static inline void hk_heap_rest_written(struct hk_heap *h) { h->rest_written = 1; }

/* The heap's xorshift generator: the hardened build's carve order, free's countdowns. */
static inline uint64_t hk_heap_random(struct hk_heap *h) {
    if (h->rng == 0) h->rng = (hk_secret.guard ^ (uintptr_t)h) | 1;
    h->rng ^= h->rng << 13;
    h->rng ^= h->rng >> 7;
    h->rng ^= h->rng << 17;
    return h->rng;
}

/* What each thread keeps in its own static TLS: a pointer to its heap and free's view of the
 * owned-slab table, 24 bytes. The heap itself (about 12 KiB) is a record mapped apart
 * (record.h): glibc carves a thread's static TLS out of its stack, and refuses to start a
 * thread whose stack cannot hold it (pthread_create fails with EINVAL): with the
 * heap in TLS, no thread of 32 KiB of stack or less could start (Node.js's inspector thread
 * asks for 16 KiB), and one of 64 KiB kept half of it. The fast paths pay a load: malloc
 * reads the pointer where it added the TLS base (the same count of instructions), free reads
 * ftab and fmask from TLS as it did. */
struct hk_tls {
    struct hk_heap *heap;   /* the thread's heap record; until it has one, hk_heap_none, whose
                             * caches are empty and which is never written */
    /* The owned-slab table as free's fast path sees it: the heap's otab and omask, or, while
     * the thread frees by slab metadata (see "Two ways to free") or has no heap set up,
     * hk_owned_none and 0, which admit nothing. Written by the thread itself only. */
    struct hk_owned *ftab;
    uintptr_t fmask;
};
extern HK_TLS struct hk_tls hk_tls HK_INTERNAL;
/* The owned-slab table of a heap not set up yet: one entry, empty. */
extern const struct hk_owned hk_owned_none HK_INTERNAL;

/* The entry that address a falls to in table t of mask m (omask's form). */
static inline struct hk_owned *hk_owned_in(struct hk_owned *t, uintptr_t m, uintptr_t a) {
    return (struct hk_owned *)((uintptr_t)t + ((a >> (HK_SLAB_SHIFT - 5)) & m));
}
/* The entry of the owned-slab table that address a falls to. */
static inline struct hk_owned *hk_owned_at(const struct hk_heap *h, uintptr_t a) {
    return hk_owned_in(h->otab, h->omask, a);
}
/* The same as free's fast path sees it (an entry that admits nothing while the thread frees
 * by slab metadata). */
static inline const struct hk_owned *hk_free_entry(uintptr_t a) {
    return hk_owned_in(hk_tls.ftab, hk_tls.fmask, a);
}
/* Whether p is a carved block start of the small slab of entry e (one of the calling thread's
 * own, as free's view of the table shows it) and not marked free: what free's fast path takes
 * (malloc.c), and realloc's. */
static inline int hk_owned_block(const struct hk_owned *e, const void *p, uintptr_t mark) {
    return ((uintptr_t)p - e->base) * e->mul < e->lim && !hk_marked_as(p, mark);
}
#ifndef HK_HARDENED
/* The class whose cache entry e of the calling thread's heap h leads to, which is that of the
 * blocks of the entry's slab; HK_NCLASS or more where the entry leads elsewhere (to the slab's
 * side list: its metadata says). Without the slab's metadata: redis asks the size of each
 * block it allocates and frees (its memory count), and the slab's line was a cache miss on
 * most of those calls, where the entry and the heap's first page are in cache (free's fast
 * path reads them). */
static inline uintptr_t hk_owned_class(const struct hk_heap *h, const struct hk_owned *e) {
    return ((uintptr_t)e->head - (uintptr_t)h->free) / sizeof(void *);
}
#endif
/* Whether the calling thread frees by slab metadata now (see "Two ways to free"); for tests. */
int hk_heap_frees_by_meta(void) HK_INTERNAL;

/* malloc slow path for class c: refills the cache, then pops. NULL with ENOMEM on failure. */
void *hk_heap_refill(unsigned c) HK_INTERNAL;
/* malloc's slow path for a request of n <= HK_TABLE_MAX bytes (counted when hk_counting). */
void *hk_heap_refill_size(size_t n) HK_INTERNAL;
/* Counts an allocation of class c made by the calling thread (when hk_counting). */
void hk_heap_count_alloc(unsigned c) HK_INTERNAL;
/* Counts a large block allocated (alloc) or freed by the calling thread (when hk_counting). */
void hk_heap_count_large(int alloc) HK_INTERNAL;
/* free of anything the fast path did not take: validates p, then frees it locally, remotely,
 * as an orphan's block or as a large block, or reports it (naming free, which free_sized and
 * free_aligned_sized reach too). */
void hk_heap_free_slow(void *p) HK_INTERNAL;
#ifdef HK_HARDENED
#define HK_GUARD_BEFORE 3 /* the block before p has a broken trailer */
/* Reports what hk_heap_guard_free found (HK_GUARD_IS_FREE, _BROKEN or HK_GUARD_BEFORE). */
void hk_heap_guard_fail(void *p, int what, const char *op) HK_INTERNAL HK_COLD;

/* Checks the guards of block p (bsize bytes, off bytes into its slab) as it is freed (guard.h):
 * reports what is wrong and returns 0, or marks the block's trailer free and returns 1. */
static inline int hk_heap_guard_free(void *p, size_t bsize, size_t off, const char *op) {
    size_t n;
    int g = hk_guard_check(p, bsize, &n);
    if (HK_UNLIKELY(g != HK_GUARD_OK)) {
        hk_heap_guard_fail(p, g, op);
        return 0;
    }
    if (HK_UNLIKELY(off >= bsize && !hk_guard_trailer_ok((char *)p - bsize, bsize))) {
        hk_heap_guard_fail(p, HK_GUARD_BEFORE, op);
        return 0;
    }
    hk_guard_trailer_set(p, bsize, HK_GUARD_FREE);
    return 1;
}
#endif
/* Sends the calling thread's caches and batches home, applies its inbox and sends every
 * transfer list's blocks home (transfer.h), so that every slab whose blocks are all free is
 * empty (the first half of malloc_trim; for tests that count slabs exactly). */
void hk_heap_flush(void) HK_INTERNAL;
/* Gives up every heap that exited threads handed over and no thread has taken (heap.c,
 * "Handover"): their slabs go to the pool or the orphans. Flush and trim do it too; for
 * tests that want an exited thread's slabs orphaned now (a thread without a heap sets one
 * up first, which takes the newest). */
void hk_heap_give_up_all(void) HK_INTERNAL;
/* For tests: what a thread does after a time, held off while its bit is set in `what` (0, the
 * default, holds nothing). HK_HOLD_PARKED: giving up a parked heap (HK_PARK_MS, 20 ms);
 * HK_HOLD_IDLE: letting an idle owner's partial slabs go (HK_IDLE_MS, 40 ms). Tests that check
 * who takes a parked heap, or what a helper leaves, must not depend on how a loaded machine
 * spaces their threads' steps. */
enum { HK_HOLD_PARKED = 1, HK_HOLD_IDLE = 2 };
void hk_heap_hold(unsigned what) HK_INTERNAL;
/* Gives the calling thread's kept empty slabs to the pool (malloc_trim). */
void hk_heap_trim(void) HK_INTERNAL;

/* Whether link n, read from free block b of class c's cache, may be followed. A write to a
 * free block (after its free, or past the end of the block before it) overwrites the link;
 * following it would hand out memory of the writer's choosing. The default build checks what
 * is free: a link is 16-byte aligned (as glibc's tcache checks); the hardened build checks
 * that it leads to a block start of the same slab (the cache holds blocks of the current
 * slab only; a mid class's holds one block), and its links are encoded (block.h). */
static inline int hk_link_ok(const void *b, const void *n, unsigned c) {
#ifdef HK_HARDENED
    uintptr_t x = (uintptr_t)n;
    if (x == 0) return 1;
    if (c >= HK_NSMALL || ((x ^ (uintptr_t)b) >> HK_SLAB_SHIFT) != 0) return 0;
    return (uint32_t)(x & (HK_SLAB_SIZE - 1)) * hk_class_div[c] <= HK_BLOCK_START_MAX;
#else
    (void)b;
    (void)c;
    return ((uintptr_t)n & 15) == 0;
#endif
}

/* hk_link_ok for a class known to be small (c < HK_NSMALL). */
static inline int hk_link_ok_small(const void *b, const void *n, unsigned c) {
    if (c >= HK_NSMALL) __builtin_unreachable();
    return hk_link_ok(b, n, c);
}

/* Reports the cache of class c as corrupt at block b; then (with HAKMEM_ON_ERROR=warn: by
 * default the report aborts) drops the cache and allocates from a refill. */
void *hk_heap_corrupt(unsigned c, void *b) HK_INTERNAL HK_COLD;
/* The same for the class of a request of n <= HK_TABLE_MAX bytes
 * (malloc's fast path: it keeps n, not the class, at hand for the call). */
void *hk_heap_corrupt_size(size_t n, void *b) HK_INTERNAL HK_COLD;


#ifdef HK_HARDENED
/* Slab s, not current, has just lost its last live block on free's fast path, with the heap
 * busy: handles it and clears busy. */
void hk_heap_free_emptied(struct hk_slab *s) HK_INTERNAL HK_COLD;
/* free of block start p of small slab s, which the calling thread owns, off its fast path:
 * waits for a helper that has claimed the heap, then frees. */
void hk_heap_free_owned(struct hk_slab *s, void *p) HK_INTERNAL;
#endif

#ifndef HK_HARDENED
/* The cache whose first entry is head has run out of room: sends its newest blocks home. */
void hk_heap_cache_full(void **head) HK_INTERNAL HK_COLD;

/* free of block start p of the small slab of entry e, which the calling thread owns, full or
 * not: pushes p onto the cache of its class, whichever of the thread's slabs it is of, or onto
 * the slab's side list where it has one (heap.c, "Side lists"); its slab goes on counting it,
 * and the room (the side list's count) bounds how many the cache (the side list) holds. No slab state
 * changes here, so a helper applying this thread's inbox meanwhile ("Idle owners" in heap.c)
 * is no concern: a helper leaves the caches and rooms alone, and writes to the owned-slab
 * table only to clear the entry of a slab it empties, whose blocks are all free, so no valid
 * free reads that entry. */
static inline void hk_heap_free_fast(const struct hk_owned *e, void *p, uintptr_t mark) {
    void **head = e->head;
    hk_link_set(p, *head);
    hk_mark_as(p, mark);
    *head = p;
    /* A class's room is at least 1 whenever its table has an entry (a refill sets it before
     * the first, an entry given to a slab taken over sets it, and it is made up at 0), so 0
     * is the only bound to test, which is a single read-modify-write and a branch on its
     * flags. */
    if (HK_UNLIKELY(--*(intptr_t *)(head + HK_NCLASS + 1) == 0)) hk_heap_cache_full(head);
}
#else
/* free of block start p of the small slab of entry e, which the calling thread owns (a full
 * slab has no entry: its first free takes the slow path, which makes it partial): pushes p as
 * entry e
 * says, with the heap busy. 0, with nothing done, when a helper has claimed the heap
 * (hk_heap_free_owned then). */
static inline int hk_heap_free_fast(struct hk_heap *h, const struct hk_owned *e, void *p,
                                    uintptr_t mark) {
    atomic_store_explicit(&h->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the helper's membarrier orders store and load */
    if (HK_UNLIKELY(atomic_load_explicit(&h->claimed, memory_order_acquire))) {
        atomic_store_explicit(&h->busy, 0, memory_order_release);
        return 0;
    }
    void **head = e->head;
    hk_link_set(p, *head);
    hk_mark_as(p, mark);
    *head = p;
    struct hk_slab *s = h->oslab[e - hk_tls.ftab];
    uint32_t u = s->used - (e->head == &s->free);
    s->used = u;
    if (HK_UNLIKELY(u == 0)) {
        hk_heap_free_emptied(s); /* clears busy: nothing here outlives the call */
        return 1;
    }
    atomic_store_explicit(&h->busy, 0, memory_order_release);
    return 1;
}
#endif

/* The calling thread's heap, for the fast paths: its record, or hk_heap_none (whose caches
 * are empty, so that a fast path on it goes to the slow path, which takes a record). By its
 * plain address, as free pushes onto a cache through the owned-slab entry's head: a malloc
 * that popped the same cache through the thread pointer's segment (%fs) waited for that store
 * to reach it the slow way on the Intel machine of 2026-11-25 (tight 32: 4.8 ns a pair, 2.7 ns
 * by the plain address). */
static inline struct hk_heap *hk_heap_here(void) { return hk_tls.heap; }

/* Block b, the head of class c's cache whose link n was checked, is taken: n becomes the
 * head, malloc's count of the class goes up (see "Reuse") and b's free mark is cleared. */
static inline void hk_heap_took(struct hk_heap *h, unsigned c, void *b, void *n) {
    h->free[c] = n;
    h->taken[c]++;
    hk_mark_live(b);
}

/* Pops a block of class c, refilling if needed. */
static inline void *hk_heap_alloc(unsigned c) {
    struct hk_heap *h = hk_heap_here();
    void *b = h->free[c];
    if (HK_LIKELY(b != NULL)) {
        void *n = hk_link_get(b);
        if (HK_UNLIKELY(!hk_link_ok(b, n, c))) return hk_heap_corrupt(c, b);
        hk_block_prefetch(n);
        hk_heap_took(h, c, b, n);
        return b;
    }
    return hk_heap_refill(c);
}

/* The calling thread has taken a large block: memory it may have left idle is in use again
 * (heap.c, hk_heap_beat). */
void hk_heap_large_taken(void) HK_INTERNAL;
/* Whether a malloc of class c (HK_MID_ONE and up, one block a span), which found the calling
 * thread's cache empty, may borrow a block from the large tier's resident free memory
 * (malloc.c, hk_mid_borrow): its refill would take a span from elsewhere (the thread holds
 * no span of the class with a block to give, the class's transfer list is empty), and the
 * blocks the thread borrowed since its last tick did not die young (the score, above). */
int hk_heap_may_borrow(unsigned c) HK_INTERNAL;
#define HK_BORROW_DIED 2u /* a borrowed block freed before its thread's next request */
#define HK_BORROW_STOP 8u /* the score at which a thread borrows no more until its tick */
/* The calling thread has borrowed block p. */
void hk_heap_borrowed(void *p) HK_INTERNAL;
/* The mid blocks the calling thread keeps for a malloc to come (heap.c, hk_mid_keep, and those
 * free's fast path cached) go home,
 * where their spans can empty. Before a request to the large tier, so that the spans'
 * SuperSlabs may serve it (large 300 64 32768 4 42, blocks of 64 KiB to 32 MiB: with the
 * blocks kept, 3.6% more page faults and a peak 3.5% higher); and for tests that follow a
 * span's state. */
void hk_heap_mid_home(void) HK_INTERNAL;

#ifndef HK_HARDENED
/* For tests of the walks home: while set, no slab gets a side list (heap.c, "Side lists"). */
extern int hk_side_off HK_INTERNAL;
#endif

/* Live blocks of slab s as the calling thread (its owner) sees them; for tests. */
uint32_t hk_heap_slab_live(const struct hk_slab *s) HK_INTERNAL;

#endif
