/* The per-process secrets of block.h, drawn without allocating. */
#define _GNU_SOURCE
#include "block.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

struct hk_secret hk_secret;

/* splitmix64: spreads a weak seed over all bits (used only if getrandom fails). */
static uint64_t hk_mix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void hk_block_init(void) {
    uint64_t r[3];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        /* Early in boot, or under a seccomp filter: the clock and the address layout. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                        (uint64_t)(uintptr_t)&ts ^ ((uint64_t)(uintptr_t)&hk_secret << 17) ^
                        (uint64_t)getpid();
        for (int i = 0; i < 3; i++) r[i] = hk_mix(&seed);
    }
    /* A mark of 0 would match every zeroed block. */
    hk_secret.mark = (uintptr_t)(r[0] | 1);
    hk_secret.link = (uintptr_t)r[1];
    /* The trailer's last byte is the key's top byte (user addresses have none): odd and at
     * least 0x80, so that a write of an even byte (NUL, for one) or of any ASCII character
     * just before a block always shows. */
    hk_secret.guard = r[2] | (0x81ull << 56);
}
