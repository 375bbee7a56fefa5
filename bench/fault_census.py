#!/usr/bin/env python3
"""bench/fault_census.py - where a program's page faults under hakmem come from.

  fault_census.py [--lib LIB.so] [--gap MS] -- PROGRAM [ARGS...]

Runs PROGRAM once with LIB (build/libhakmem.so by default) preloaded, under
`perf record -e page-faults -c 1 -d` (every fault, with its address) and with HAKMEM_TRACE=pool
(every slab the pool hands out: stage, class size, slots, address). The faults are cut into
phases where none happened for --gap milliseconds (50): bench/waves' pauses. The first phase
builds the heap; each fault of a later one goes in one of these bins, by the 64 KiB slot it
falls in and the slabs the pool had made of that slot by then:

  header       a SuperSlab's first slot: its header and the slots' metadata
  outside      no SuperSlab: the large tier's blocks, the program's own memory, libraries,
               hakmem's other metadata
  new slot     the slot's first slab: stage 2 (free slots of a SuperSlab in use, never
               touched) or stage 3 (a SuperSlab taken from the cache, or mapped)
  same class   the slot's slab before was the same one, of the same class: a carve past what
               the class used then
  other use    the slot served another class or span before (pages that use never touched, or
               that the pool released)

and counted by the class size of the slab it fell in. With --gap 0 every fault counts (a
program without pauses: mixed_churn). The trace counts time from hakmem's start: it is set
against perf's clock by the first slabs, whose first fault follows their acquisition at once.
Needs perf with the page-faults software event (no hardware counters are used). See
docs/BENCHMARKS.md.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

SLOT_SHIFT = 16
FAULT = re.compile(r"^\s*\S+\s+\d+\s+([\d.]+):\s+([0-9a-f]+)\s*$")
ACQ = re.compile(r"^hakmem trace [\d.]+ pool: acquire stage (\d) .*class_size (\d+) slots (\d+) "
                 r"slab@? ?(0x[0-9a-f]+)")
STAMP = re.compile(r"^hakmem trace ([\d.]+) ")


def usage():
    sys.exit("\n\n".join(__doc__.strip().split("\n\n")[:2]))


def phases(times, gap):
    """The phase of each time in order: a new one after a gap of more than `gap` seconds."""
    out, n, last = [], 0, None
    for t in times:
        if last is not None and t - last > gap:
            n += 1
        out.append(n)
        last = t
    return out


def record(lib, prog):
    """Runs prog; returns its faults [(time, address)] and the pool's acquisitions [(time,
    stage, class size, slots, address)], both on CLOCK_MONOTONIC but for an unknown offset of
    the trace's (it counts from hakmem's start)."""
    with tempfile.TemporaryDirectory() as tmp:
        data, trace = os.path.join(tmp, "pf.data"), os.path.join(tmp, "trace.txt")
        env = dict(os.environ, LD_PRELOAD=lib, HAKMEM_TRACE="pool", HAKMEM_TRACE_FILE=trace)
        run = subprocess.run(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e",
                              "page-faults", "-c", "1", "-d", "-o", data, "--"] + prog,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit("fault_census: the run failed (%d): %s" % (run.returncode,
                                                                run.stderr.strip()[-300:]))
        for line in run.stdout.splitlines():
            if line.startswith("bench="):
                print(line)
        script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,time,addr"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        faults = []
        for line in script.stdout.splitlines():
            m = FAULT.match(line)
            if m:
                faults.append((float(m.group(1)), int(m.group(2), 16)))
        acqs = []
        if os.path.exists(trace):
            with open(trace) as f:
                for line in f:
                    m = ACQ.match(line)
                    if m:
                        acqs.append((float(STAMP.match(line).group(1)), m.group(1),
                                     int(m.group(2)), int(m.group(3)), int(m.group(4), 16)))
    return faults, acqs


def main(argv):
    lib, gap = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                            "libhakmem.so"), 0.05
    while argv and argv[0] != "--":
        if argv[0] == "--lib" and len(argv) > 1:
            lib, argv = argv[1], argv[2:]
        elif argv[0] == "--gap" and len(argv) > 1:
            gap, argv = float(argv[1]) / 1000, argv[2:]
        else:
            usage()
    if len(argv) < 2:
        usage()
    lib = os.path.abspath(lib)
    if not os.path.exists(lib):
        sys.exit("fault_census: no library %s" % lib)
    faults, acqs = record(lib, argv[1:])
    if not faults:
        sys.exit("fault_census: no faults recorded (is perf allowed here?)")
    if not acqs:
        print("faults: %d (no pool trace: is %s hakmem?)" % (len(faults), lib))
        return
    # The trace's clock starts at hakmem's start: its offset is found where a slab's first
    # fault follows its acquisition most closely (a carve writes the slab right away), among
    # the first slabs, which are fresh memory.
    first = {}
    for t, addr in faults:
        first.setdefault(addr >> SLOT_SHIFT, t)
    off = min(first[a[4] >> SLOT_SHIFT] - a[0] for a in acqs[:200]
              if (a[4] >> SLOT_SHIFT) in first)
    acqs = sorted((t + off, st, size, k, base) for t, st, size, k, base in acqs)
    chunks = set(a[4] >> 21 for a in acqs)  # the SuperSlabs' 2 MiB chunks
    used = collections.defaultdict(list)  # slot -> its acquisitions, in time order
    for a in acqs:
        for j in range(a[3]):
            used[(a[4] >> SLOT_SHIFT) + j].append(a)
    # --gap 0: no phases, every fault counts.
    fph = phases([f[0] for f in faults], gap) if gap > 0 else [1] * len(faults)
    bins = collections.Counter()
    by_size = collections.defaultdict(collections.Counter)
    for (t, addr), ph in zip(faults, fph):
        if ph == 0:
            continue
        hist = [a for a in used.get(addr >> SLOT_SHIFT, []) if a[0] <= t]
        if not hist:
            what = "header" if (addr >> 21) in chunks and (addr >> SLOT_SHIFT) & 31 == 0 \
                else "outside"
        elif len(hist) == 1:
            what = "new slot (stage %s)" % hist[-1][1]
        elif hist[-2][2] == hist[-1][2] and hist[-2][4] == hist[-1][4]:
            what = "same class"
        else:
            what = "other use"
        bins[what] += 1
        if hist:
            by_size[what][hist[-1][2]] += 1
    later = sum(bins.values())
    print("faults: %d in the first phase, %d in the %d phases after it" %
          (fph.count(0), later, max(fph)))
    for what, n in bins.most_common():
        top = ", ".join("%d B %d" % (s, c) for s, c in by_size[what].most_common(4))
        print("  %-20s %7d  %5.1f%%  %s" % (what, n, 100.0 * n / max(later, 1),
                                             ("by class size: " + top) if top else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
