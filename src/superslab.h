/* SuperSlab: a 2 MiB region on a 2 MiB boundary, cut into 32 slots of 64 KiB.
 *
 * Slot 0 holds the SuperSlab header and the metadata of all 32 slots; slots 1..31 hold
 * blocks. A slab of a small class is one slot; a slab of a mid class (a span) is a run of
 * 5..16 contiguous slots, described by the metadata of its first slot (the head); every other
 * slot of the run names its head. Because of the alignment, the SuperSlab of any interior
 * pointer p is p & ~(HK_SS_SIZE-1), its slot is (p >> 16) & 31 and its slab is that slot's
 * head: pointer to metadata is pure arithmetic (DESIGN invariant 5). A byte map over the
 * whole 47-bit address space, one byte per 2 MiB chunk, says which chunks are SuperSlabs, so
 * free() of a foreign pointer is detected before anything is dereferenced. */
#ifndef HK_SUPERSLAB_H
#define HK_SUPERSLAB_H

#include <stdatomic.h>
#include <string.h>

#include "common.h"
#include "size_class.h"

#define HK_SS_SHIFT 21
#define HK_SS_SIZE ((size_t)1 << HK_SS_SHIFT)
#define HK_SLAB_SHIFT 16
#define HK_SLAB_SIZE ((size_t)1 << HK_SLAB_SHIFT)
#define HK_SLABS ((unsigned)(HK_SS_SIZE / HK_SLAB_SIZE))
#define HK_SS_MAGIC 0x68616b6d656d5353ull /* "hakmemSS" */

#define HK_MAP_BITS 26 /* 47-bit user addresses / 2 MiB chunks */
#define HK_MAP_ENTRIES ((uintptr_t)1 << HK_MAP_BITS)

/* Slot states in the shared pool (pool.h says who moves a slot between them):
 *   UNUSED   free, and its pages hold nothing (never touched, or released with madvise)
 *   ACTIVE   part of a slab that a thread owns (or an orphan), even an empty one it retains
 *   EMPTY    part of a free slab whose pages are still resident: reusable at once, and
 *            released once it has been idle long enough
 *   PURGING  its pages are being released right now; nobody may take it */
enum { HK_SLOT_UNUSED = 0, HK_SLOT_ACTIVE = 1, HK_SLOT_EMPTY = 2, HK_SLOT_PURGING = 3 };

/* Which list a slab is on: its owner heap's, the abandoned lists, or the pool's. */
enum {
    HK_LIST_NONE = 0,
    HK_LIST_CURRENT,        /* the owner's current slab for its class */
    HK_LIST_PARTIAL,        /* owned, has free blocks */
    HK_LIST_FULL,           /* owned, every carved block handed out */
    HK_LIST_RETAINED,       /* owned, no live block: kept by the thread for reuse */
    HK_LIST_ORPHAN_PARTIAL, /* abandoned by an exited thread, has free blocks */
    HK_LIST_ORPHAN_FULL,    /* abandoned, no free blocks */
    HK_LIST_POOL_EMPTY,     /* EMPTY slab on the pool's per-class list */
    HK_LIST_POOL_FRONT,     /* no live block, in the pool's front for its class (pool.c) */
    HK_LIST_SHARED,         /* no owner: its class's shared slab (orphan.h) */
    HK_LIST_SHARED_SPARE,   /* a shared slab carved to its end and emptied, kept for the next */
    HK_LIST_FULL_FREED,     /* on its owner's full list, freed to by the owner's walk under
                             * way, which moves it to the partial list at its end (heap.c) */
};

struct hk_owner;

/* Metadata of one slot; 128 bytes, so the slow paths reach it with a shift and a mask. The
 * fields from cls to inv describe a slab and are meaningful in its head slot only, but for
 * cls: a slot that heads no slab has none of the small classes (HK_CLS_NONE, set when its
 * slab goes back to the pool, or a mid class its span had), so that free, reading the class
 * of a pointer's own slot, knows a small block's slab without looking up its head (heap.c,
 * hk_free_by_meta; a small slab is one slot). */
/* Two cache lines: the first holds what other threads read to free into the slab (class,
 * geometry, owner) and what the pool changes, the second what the owner changes on every
 * free and refill, so that remote frees do not pull the line the owner keeps writing. */
struct hk_slab {
    /* --- read by any thread --- */
    uint8_t cls;       /* size class while ACTIVE, HK_CLS_NONE otherwise */
    uint8_t state;     /* HK_SLOT_* */
    uint8_t last_cls;  /* class it served last: the pool's stage-1 key (HK_CLS_NONE: none) */
    uint8_t head;      /* index of the slot heading this slot's slab (its own for a head) */
    uint8_t nslots;    /* slots in the slab (head only) */
    /* Other threads do not stash its blocks (heap.h, "Reuse"): set when the slab loses its
     * owner (an orphan, or given back) and when adopted from an exited thread, cleared when
     * formatted; so free's second try tests one byte, not the owner and a flag. A hint, read
     * racily. */
    uint8_t nostash;
    /* An orphan let go by a live, idle owner (heap.c, hk_heap_give_up_partial), not left by an
     * exited thread: its adopter serves its blocks as its own, and others stash them again.
     * Under the orphans' lock stripe; cleared when adopted or formatted. */
    uint8_t let_go;
    /* Served as its class's shared slab since it was formatted (orphan.h): its blocks lie in
     * every page of it, and go home at once when freed (heap.c, hk_was_shared, which reads
     * it racily). Set under the orphans' lock stripe; cleared when formatted. */
    uint8_t was_shared;
    uint32_t bsize;    /* block size */
    uint32_t capacity; /* blocks that fit */
    uint32_t carved;   /* blocks carved so far (carving is lazy, in batches) */
    uint32_t inv;      /* ceil(2^32 / bsize): block index by multiplication */
    _Atomic(struct hk_owner *) owner; /* owning thread's record; NULL when abandoned */
    /* When the slab last became empty (EMPTY, or retained by its owner), or, for an UNUSED
     * slot, when its pages were released (0: never used): milliseconds of hk_now_ms. */
    uint64_t idle_since;
    struct hk_slab *anext, *aprev;    /* the pool's age list of EMPTY slabs, oldest first */
    /* carved * bsize: the bytes carved, which a block must start below. Kept beside carved
     * so that free's second try (heap.c, hk_free_by_meta) tests it with one load, not two
     * and a multiplication. */
    uint32_t lim;
    /* The slot is UNUSED and its pages hold nothing: its SuperSlab was fresh memory when
     * mapped, or the pool released the slot's pages, and no slab has been made of it since
     * (cleared when one is, pool.c, hk_occupy). Under the pool's mutex. */
    uint8_t clean;
    /* The span has entries in its owner's owned-slab table (owned.c; 0: surely none), so that
     * a span that never had any leaves without a look at each of its slots' entries. Set and
     * cleared by the table's keeper; a table switched leaves it set, where it only costs that
     * look. */
    uint8_t entered;
    /* The slot of its owner's side lists (side.h) that free's fast path pushes its blocks
     * onto, plus one; 0: none. Changed by the owner on its slow paths, and read there and by
     * a helper holding the owner's heap (heap.c, "Side lists"); cleared when formatted. */
    uint16_t side;
    /* --- changed by the owner --- */
    uint8_t list;      /* HK_LIST_* */
    /* A slab made of clean slots (pool.c, hk_activate): its pages past what it has carved
     * hold nothing, so a small class's carve has them filled in one call, and a mid block
     * carved from it is zero but for its first two words (carve.h, hk_heap_carve; calloc). 0
     * once formatted again (a slab the pool takes back may hold pages of its last use). */
    uint8_t fresh;
    /* The tag of the thread whose own frees alone made the free list (heap.h, struct
     * hk_heap's tag), or 0 where any other thread's free is on it (applied from the owner's
     * inbox, an orphan's, a helper's): only a list of the taking thread's own is put in
     * address order when malloc takes it (heap.c, hk_list_in_order), from the slab's bitmap
     * of free blocks, which such a list keeps (a small slab's). Set as a block joins an empty
     * list (hk_list_joins), 0 when formatted; a list its thread took in order keeps it (its
     * bitmap clear: heap.c, hk_heap_fill). */
    uint8_t list_tag;
    /* Its bitmap of free blocks (struct hk_superslab, fbits) may hold bits of no list: cleared
     * before a list of a thread's own starts (hk_list_joins). Set when formatted, and when a
     * list is taken or emptied otherwise than through the bitmap. */
    uint8_t bits_dirty;
    uint32_t used;     /* carved blocks not on `free`: held by users or by the owner's cache */
    void *free;        /* local free list: the owner's (an orphan's: under its lock stripe) */
    struct hk_slab *next, *prev;      /* links of the list named by `list` */
    /* The size asked for with each mid block that starts in this slot (whichever span's slot
     * it is, head or not), in units of 64 bytes, rounded up (0: not known), by the half of
     * the slot it starts in (hk_mid_req). realloc copies that much, not the whole block,
     * which can be a quarter larger. Small slabs leave it alone. */
    uint16_t req64[2];
} __attribute__((aligned(64)));

#define HK_FBITS_WORDS (HK_SLAB_SIZE / 16 / 64) /* a slab's bitmap of free blocks, in words */

struct hk_superslab {
    uint64_t magic;
    struct hk_superslab *next, *prev; /* pool list: partial or cache */
    uint32_t nactive;                 /* ACTIVE slots (read without the pool lock as a hint) */
    uint32_t avail;                   /* bit i: slot i is UNUSED or EMPTY (can be taken) */
    uint32_t npurging;                /* slots being released right now */
    uint8_t in_list;                  /* HK_SSL_* (pool.c) */
    uint8_t run;                      /* on the partial lists: its longest run of free slots */
    uint8_t pad0[2];
    uint64_t idle_since;              /* when its last ACTIVE slot went (cached SuperSlabs) */
    uint8_t pad1[80];
    struct hk_slab slabs[HK_SLABS];   /* slabs[0] describes the header slot and serves nothing */
    /* For each small slab whose free list is of its owner's own frees (list_tag), a bit per
     * block, set for each block on the list, so that the list is taken in address order
     * without a walk of it (heap.c, hk_list_in_order). Room for 4,096 blocks of 16 bytes a
     * slot; a class of 128 bytes uses a line. Written by the owner only. */
    uint64_t fbits[HK_SLABS][HK_FBITS_WORDS];
};

/* Slot metadata is 1 << HK_SLOT_META_SHIFT bytes (hk_slot_of). */
#define HK_SLOT_META_SHIFT 7
_Static_assert(sizeof(struct hk_slab) == (size_t)1 << HK_SLOT_META_SHIFT,
               "slot metadata must be 128 bytes");
_Static_assert(offsetof(struct hk_superslab, slabs) == 128, "slot array at 128 bytes");
_Static_assert(sizeof(struct hk_superslab) <= HK_SLAB_SIZE, "header fits in slot 0");

/* One byte per 2 MiB chunk: nonzero when the chunk is a live SuperSlab. */
extern uint8_t hk_chunk_map[HK_MAP_ENTRIES] HK_INTERNAL;

static inline int hk_is_superslab(uintptr_t a) {
    uintptr_t ci = a >> HK_SS_SHIFT;
    return ci < HK_MAP_ENTRIES && hk_chunk_map[ci];
}

static inline struct hk_superslab *hk_ss_of(uintptr_t a) {
    return (struct hk_superslab *)(a & ~(HK_SS_SIZE - 1));
}

/* Metadata of the slot holding address a (not necessarily its slab's head). The slot's
 * index times the metadata's 128 bytes comes from one shift and one mask, which gcc does not
 * find in slabs[(a >> 16) & 31] (it shifted, masked, added the array's offset and shifted
 * again: two instructions more on every free that misses the table). */
static inline struct hk_slab *hk_slot_of(uintptr_t a) {
    uintptr_t meta = (a >> (HK_SLAB_SHIFT - HK_SLOT_META_SHIFT)) &
                     ((uintptr_t)(HK_SLABS - 1) << HK_SLOT_META_SHIFT);
    return (struct hk_slab *)((char *)hk_ss_of(a)->slabs + meta);
}

/* The slab holding address a: the head of a's slot. Cheap for small slabs, whose slot is its
 * own head; a span's other slots name their head. */
static inline struct hk_slab *hk_slab_of(uintptr_t a) {
    struct hk_slab *s = hk_slot_of(a);
    return &hk_ss_of(a)->slabs[__atomic_load_n(&s->head, __ATOMIC_RELAXED) & (HK_SLABS - 1)];
}

/* Index of a slot within its SuperSlab, and the address of its first byte. */
static inline unsigned hk_slab_index(const struct hk_slab *s) {
    return (unsigned)(((uintptr_t)s & (HK_SLAB_SIZE - 1)) - offsetof(struct hk_superslab, slabs)) /
           (unsigned)sizeof(struct hk_slab);
}
static inline char *hk_slab_base(const struct hk_slab *s) {
    return (char *)hk_ss_of((uintptr_t)s) + ((size_t)hk_slab_index(s) << HK_SLAB_SHIFT);
}
/* Bytes a slab covers: its slots times 64 KiB. */
static inline size_t hk_slab_bytes(const struct hk_slab *s) {
    return (size_t)s->nslots << HK_SLAB_SHIFT;
}

/* Offset from the first byte of slab s of address p, which lies in it: p's offset in its
 * SuperSlab less the slab's, which the offset of its metadata gives with one shift (through
 * hk_slab_base, the slab's address came first: four instructions more on a mid malloc). */
static inline uint32_t hk_slab_offset(const struct hk_slab *s, uintptr_t p) {
    uint32_t meta = (uint32_t)((uintptr_t)s & (HK_SLAB_SIZE - 1)) -
                    (uint32_t)offsetof(struct hk_superslab, slabs);
    return (uint32_t)(p & (HK_SS_SIZE - 1)) - (meta << (HK_SLAB_SHIFT - HK_SLOT_META_SHIFT));
}

/* Index of the block of slab s that p lies in (exact for a block start). */
static inline uint32_t hk_block_of(const struct hk_slab *s, uintptr_t p) {
    uint32_t off = hk_slab_offset(s, p);
    return (uint32_t)(((uint64_t)off * __atomic_load_n(&s->inv, __ATOMIC_RELAXED)) >> 32);
}

/* The note of the request of mid block p (a block start): in the metadata of p's slot, by
 * the half of the slot p lies in. A mid block is larger than half a slot (32 KiB), so no two
 * start in the same half: the note needs neither the span's head nor the block's index (by
 * the head and a multiply, 20 of the 53 instructions of a mid malloc that a cache served). */
#define HK_MID_REQ_SHIFT (HK_SLAB_SHIFT - 1)
_Static_assert(HK_SMALL_MAX >= (size_t)1 << HK_MID_REQ_SHIFT,
               "mid blocks start at least half a slot apart");
static inline uint16_t *hk_mid_req(uintptr_t p) {
    return &hk_slot_of(p)->req64[p >> HK_MID_REQ_SHIFT & 1];
}

/* Notes that mid block p (a block start) was handed out for a request of n bytes. */
static inline void hk_mid_note(uintptr_t p, size_t n) {
    *hk_mid_req(p) = (uint16_t)((n + 63) >> 6);
}

/* Mid block p (a block start) may now hold data in all of its bytes: the program asked for
 * its usable size, and programs use it (redis sizes its strings by it). */
static inline void hk_mid_forget(uintptr_t p) { *hk_mid_req(p) = 0; }

/* Bytes of block p of mid span s that hold the program's data: its request as noted (up to
 * 63 bytes more), or the whole block where none was noted. */
static inline size_t hk_mid_used(const struct hk_slab *s, uintptr_t p) {
    size_t n = (size_t)*hk_mid_req(p) << 6;
    return n && n < s->bsize ? n : s->bsize;
}

/* Index of the block at p in slab s, or -1 if p is not the start of a carved block. p lies in
 * s (s = hk_slab_of(p)), so its offset is below 1 MiB and the multiplication is exact for
 * every multiple of bsize. */
static inline long hk_slab_block_index(const struct hk_slab *s, uintptr_t p) {
    uint32_t off = hk_slab_offset(s, p);
    uint32_t bs = __atomic_load_n(&s->bsize, __ATOMIC_RELAXED);
    uint32_t i = hk_block_of(s, p);
    /* carved grows while the owner carves; another thread validating a free reads it racily,
     * and any block it may legitimately free was carved before it was handed out. */
    if (i * bs != off || i >= __atomic_load_n(&s->carved, __ATOMIC_RELAXED)) return -1;
    return i;
}

/* Whether p, which lies in mid span s of class c, is a carved block start: HK_BLOCK_MUL's one
 * multiply on its offset into the span against the bytes carved times the same (exact for
 * every offset below 2^20: test_size_class). Free's mid short path (heap.c), where
 * hk_slab_block_index's division and multiply back took 2 instructions more a free. */
static inline int hk_span_block_start(const struct hk_slab *s, unsigned c, uintptr_t p) {
    uint64_t m = hk_class_mul[c], lim = __atomic_load_n(&s->lim, __ATOMIC_RELAXED);
    return (uint64_t)hk_slab_offset(s, p) * m < lim * m;
}

/* The bitmap of free blocks of small slab s (struct hk_superslab, fbits). */
static inline uint64_t *hk_slab_fbits(const struct hk_slab *s) {
    return hk_ss_of((uintptr_t)s)->fbits[hk_slab_index(s)];
}

/* The tag and the dirty flag of slab s's list (list_tag | bits_dirty << 8) in one load: equal
 * to a thread's tag t exactly when the list is of t's own frees (or empty after them) and
 * the bitmap holds its blocks' bits and no others. */
static inline unsigned hk_list_key(const struct hk_slab *s) {
    uint16_t k;
    memcpy(&k, &s->list_tag, sizeof k);
    return k;
}
_Static_assert(offsetof(struct hk_slab, bits_dirty) == offsetof(struct hk_slab, list_tag) + 1,
               "list_tag and bits_dirty adjacent (hk_list_key)");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "hk_list_key reads list_tag low");

/* The bitmap of free blocks of the small slab holding block b: a small slab is its block's
 * slot, so it is found from b as from the slab. */
static inline uint64_t *hk_list_bits(const void *b) {
    uintptr_t a = (uintptr_t)b;
    return hk_ss_of(a)->fbits[(a >> HK_SLAB_SHIFT) & (HK_SLABS - 1)];
}
/* Sets block b's bit in bitmap bits of its slab, whose inv (struct hk_slab) is given. */
static inline void hk_list_bit_in(uint64_t *bits, uint64_t inv, const void *b) {
    uint32_t i = (uint32_t)((((uintptr_t)b & (HK_SLAB_SIZE - 1)) * inv) >> 32);
    bits[i >> 6] |= (uint64_t)1 << (i & 63);
}
/* Sets the bit of block b in the bitmap of free blocks of its small slab s. */
static inline void hk_list_bit(const struct hk_slab *s, const void *b) {
    hk_list_bit_in(hk_list_bits(b), s->inv, b);
}

/* Block b of slab s is about to join its free list, freed by the thread of tag t (0: by
 * another thread than the owner, or for it): the list's tag (struct hk_slab, list_tag), and
 * for a list of one thread's own frees of a small slab, b's bit.
 * The common case, a thread's own block joining its list of its own, is one compare
 * (hk_list_key) before the bit is set: the three tests it stands for (an empty list, another
 * tag, a dirty bitmap) cost a walk home 28 instructions a block, the walk 60 in all (phases
 * under callgrind). A mid span's bitmap stays dirty (its list is taken a block at a time and
 * never ordered: hk_list_joins_new leaves it), so its key never matches. Another thread's free (t 0, a constant where it is known) clears
 * the tag and sets no bit. */
void hk_list_joins_new(struct hk_slab *s, uint8_t t) HK_INTERNAL;
static inline void hk_list_joins(struct hk_slab *s, uint8_t t, const void *b) {
    if (t == 0) {
        s->list_tag = 0;
        return;
    }
#ifndef HK_HARDENED /* whose lists are never ordered: the tag alone */
    if (HK_UNLIKELY(hk_list_key(s) != t)) {
        if (s->free) { /* another thread's list, or one made before a dirty bitmap */
            s->list_tag = 0;
            return;
        }
        hk_list_joins_new(s, t); /* a new list of t's own: out of line */
        if (s->bits_dirty) return; /* a mid span's: the tag alone */
    }
    hk_list_bit(s, b);
#else
    (void)b;
    if (!s->free) s->list_tag = t;
    else if (s->list_tag != t) s->list_tag = 0;
#endif
}

/* Intrusive doubly linked lists of slabs, through next/prev. */
static inline void hk_slab_list_push(struct hk_slab **head, struct hk_slab *s) {
    s->prev = NULL;
    s->next = *head;
    if (*head) (*head)->prev = s;
    *head = s;
}

static inline void hk_slab_list_unlink(struct hk_slab **head, struct hk_slab *s) {
    if (s->prev) s->prev->next = s->next;
    else *head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

/* Prepares the ACTIVE slab s (its slots already marked) to serve class c: nothing carved. */
void hk_slab_format(struct hk_slab *s, unsigned c) HK_INTERNAL;
/* Small slab s, with no live block, drops its free list and is carved again from its start
 * when next used, in address order, as a formatted slab is (its list and bitmap forgotten). */
void hk_slab_uncarve(struct hk_slab *s) HK_INTERNAL;
/* Mid span s, empty since it went to the pool (its class's front or the pool proper, where
 * stage 1 takes it back whole) and about to serve the class again,
 * has every block it carved free, each still holding its link (to a carved block of s, or
 * none) and its free mark (the hardened build: its trailer's "free", guard.h): a block that
 * lost either was written to after its free, and is reported (naming malloc, whose refill
 * found it). At most 16 blocks, whose first words the carve that follows writes. */
void hk_span_check_freed(const struct hk_slab *s) HK_INTERNAL;
/* The first block of s's free list (not empty), taken off it and counted as used, its link
 * cleared. A link that leads out of the slab's carved blocks was overwritten (a write to a
 * block after its free): reported, and the rest of the list dropped. */
void *hk_slab_take_one(struct hk_slab *s) HK_INTERNAL;

/* Cuts a new SuperSlab from the page heap (large.h: resident free memory first, else a new
 * mapping) and registers it (all slots UNUSED); NULL when the OS refuses. *fresh: its pages
 * were all zero (new, or released), so using them faults them in. */
struct hk_superslab *hk_ss_map(int *fresh) HK_INTERNAL;
/* Unregisters a SuperSlab with no ACTIVE slot and gives it back to the page heap. */
void hk_ss_unmap(struct hk_superslab *ss) HK_INTERNAL;

#endif
