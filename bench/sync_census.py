#!/usr/bin/env python3
"""bench/sync_census.py - what an allocator's own code does that many cores pay for.

  sync_census.py [NAME=LIB.so ...] -- PROGRAM [ARGS...]

Runs PROGRAM (one of bench/'s, which prints a `bench=` line) under valgrind's callgrind once
per library, preloaded, with the threads scheduled fairly (--fair-sched=yes), and counts the
instructions of the library's own code that were executed:

  atomics   read-modify-write operations on memory: the `lock`-prefixed ones and `xchg`
            (each takes its cache line exclusive, and waits for it if another core has it)
  globals   plain stores to the library's static data (addressed relative to %rip): the
            lines every thread writes, counters and process-wide lists
  Ir/op     every instruction of the process, the program's included, per operation

per 1000 operations of the program (its ops_per_sec times its seconds). Counts, not costs:
a store to a line no other core holds is cheap, and the census does not see the program's
data or the allocator's per-slab lines that threads share. It is a stand-in, exact and
repeatable on any machine, for what a run on many cores measures; it needs valgrind and
objdump. Without NAME=LIB pairs it counts build/libhakmem.so and the peers found in
/usr/lib/<multiarch>. See docs/BENCHMARKS.md.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

INSN = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
RIP_STORE = re.compile(r",\s*-?(0x[0-9a-f]+)?\(%rip\)")


def classify(lib):
    """Map of the library's instruction addresses to 'atomic' or 'global'."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", lib],
                         capture_output=True, text=True, check=True).stdout
    kinds = {}
    for line in dis.splitlines():
        m = INSN.match(line)
        if not m:
            continue
        text = m.group(2)
        op = text.split()[0] if text.split() else ""
        if op == "lock" or (op.startswith("xchg") and "(" in text):
            kinds[int(m.group(1), 16)] = "atomic"
        elif (op.startswith(("mov", "add", "sub", "or", "and")) and RIP_STORE.search(text)) or \
                (op.startswith(("inc", "dec")) and "(%rip)" in text):
            kinds[int(m.group(1), 16)] = "global"
    return kinds


def census(out, lib, kinds):
    """Executions of each kind in lib's objects, and the process's total instructions."""
    base = os.path.basename(lib)
    counts = {"atomic": 0, "global": 0}
    total = 0
    npos, in_lib, skip = 1, False, False
    with open(out) as f:
        for line in f:
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line.startswith("ob="):
                in_lib = base in line
            elif line.startswith("calls="):
                skip = True  # the next line is the call's inclusive cost, not an instruction's
            elif line.startswith("0x"):
                if skip:
                    skip = False
                    continue
                if not in_lib:
                    continue
                p = line.split()
                kind = kinds.get(int(p[0], 16))
                if kind and len(p) > npos:
                    counts[kind] += int(p[npos])  # shared objects: addresses as in the file
    return counts, total


def run(lib, cmd, tmp):
    pattern = os.path.join(tmp, "cg.%p")
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--trace-children=yes", "--fair-sched=yes",
         "--dump-instr=yes", "--compress-pos=no", "--compress-strings=no",
         "--callgrind-out-file=" + pattern, "env", "LD_PRELOAD=" + lib] + cmd,
        capture_output=True, text=True)
    line = [l for l in proc.stdout.splitlines() if l.startswith("bench=")]
    if not line:
        sys.exit("sync_census: %s printed no bench= line under %s" % (cmd[0], lib))
    kv = dict(x.split("=", 1) for x in line[-1].split() if "=" in x)
    ops = float(kv.get("ops_per_sec", "nan")) * float(kv.get("seconds", "nan"))
    outs = glob.glob(os.path.join(tmp, "cg.*"))
    biggest = max(outs, key=os.path.getsize)  # the program, not env
    return ops, biggest


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    i = argv.index("--")
    specs, cmd = argv[:i], argv[i + 1:]
    if not cmd:
        sys.exit(__doc__)
    if not specs:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        specs = ["hakmem=" + os.path.join(root, "build", "libhakmem.so")]
        multi = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                               text=True).stdout.strip() or "x86_64-linux-gnu"
        for name, so in (("mimalloc", "libmimalloc.so.2"), ("jemalloc", "libjemalloc.so.2"),
                         ("tcmalloc", "libtcmalloc_minimal.so.4")):
            path = os.path.join("/usr/lib", multi, so)
            if os.path.exists(path):
                specs.append(name + "=" + path)
    print("| allocator | operations | Ir/op | atomics/kop | globals/kop |")
    print("|---|---|---|---|---|")
    for spec in specs:
        name, _, lib = spec.partition("=")
        lib = os.path.realpath(lib)
        with tempfile.TemporaryDirectory() as tmp:
            ops, out = run(lib, cmd, tmp)
            counts, total = census(out, lib, classify(lib))
        print("| %s | %.0f | %.1f | %.1f | %.1f |" % (
            name, ops, total / ops, 1000 * counts["atomic"] / ops,
            1000 * counts["global"] / ops))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
