#!/usr/bin/env bash
# bench/device_sweep.sh - the thread sweep, run where bench/device_prep.sh's .device/ was
# carried (the 16-core machine): bench/run.sh with the programs and libraries found there,
# every hakmem-*.so beside this tree's build, results into $OUT (or bench/results).
#
# Environment (defaults sized to end within about 8 minutes on 16 cores):
#   THREADS=4,8,16   ONLY=<the issue's threaded rows>   REPS=3   BENCH=quick
#   SWEEP_LIMIT=480  seconds after which the sweep is stopped (what ran is in the CSV)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=$ROOT/.device
[[ -x $DEV/bin/tight && -e $DEV/lib/libhakmem.so ]] ||
    { echo "device_sweep.sh: error: no .device here (run bench/device_prep.sh, carry .device)" >&2; exit 2; }

extra=""
for f in "$DEV"/lib/hakmem-*.so; do
    [[ -e $f ]] || continue
    n=$(basename "$f" .so)
    extra+="${extra:+,}$n=$f"
done
results=${OUT:-$ROOT/bench/results}
mkdir -p "$results"
{
    echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "kernel: $(uname -r)"
    echo "glibc: $(ldd --version 2>/dev/null | head -1)"
    echo "hakmem: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "extra: ${extra:-none}"
} | tee "$results/device.txt" >&2

export BENCH=${BENCH:-quick} REPS=${REPS:-3} THREADS=${THREADS:-4,8,16}
export ONLY=${ONLY:-larson,larson_short,cache_scratch,prod_cons,prod_cons_256k,thread_churn,shared_swap}
export NO_STRACE=1 NO_CALLGRIND=1 NO_CHART=1 RUN_TIMEOUT=${RUN_TIMEOUT:-60}
export BENCH_BIN=$DEV/bin LIBDIR=$DEV/lib HAKMEM_LIB=$DEV/lib/libhakmem.so EXTRA=$extra
export RESULTS_DIR=$results
timeout "${SWEEP_LIMIT:-480}" bash "$ROOT/bench/run.sh" > "$results/sweep.md" ||
    echo "device_sweep.sh: run.sh stopped early (status $?): the runs so far are in $results" >&2
