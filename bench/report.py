#!/usr/bin/env python3
"""bench/report.py - summary tables and chart for bench/run.sh.

  report.py summarize RUNS.csv SUMMARY.csv TABLES.md [--title T]
      median per benchmark and allocator, ratios, tables (markdown)
  report.py chart SUMMARY.csv OUT.png [--title T]
      one PNG with matplotlib
  report.py gnuplot SUMMARY.csv OUT.png WORKDIR [--title T]
      writes WORKDIR/chart.gp (+ data files) for gnuplot, when matplotlib
      is not installed

The summarize step uses the standard library only.  See docs/BENCHMARKS.md.
"""
import argparse
import csv
import math
import os
import statistics
import sys

REF = "glibc"
PEER = "mimalloc"
ALLOC_ORDER = ["glibc", "hakmem", "hakmem-before", "mimalloc", "jemalloc", "tcmalloc"]
COLORS = {
    "glibc": "#7f7f7f",
    "hakmem": "#d62728",
    "hakmem-before": "#f7a8a8",
    "mimalloc": "#1f77b4",
    "jemalloc": "#2ca02c",
    "tcmalloc": "#ff7f0e",
}

SUMMARY_FIELDS = [
    "benchmark", "allocator", "runs_ok", "runs", "median", "unit", "better",
    "vs_glibc", "vs_mimalloc", "min", "max", "peak_rss_kb", "syscalls",
    "mmap", "munmap", "madvise", "mremap", "brk", "minflt", "rss_after_free_kb", "mode",
    "args", "notes",
]


def fnum(s):
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def alloc_key(a):
    return (ALLOC_ORDER.index(a) if a in ALLOC_ORDER else len(ALLOC_ORDER), a)


def speedup(fig, ref, better):
    """>1 means better than the reference, whatever the unit."""
    if fig is None or ref is None or fig <= 0 or ref <= 0:
        return None
    return fig / ref if better == "higher" else ref / fig


def parse_extra(s):
    out = {}
    for kv in (s or "").split(";"):
        if "=" in kv:
            k, v = kv.split("=", 1)
            out[k] = v
    return out


def fmt_fig(v, unit):
    if v is None:
        return "FAIL"
    if unit == "s":
        return "%.3f s" % v
    if unit == "Ir/pair":
        return "%.1f" % v
    return "%.3g" % v


def fmt_ratio(r):
    return "-" if r is None else "%.2f" % r


def mib(kb):
    return "-" if kb is None else "%.1f" % (kb / 1024.0)


def median_extra(rows, key):
    vals = [fnum(parse_extra(r["extra"]).get(key)) for r in rows]
    vals = [v for v in vals if v is not None]
    return "%d" % statistics.median(vals) if vals else ""


def notes_for(bench, extras):
    """A short note with the secondary figures worth seeing in the table."""
    def med(key):
        vals = [fnum(e.get(key)) for e in extras]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    if bench.startswith("burst"):
        peak, after = med("rss_peak_kb"), med("rss_after_free_kb")
        if peak is not None and after is not None:
            return "RSS %s MiB at peak, %s MiB after free" % (mib(peak), mib(after))
    if bench.startswith("thread_churn"):
        first, end = med("rss_first_kb"), med("rss_end_kb")
        if first is not None and end is not None:
            return "RSS %s MiB after round 1, %s MiB at end" % (mib(first), mib(end))
    if bench.startswith("waves"):
        flt, idle = med("faults_after_round1"), med("idle_rss_kb")
        if flt is not None and idle is not None:
            return "%d faults after round 1, RSS %s MiB in pauses" % (flt, mib(idle))
    if bench.startswith("tight"):
        ns = med("ns_per_pair")
        if ns is not None:
            return "%.2f ns per pair" % ns
    return ""


def summarize(args):
    with open(args.runs, newline="") as f:
        rows = list(csv.DictReader(f))
    benches = []
    groups = {}
    for r in rows:
        b, a = r["benchmark"], r["allocator"]
        if b not in benches:
            benches.append(b)
        groups.setdefault((b, a), []).append(r)

    summary = []
    for b in benches:
        allocs = sorted({a for (bb, a) in groups if bb == b}, key=alloc_key)
        recs = {}
        for a in allocs:
            rs = groups[(b, a)]
            ok = [r for r in rs if r["status"] == "ok" and fnum(r["figure"]) is not None]
            figs = [fnum(r["figure"]) for r in ok]
            peaks = [fnum(r["peak_rss_kb"]) for r in ok if fnum(r["peak_rss_kb"]) is not None]
            first = rs[0]
            unit = next((r["unit"] for r in ok if r["unit"]), first["unit"])
            better = next((r["better"] for r in ok if r["better"]), first["better"])
            recs[a] = {
                "benchmark": b,
                "allocator": a,
                "runs_ok": len(ok),
                "runs": len(rs),
                "median": statistics.median(figs) if figs else None,
                "min": min(figs) if figs else None,
                "max": max(figs) if figs else None,
                "unit": unit,
                "better": better,
                "peak_rss_kb": statistics.median(peaks) if peaks else None,
                "syscalls": first["syscalls"],
                "mmap": first["mmap"],
                "munmap": first["munmap"],
                "madvise": first["madvise"],
                "mremap": first["mremap"],
                "brk": first["brk"],
                "mode": first["mode"],
                "args": first["args"],
                "notes": notes_for(b, [parse_extra(r["extra"]) for r in ok]),
                "rss_after_free_kb": median_extra(ok, "rss_after_free_kb"),
                "minflt": median_extra(ok, "minflt"),
                "failures": sorted({r["status"] for r in rs if r["status"] != "ok"}),
            }
        ref = recs.get(REF, {}).get("median")
        peer = recs.get(PEER, {}).get("median")
        for a in allocs:
            rec = recs[a]
            rec["vs_glibc"] = speedup(rec["median"], ref, rec["better"])
            rec["vs_mimalloc"] = speedup(rec["median"], peer, rec["better"])
            summary.append(rec)

    with open(args.summary, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SUMMARY_FIELDS, extrasaction="ignore")
        w.writeheader()
        for rec in summary:
            out = dict(rec)
            for k in ("median", "min", "max"):
                out[k] = "" if rec[k] is None else "%.6g" % rec[k]
            for k in ("vs_glibc", "vs_mimalloc"):
                out[k] = "" if rec[k] is None else "%.4f" % rec[k]
            out["peak_rss_kb"] = "" if rec["peak_rss_kb"] is None else "%d" % rec["peak_rss_kb"]
            w.writerow(out)

    lines = []
    if args.title:
        lines += ["# " + args.title, ""]
    if args.libs:
        lines += ["Allocators: " + ", ".join(x.replace("=", " = ", 1)
                                            for x in args.libs.split(";") if x), ""]
    lines += [
        "Figure: median over the timed runs.  vs_glibc / vs_mimalloc: speed-up",
        "factor (>1 = better than that allocator, for ops/s and for seconds",
        "alike).  Peak RSS: median of getrusage/statm peak, MiB.  minflt: minor",
        "page faults of the whole run (getrusage), median.  mmap / munmap /",
        "madvise: calls counted by one extra strace run (quick parameters).",
        "",
    ]
    for b in benches:
        recs = [r for r in summary if r["benchmark"] == b]
        if not recs:
            continue
        unit, better = recs[0]["unit"], recs[0]["better"]
        lines.append("## %s  (%s, %s is better)" % (b, unit, better))
        lines.append("")
        lines.append("`%s`" % recs[0]["args"])
        lines.append("")
        header = ["allocator", "median", "vs_glibc", "vs_mimalloc", "peak_rss_MiB",
                  "minflt", "mmap", "munmap", "madvise", "runs", "notes"]
        table = []
        for r in recs:
            runs = "%d/%d" % (r["runs_ok"], r["runs"])
            if r["failures"]:
                runs += " " + ",".join(r["failures"])
            table.append([
                r["allocator"], fmt_fig(r["median"], unit), fmt_ratio(r["vs_glibc"]),
                fmt_ratio(r["vs_mimalloc"]), mib(r["peak_rss_kb"]), r["minflt"] or "-",
                r["mmap"] or "-", r["munmap"] or "-", r["madvise"] or "-", runs,
                r["notes"],
            ])
        if b.startswith("callgrind"):
            header = ["allocator", "Ir_per_pair", "vs_glibc", "vs_mimalloc", "runs"]
            table = [[t[0], t[1], t[2], t[3], t[9]] for t in table]
        widths = [max(len(str(x)) for x in col) for col in zip(header, *table)]
        def row(cells):
            return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
        lines.append(row(header))
        lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for t in table:
            lines.append(row(t))
        lines.append("")
    with open(args.tables, "w") as f:
        f.write("\n".join(lines))


# ---------------------------------------------------------------------------
# chart
# ---------------------------------------------------------------------------

def load_summary(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    benches = []
    for r in rows:
        if r["benchmark"] not in benches:
            benches.append(r["benchmark"])
    allocs = sorted({r["allocator"] for r in rows}, key=alloc_key)
    return rows, benches, allocs


def panels_from_summary(rows, benches, allocs):
    """List of panels: (title, ylabel, {alloc: value or None}, kind, labels).

    kind 'ratio': speed-up vs glibc (higher is better), reference line at 1.
    kind 'abs':   absolute value, lower is better.
    """
    by = {(r["benchmark"], r["allocator"]): r for r in rows}
    panels = []
    geo = {a: [] for a in allocs}
    for b in benches:
        vals = {}
        for a in allocs:
            r = by.get((b, a))
            vals[a] = fnum(r["vs_glibc"]) if r else None
            if vals[a] is not None and not b.startswith("callgrind"):
                geo[a].append(vals[a])
        ref = by.get((b, REF))
        unit = ref["unit"] if ref else ""
        better = ref["better"] if ref else "higher"
        if ref and fnum(ref["median"]) is not None:
            sub = "glibc = %s %s" % (fmt_fig(fnum(ref["median"]), unit).replace(" s", ""), unit)
        else:
            sub = "glibc failed"
        what = "time" if unit == "s" else ("instructions" if unit == "Ir/pair" else "throughput")
        title = "%s\n%s; %s" % (b, what, sub)
        present = {a for a in allocs if (b, a) in by}
        panels.append((title, "speed-up vs glibc", vals, "ratio", present))
    # geometric mean over the timed benchmarks
    gvals = {a: (math.exp(sum(math.log(v) for v in geo[a]) / len(geo[a])) if geo[a] else None)
             for a in allocs}
    panels.insert(0, ("GEOMEAN of all timed benchmarks\n(speed-up vs glibc, higher is better)",
                      "speed-up vs glibc", gvals, "ratio", set(allocs)))
    # peak RSS relative to glibc, geometric mean over the timed benchmarks
    rss = {a: [] for a in allocs}
    for b in benches:
        ref = by.get((b, REF))
        rk = fnum(ref["peak_rss_kb"]) if ref else None
        for a in allocs:
            r = by.get((b, a))
            v = fnum(r["peak_rss_kb"]) if r else None
            if rk and v and not b.startswith("callgrind"):
                rss[a].append(v / rk)
    rvals = {a: (math.exp(sum(math.log(v) for v in rss[a]) / len(rss[a])) if rss[a] else None)
             for a in allocs}
    panels.append(("GEOMEAN of peak RSS relative to glibc\n(memory, LOWER is better)",
                   "peak RSS / glibc's", rvals, "absratio", set(allocs)))
    # memory return (burst)
    for b in benches:
        if not b.startswith("burst"):
            continue
        vals = {}
        for a in allocs:
            r = by.get((b, a))
            v = fnum(r["rss_after_free_kb"]) if r else None
            v = v / 1024.0 if v is not None else None
            vals[a] = v
        panels.append(("%s: RSS after free (MiB)\n(memory returned? lower is better)" % b,
                       "MiB", vals, "abs", {a for a in allocs if (b, a) in by}))
    return panels


def chart(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows, benches, allocs = load_summary(args.summary)
    panels = panels_from_summary(rows, benches, allocs)
    ncols = 4
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.3 * nrows + 1.0),
                             squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.axis("off")
            continue
        title, ylabel, vals, kind, present = panels[i]
        xs = list(range(len(allocs)))
        heights = [vals.get(a) or 0.0 for a in allocs]
        bars = ax.bar(xs, heights, color=[COLORS.get(a, "#9467bd") for a in allocs],
                      edgecolor="black", linewidth=0.5)
        top = max([h for h in heights if h] + [0.0 if kind == "abs" else 1.0])
        ax.set_ylim(0, top * 1.22 if top > 0 else 1)
        if kind in ("ratio", "absratio"):
            ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
        for x, a, bar in zip(xs, allocs, bars):
            v = vals.get(a)
            if a not in present:
                label = "n/a"
            elif v is None:
                label = "FAIL"
            elif kind in ("ratio", "absratio"):
                label = "%.2f" % v
            else:
                label = "%.0f" % v
            y = bar.get_height() if v is not None else 0
            ax.text(x, y + top * 0.02, label, ha="center", va="bottom", fontsize=8,
                    color="red" if label == "FAIL" else "black",
                    fontweight="bold" if a == "hakmem" else "normal")
        ax.set_xticks(xs)
        ax.set_xticklabels(allocs, fontsize=8, rotation=0)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
        if kind != "ratio" or i == 0:
            ax.set_facecolor("#f4f4f4")
    handles = [Patch(facecolor=COLORS.get(a, "#9467bd"), edgecolor="black", label=a)
               for a in allocs]
    fig.legend(handles=handles, loc="upper right", ncol=len(allocs), fontsize=9,
               frameon=False)
    fig.suptitle((args.title or "hakmem benchmarks") +
                 "\nwhite panels: speed relative to glibc (= 1.0, dashed line), HIGHER IS BETTER;"
                 " grey panels: summaries and memory (memory: LOWER is better)",
                 fontsize=11, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / (3.3 * nrows + 1.0)))
    fig.savefig(args.png, dpi=90)
    print("chart: %s" % args.png, file=sys.stderr)


def gnuplot(args):
    """Write WORKDIR/chart.gp drawing the same panels with gnuplot."""
    rows, benches, allocs = load_summary(args.summary)
    panels = panels_from_summary(rows, benches, allocs)
    ncols = 4
    nrows = (len(panels) + ncols - 1) // ncols
    w, h = 400 * ncols, 300 * nrows + 80
    gp = []
    gp.append('set terminal pngcairo noenhanced size %d,%d font "sans,9"' % (w, h))
    gp.append('set output "%s"' % args.png.replace('"', '\\"'))
    title = (args.title or "hakmem benchmarks") + \
        "\\nspeed relative to glibc (= 1.0), HIGHER IS BETTER; memory panels: LOWER is better"
    gp.append('set multiplot layout %d,%d title "%s"' % (nrows, ncols, title.replace('"', "'")))
    gp.append("set style fill solid 0.8 border -1")
    gp.append("set boxwidth 0.7")
    gp.append("set grid ytics")
    gp.append("unset key")
    gp.append("set xrange [-0.6:%f]" % (len(allocs) - 0.4))
    xt = ", ".join('"%s" %d' % (a, i) for i, a in enumerate(allocs))
    gp.append("set xtics (%s) font \",8\"" % xt)
    for i, (ptitle, ylabel, vals, kind, present) in enumerate(panels):
        data = os.path.join(args.workdir, "panel%d.dat" % i)
        with open(data, "w") as f:
            for j, a in enumerate(allocs):
                v = vals.get(a)
                if a not in present:
                    label = "n/a"
                elif v is None:
                    label = "FAIL"
                else:
                    label = ("%.0f" % v) if kind == "abs" else ("%.2f" % v)
                color = int(COLORS.get(a, "#9467bd")[1:], 16)
                f.write('%d %g "%s" %d\n' % (j, v if v is not None else 0.0, label, color))
        gp.append('set title "%s" font ",9"' % ptitle.replace("\n", "\\n").replace('"', "'"))
        gp.append('set ylabel "%s"' % ylabel)
        top = max([v for v in vals.values() if v] + [0.0 if kind == "abs" else 1.0])
        gp.append("set yrange [0:%g]" % (top * 1.2 if top > 0 else 1))
        ref = "1 with lines dt 2 lc rgb 'black', " if kind != "abs" else ""
        gp.append("plot %s'%s' using 1:2:4 with boxes lc rgb variable, "
                  "'' using 1:2:3 with labels offset 0,0.7 font \",8\"" % (ref, data))
    gp.append("unset multiplot")
    with open(os.path.join(args.workdir, "chart.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("runs")
    s.add_argument("summary")
    s.add_argument("tables")
    s.add_argument("--title", default="")
    s.add_argument("--libs", default="", help="NAME=PATH;... shown under the title")
    c = sub.add_parser("chart")
    c.add_argument("summary")
    c.add_argument("png")
    c.add_argument("--title", default="")
    g = sub.add_parser("gnuplot")
    g.add_argument("summary")
    g.add_argument("png")
    g.add_argument("workdir")
    g.add_argument("--title", default="")
    args = ap.parse_args()
    {"summarize": summarize, "chart": chart, "gnuplot": gnuplot}[args.cmd](args)


if __name__ == "__main__":
    main()
