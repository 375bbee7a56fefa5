/* Shared definitions for every hakmem module: visibility, branch hints, assertions. */
#ifndef HK_COMMON_H
#define HK_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Internal symbols are hidden: they are reached without the PLT or GOT and never exported. */
#define HK_INTERNAL __attribute__((visibility("hidden")))
#define HK_EXPORT __attribute__((visibility("default")))
#define HK_LIKELY(x) __builtin_expect(!!(x), 1)
#define HK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HK_NOINLINE __attribute__((noinline))
#define HK_COLD __attribute__((cold, noinline))
/* For the few small helpers a slow path's short way must not call (room.h). */
#define HK_ALWAYS_INLINE inline __attribute__((always_inline))
/* malloc's and free's entry points start a cache line: where the linker happens to put them
 * otherwise moved tight 32 by 5% between builds of the same code (free's 100 bytes across a
 * line at one address, within one at another, on the AMD machine of 2026-11-27). */
#define HK_HOT_ENTRY __attribute__((aligned(64)))
/* Thread-locals must be initial-exec: the general-dynamic model may call malloc on first use. */
#define HK_TLS __thread __attribute__((tls_model("initial-exec")))

#ifdef HK_DEBUG
void hk_assert_fail(const char *expr, const char *file, int line) HK_INTERNAL
    __attribute__((noreturn));
#define HK_ASSERT(x) ((x) ? (void)0 : hk_assert_fail(#x, __FILE__, __LINE__))
#else
#define HK_ASSERT(x) ((void)0)
#endif

#define HK_PAGE_SIZE ((size_t)4096)

static inline size_t hk_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }
static inline int hk_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

#endif
