#include "superslab.h"

#include <string.h>

#include "block.h"
#ifdef HK_HARDENED
#include "guard.h"
#endif
#include "large.h"
#include "report.h"

/* 64 MiB of address space in .bss; only the pages covering chunks in use are ever touched. */
uint8_t hk_chunk_map[HK_MAP_ENTRIES];

void hk_slab_format(struct hk_slab *s, unsigned c) {
    uint32_t bs = hk_class_size[c];
    s->bsize = bs;
    s->capacity = (uint32_t)(hk_slab_bytes(s) / bs);
    s->inv = (uint32_t)((((uint64_t)1 << 32) + bs - 1) / bs);
    s->carved = 0;
    s->fresh = 0; /* what it carved before may be resident: hk_activate knows better */
    s->list_tag = 0;
    s->bits_dirty = 1; /* its bitmap may hold its last use's bits */
    __atomic_store_n(&s->lim, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->nostash, 0, __ATOMIC_RELAXED);
    s->let_go = 0;
    s->side = 0;
    __atomic_store_n(&s->was_shared, 0, __ATOMIC_RELAXED); /* read racily: heap.c */
    s->used = 0;
    s->free = NULL;
    s->last_cls = (uint8_t)c;
    /* cls last: a concurrent reader of a stale pointer sees either NONE or a formatted slab. */
    __atomic_store_n(&s->cls, (uint8_t)c, __ATOMIC_RELEASE);
}

void hk_slab_uncarve(struct hk_slab *s) {
    s->free = NULL;
    s->bits_dirty = 1; /* the bits of its last list may be left */
    s->carved = 0;
    __atomic_store_n(&s->lim, 0, __ATOMIC_RELAXED); /* read racily by free's second try */
}

void hk_list_joins_new(struct hk_slab *s, uint8_t t) {
    s->list_tag = t;
    if (s->cls < HK_NSMALL && s->bits_dirty) { /* a mid span's list is taken a block at a time */
        memset(hk_slab_fbits(s), 0, HK_FBITS_WORDS * sizeof(uint64_t));
        s->bits_dirty = 0;
    }
}

/* Whether free block b of bs bytes shows itself free: its free mark, or in the hardened
 * build (which has none) its trailer's "free" (guard.h). */
static inline int hk_shows_free(const void *b, size_t bs) {
#ifdef HK_HARDENED
    return hk_guard_trailer(b, bs) == HK_GUARD_FREE;
#else
    (void)bs;
    return hk_marked_free(b);
#endif
}

void hk_span_check_freed(const struct hk_slab *s) {
    uintptr_t base = (uintptr_t)hk_slab_base(s), bs = s->bsize, end = base + s->carved * bs;
    for (uintptr_t b = base; b < end; b += bs) {
        uintptr_t next = (uintptr_t)hk_link_get((void *)b);
        if (!hk_shows_free((void *)b, bs) ||
            (next && (next < base || next >= end || (next - base) % bs != 0))) {
            hk_report("malloc", (void *)b, "corrupted free list (a freed block was written to)");
            return;
        }
    }
}

void *hk_slab_take_one(struct hk_slab *s) {
    void *b = s->free;
    void *next = hk_link_get(b);
    if (HK_UNLIKELY(next && hk_slab_block_index(s, (uintptr_t)next) < 0)) {
        hk_report("malloc", b, "corrupted free list (a freed block was written to)");
        next = NULL; /* the rest of the slab's free blocks are lost */
    }
    s->free = next;
    s->bits_dirty = 1; /* b's bit, if any, is left */
    hk_link_set(b, NULL);
    s->used++;
    return b;
}

struct hk_superslab *hk_ss_map(int *fresh) {
    unsigned z;
    struct hk_superslab *ss = hk_large_alloc(HK_SS_SIZE, HK_SS_SIZE, &z, HK_LARGE_INNER);
    if (!ss) return NULL;
    int zeroed = (z & HK_LARGE_ZERO) != 0;
    *fresh = zeroed;
    /* Fresh pages are zero: only the non-zero fields need writing. Memory a large block or
     * another SuperSlab had holds anything; only the header is read before it is written. */
    if (!zeroed) memset(ss, 0, sizeof *ss);
    ss->magic = HK_SS_MAGIC;
    ss->avail = ~(uint32_t)1; /* every slot but the header's */
    for (unsigned i = 0; i < HK_SLABS; i++) {
        struct hk_slab *s = &ss->slabs[i];
        s->cls = HK_CLS_NONE;
        s->last_cls = HK_CLS_NONE;
        s->head = (uint8_t)i;
        s->nslots = 1;
        s->clean = zeroed && i > 0; /* slot 0 holds the header */
    }
    __atomic_store_n(&hk_chunk_map[(uintptr_t)ss >> HK_SS_SHIFT], 1, __ATOMIC_RELEASE);
    return ss;
}

void hk_ss_unmap(struct hk_superslab *ss) {
    __atomic_store_n(&hk_chunk_map[(uintptr_t)ss >> HK_SS_SHIFT], 0, __ATOMIC_RELEASE);
    ss->magic = 0;
    /* Slots the pool released (UNUSED) hold no pages: the page heap then knows where free
     * memory is resident, and cuts blocks there first. */
    size_t dirty = HK_SS_SIZE;
    for (unsigned i = 1; i < HK_SLABS; i++)
        if (ss->slabs[i].state == HK_SLOT_UNUSED) dirty -= HK_SLAB_SIZE;
    hk_large_free_inner(ss, dirty);
}
