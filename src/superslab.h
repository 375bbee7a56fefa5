/* SuperSlab: a 2 MiB region on a 2 MiB boundary, cut into 32 slabs of 64 KiB.
 *
 * Slab 0 holds the SuperSlab header and the metadata of all 32 slabs; slabs 1..31 hold blocks.
 * Because of the alignment, the SuperSlab of any interior pointer p is p & ~(HK_SS_SIZE-1) and
 * its slab is (p >> 16) & 31: pointer to metadata is pure arithmetic (DESIGN invariant 5).
 * A byte map over the whole 47-bit address space, one byte per 2 MiB chunk, says which chunks
 * are SuperSlabs, so free() of a foreign pointer is detected before anything is dereferenced. */
#ifndef HK_SUPERSLAB_H
#define HK_SUPERSLAB_H

#include <stdatomic.h>

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

/* Slot states in the shared pool. */
enum { HK_SLOT_UNUSED = 0, HK_SLOT_ACTIVE = 1, HK_SLOT_EMPTY = 2 };

/* Which list a slab is on: its owner heap's, the abandoned lists, or the pool's. */
enum {
    HK_LIST_NONE = 0,
    HK_LIST_CURRENT,   /* the owner's current slab for its class */
    HK_LIST_PARTIAL,   /* owned, has free blocks */
    HK_LIST_FULL,      /* owned, every carved block handed out */
    HK_LIST_ORPHAN_PARTIAL, /* abandoned by an exited thread, has free blocks */
    HK_LIST_ORPHAN_FULL,    /* abandoned, no free blocks */
    HK_LIST_POOL_EMPTY,     /* EMPTY slot on the pool's per-class list */
};

struct hk_owner;

/* Metadata of one slab; 64 bytes, so the fast path reaches it with a shift and a mask. */
struct hk_slab {
    uint8_t cls;       /* size class while ACTIVE, HK_CLS_NONE otherwise: read by free's fast path */
    uint8_t state;     /* HK_SLOT_* */
    uint8_t list;      /* HK_LIST_* */
    uint8_t last_cls;  /* class it served last: the pool's stage-1 key */
    uint32_t bsize;    /* block size */
    uint32_t capacity; /* blocks that fit */
    uint32_t carved;   /* blocks carved so far (carving is lazy, in batches) */
    uint32_t used;     /* carved blocks not on `free`: held by users or by the owner's cache */
    uint32_t inv;      /* ceil(2^32 / bsize): block index by multiplication */
    void *free;        /* local free list, touched only by the owner (or under the orphan lock) */
    _Atomic(struct hk_owner *) owner; /* owning thread's record; NULL when abandoned */
    struct hk_slab *next, *prev;      /* links of the list named by `list` */
    uint64_t pad;
};

struct hk_superslab {
    uint64_t magic;
    struct hk_superslab *next, *prev; /* pool list: partial or cache */
    uint32_t nactive;                 /* ACTIVE slots */
    uint8_t in_list;                  /* HK_SSL_* */
    uint8_t cold;                     /* pages released while cached */
    uint8_t pad[34];
    struct hk_slab slabs[HK_SLABS];   /* slabs[0] describes the header slab and serves nothing */
};

_Static_assert(sizeof(struct hk_slab) == 64, "slab metadata must be 64 bytes");
_Static_assert(offsetof(struct hk_superslab, slabs) == 64, "slab array at a cache line");
_Static_assert(sizeof(struct hk_superslab) <= HK_SLAB_SIZE, "header fits in slab 0");

/* One byte per 2 MiB chunk: nonzero when the chunk is a live SuperSlab. */
extern uint8_t hk_chunk_map[HK_MAP_ENTRIES] HK_INTERNAL;

static inline int hk_is_superslab(uintptr_t a) {
    uintptr_t ci = a >> HK_SS_SHIFT;
    return ci < HK_MAP_ENTRIES && hk_chunk_map[ci];
}

static inline struct hk_superslab *hk_ss_of(uintptr_t a) {
    return (struct hk_superslab *)(a & ~(HK_SS_SIZE - 1));
}

static inline struct hk_slab *hk_slab_of(uintptr_t a) {
    return &hk_ss_of(a)->slabs[(a >> HK_SLAB_SHIFT) & (HK_SLABS - 1)];
}

/* Index of a slab within its SuperSlab, and the address of its first block. */
static inline unsigned hk_slab_index(const struct hk_slab *s) {
    return (unsigned)(((uintptr_t)s & (HK_SLAB_SIZE - 1)) - offsetof(struct hk_superslab, slabs)) /
           (unsigned)sizeof(struct hk_slab);
}
static inline char *hk_slab_base(const struct hk_slab *s) {
    return (char *)hk_ss_of((uintptr_t)s) + ((size_t)hk_slab_index(s) << HK_SLAB_SHIFT);
}

/* Index of the block at p in its slab s, or -1 if p is not the start of a carved block. */
static inline long hk_slab_block_index(const struct hk_slab *s, uintptr_t p) {
    uint32_t off = (uint32_t)(p & (HK_SLAB_SIZE - 1)); /* slabs are 64 KiB aligned */
    uint32_t i = (uint32_t)(((uint64_t)off * s->inv) >> 32);
    /* carved grows while the owner carves; another thread validating a free reads it racily,
     * and any block it may legitimately free was carved before it was handed out. */
    if (i * s->bsize != off || i >= __atomic_load_n(&s->carved, __ATOMIC_RELAXED)) return -1;
    return i;
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

/* Prepares slab s of an ACTIVE slot to serve class c: nothing carved yet. */
void hk_slab_format(struct hk_slab *s, unsigned c) HK_INTERNAL;

/* Maps and registers a new SuperSlab (all slots UNUSED); NULL when the OS refuses. */
struct hk_superslab *hk_ss_map(void) HK_INTERNAL;
/* Unregisters and unmaps a SuperSlab with no ACTIVE slot. */
void hk_ss_unmap(struct hk_superslab *ss) HK_INTERNAL;

#endif
