/* Side lists' storage (side.h). */
#include "side.h"

#include "os.h"

_Static_assert(offsetof(struct hk_side_group, left) == sizeof(void *) * (HK_NCLASS + 1),
               "free's fast path finds a slot's count one array after its list");

struct hk_side *hk_side_map(void) {
    return hk_os_map((sizeof(struct hk_side) + HK_PAGE_SIZE - 1) & ~(size_t)(HK_PAGE_SIZE - 1));
}

int hk_side_take(struct hk_side *d) {
    for (unsigned g = 0; g < HK_SIDE_GROUPS; g++) {
        uint64_t f = ~d->taken[g];
        if (f) {
            unsigned j = (unsigned)__builtin_ctzll(f);
            d->taken[g] |= (uint64_t)1 << j;
            return (int)(g * 64 + j);
        }
    }
    return -1;
}
