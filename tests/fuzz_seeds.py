#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz_ops.c into tests/fuzz_corpus/ (or the directory given).

Each seed is a short operation sequence in the harness's input format (its header comment is
the reference); the helpers below spell that format out, and each seed exercises one
operation or tier, so that the fuzzer starts from inputs that already reach every path.
Run it again after changing the format: python3 tests/fuzz_seeds.py
"""
import os
import sys

KIB = 1 << 10
MIB = 1 << 20

(MALLOC, CALLOC, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, REALLOC, REALLOCARRAY, FREE,
 FREE_SIZED, USABLE, CHECK, FILL, SWITCH, RETIRE, TRIM, BAD) = range(16)

# The edge sizes' table, as in fuzz_ops.c.
EDGES = [0, 8, 16, 128, 1024, 4096, 16 * KIB, 32 * KIB, 64 * KIB, 256 * KIB, MIB, 2 * MIB,
         4 * MIB]


def size(n):
    """The four SIZE bytes for exactly n bytes: the tier whose range holds n."""
    if n <= 256:
        tier, v = 0, n
    elif n <= 32 * KIB:
        tier, v = 1, n
    elif n <= MIB:
        tier, v = 2, n - 32 * KIB
    elif n <= 5 * MIB:
        tier, v = 3, n - MIB
    else:
        raise ValueError(n)
    return bytes([tier, v & 0xff, (v >> 8) & 0xff, v >> 16])


def edge(index, delta=0):
    """SIZE bytes for EDGES[index] + delta (-32 <= delta < 32)."""
    return bytes([4, index, delta + 32, 0])


def align_byte(a, odd=False):
    """ALIGN byte for a power of two from 8 to 2 MiB; odd: MEMALIGN gets 1.5 times it."""
    shift = a.bit_length() - 1
    assert 1 << shift == a and 3 <= shift <= 21
    return (shift - 3) | (0x80 if odd else 0)


def op(code, *args):
    out = bytearray([code])
    for a in args:
        out += a if isinstance(a, bytes) else bytes([a])
    return bytes(out)


def malloc(slot, n):
    return op(MALLOC, slot, size(n))


def calloc(slot, n, split=0):
    return op(CALLOC, slot, split, size(n))


def aligned(code, slot, a, n, odd=False):
    return op(code, slot, align_byte(a, odd), size(n))


def valloc(slot, n, pvalloc=False):
    """ALIGNED_ALLOC with bit 7 of ALIGN: hak_valloc, or with bit 6 hak_pvalloc."""
    return op(ALIGNED_ALLOC, slot, 0xc0 if pvalloc else 0x80, size(n))


def realloc(slot, n):
    return op(REALLOC, slot, size(n))


def reallocarray(slot, n, split):
    return op(REALLOCARRAY, slot, split, size(n))


def free(slot):
    return op(FREE, slot)


def free_sized(slot, aligned_sized=False):
    return op(FREE_SIZED, slot | (0x80 if aligned_sized else 0))


def usable(slot):
    return op(USABLE, slot)


def check(slot):
    return op(CHECK, slot)


def fill(slot, byte):
    return op(FILL, slot, byte)


def bad(kind, slot=0, n=0):
    return op(BAD, slot, kind, size(n))


SWITCH_OP = op(SWITCH)
RETIRE_OP = op(RETIRE)
TRIM_OP = op(TRIM)


def seeds():
    s = {}
    s["small_malloc_free"] = b"".join(
        [malloc(i, n) for i, n in enumerate([0, 1, 15, 16, 17, 100, 128, 129, 256])]
        + [malloc(9, 4000), malloc(10, 32 * KIB), usable(3), check(9)]
        + [free(i) for i in range(0, 11, 2)] + [free_sized(i) for i in range(1, 11, 2)])
    s["mid_blocks"] = b"".join(
        [malloc(i, n) for i, n in enumerate([32 * KIB + 1, 40000, 100 * KIB, 300 * KIB, MIB])]
        + [usable(2), check(4), free(1), malloc(1, 200 * KIB), free_sized(3)])
    s["large_blocks"] = b"".join(
        [malloc(0, MIB + 1), malloc(1, 2 * MIB + 12345), malloc(2, 5 * MIB), usable(1),
         check(2), free(0), malloc(0, 3 * MIB), free_sized(1), free(2)])
    s["calloc_tiers"] = b"".join(
        [calloc(0, 100), calloc(1, 3000, split=2), calloc(2, 50 * KIB, split=3),
         calloc(3, 2 * MIB, split=1), calloc(4, 0), free(3), calloc(3, 2 * MIB)])
    s["posix_memalign"] = b"".join(
        [aligned(POSIX_MEMALIGN, i, 1 << (i + 3), 100 + 1000 * i) for i in range(19)]
        + [free(i) for i in range(19)])
    s["aligned_alloc_memalign"] = b"".join(
        [aligned(ALIGNED_ALLOC, 0, 64, 64), aligned(ALIGNED_ALLOC, 1, 4096, 0),
         aligned(ALIGNED_ALLOC, 2, 2 * MIB, 100), aligned(MEMALIGN, 3, 64 * KIB, 40 * KIB),
         aligned(MEMALIGN, 4, 256, 1000, odd=True), aligned(MEMALIGN, 5, 128 * KIB, 3 * MIB),
         free_sized(0, aligned_sized=True), free_sized(2, aligned_sized=True), usable(5),
         valloc(6, 100), valloc(7, 5000, pvalloc=True), valloc(8, 0, pvalloc=True),
         valloc(9, 2 * MIB)])
    s["realloc_grow"] = b"".join(
        [malloc(0, 10)] + [realloc(0, n) for n in [100, 5000, 40 * KIB, 700 * KIB, 2 * MIB,
                                                    4 * MIB]] + [check(0)])
    s["realloc_shrink"] = b"".join(
        [malloc(0, 4 * MIB)] + [realloc(0, n) for n in [3 * MIB, MIB + 7, 500 * KIB, 20 * KIB,
                                                         200, 8]] + [realloc(0, 0)])
    s["reallocarray"] = b"".join(
        [reallocarray(0, 96, 3), reallocarray(0, 64 * KIB, 4), reallocarray(0, 2 * MIB, 7),
         reallocarray(0, 1000, 1), reallocarray(0, 0, 2)])
    s["remote_free"] = b"".join(
        [malloc(i, n) for i, n in enumerate([48, 2000, 48 * KIB, 2 * MIB])]
        + [SWITCH_OP] + [free(i) for i in range(4)] + [malloc(4, 64), SWITCH_OP, free(4)])
    s["remote_realloc"] = b"".join(
        [malloc(0, 200), malloc(1, 60 * KIB), SWITCH_OP, realloc(0, 20000), realloc(1, 3 * MIB),
         SWITCH_OP, realloc(0, 16), realloc(1, 100)])
    s["orphans"] = b"".join(
        [SWITCH_OP] + [malloc(i, 32 + 64 * i) for i in range(8)] + [malloc(8, 100 * KIB),
                                                                      RETIRE_OP]
        + [free(i) for i in range(0, 9, 2)] + [SWITCH_OP, malloc(9, 32), free(1), RETIRE_OP])
    s["trim"] = b"".join(
        [malloc(i, 300 * KIB) for i in range(4)] + [free(i) for i in range(4)]
        + [TRIM_OP, malloc(0, 300 * KIB), malloc(1, 3 * MIB), free(1), TRIM_OP, check(0)])
    s["bad_requests"] = b"".join(
        [malloc(0, 1000)] + [bad(k, slot=0, n=5) for k in range(8)] + [check(0)])
    s["fill_and_slack"] = b"".join(
        [malloc(0, 129), usable(0), fill(0, 0x33), malloc(1, 65 * KIB), usable(1), fill(1, 7),
         realloc(0, 100), check(0), realloc(1, 66 * KIB), check(1)])
    s["edge_sizes"] = b"".join(
        [op(MALLOC, i, edge(i, d)) for i, d in
         zip(range(13), [0, -1, 1, 0, -1, 1, 0, -1, 1, 0, -1, 1, 0])]
        + [op(REALLOC, 3, edge(10, 1)), op(REALLOC, 10, edge(7, 0))])
    s["budget"] = b"".join([malloc(i, 5 * MIB) for i in range(16)] + [malloc(20, 64)])
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                             "fuzz_corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(seeds().items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(seeds())} seeds in {out}")


if __name__ == "__main__":
    main()
