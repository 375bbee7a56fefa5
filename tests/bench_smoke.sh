#!/usr/bin/env bash
# tests/bench_smoke.sh - smoke test of the benchmark programs under hakmem.
#
# Builds the programs (bench/Makefile -> build/bench/), runs each once with
# tiny parameters with LD_PRELOAD=build/libhakmem.so, and checks that it
# exits 0 and prints its result line.  Prints one line per program:
#   PASS: bench <name>
#   FAIL: bench <name> (reason)
# Exits 0 iff all passed.  Takes a few seconds (well under 30).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/build/bench
LIB=${HAKMEM_LIB:-$ROOT/build/libhakmem.so}
PER_RUN_TIMEOUT=${BENCH_SMOKE_TIMEOUT:-10}

# program | tiny arguments
CASES=(
    "random_mixed|20000 256 42"
    "larson|2 0.1 16 1024 100 1000 42"
    "cache_thrash|2 20 8 100"
    "cache_scratch|2 20 8 100"
    "tight|32 100000"
    "tight|100000 100000"
    "prod_cons|2 20000 16 256 64 42"
    "prod_cons|2 5000 16 262144 64 42"
    "thread_churn|2 5 200 16 512 42"
    "thread_churn|2 5 200 16 3072 42 main"
    "crowd|50 8 16 4096 2 42"
    "crowd|50 8 16 4096 2 42 0"
    "burst|8 10 42"
    "realloc_grow|100 5000 65536 42"
    "large|20 64 4096 4 42"
    "big_zero|3 1 3 42"
    "large_swap|2 2000 16 1024 4096 42"
    "mixed_churn|2 2 500 256 2048 42"
    "mixed_churn|1 2 300 64 2048 42 0,0,1,1"
    "scatter|2 200 200 50 2 8 16000 42"
    "teardown|20000 2 16 128 random 42"
    "teardown|20000 2 16 128 lifo 42"
    "teardown|20000 2 16 128 random 42 1"
    "waves|3 4 10 42"
    "waves|3 8 10 42 4194304"
    "phases|2 4 8 42"
    "sweep|5000 3 50 16 128 42"
)

pass=0
fail=0
result() { # result NAME REASON-or-empty
    if [[ -z $2 ]]; then
        echo "PASS: bench $1"
        pass=$((pass + 1))
    else
        echo "FAIL: bench $1 ($2)"
        fail=$((fail + 1))
    fi
}

build_log=$(mktemp)
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$build_log" "$out" "$err"' EXIT

build_ok=1
if ! make -s -C "$ROOT/bench" >"$build_log" 2>&1; then
    build_ok=0
    echo "bench_smoke: building the benchmark programs failed:" >&2
    tail -n 20 "$build_log" >&2
fi

for c in "${CASES[@]}"; do
    name=${c%%|*}
    args=${c#*|}
    if ((!build_ok)); then
        result "$name" "build failed"
        continue
    fi
    if [[ ! -x $BIN/$name ]]; then
        result "$name" "$BIN/$name not built"
        continue
    fi
    if [[ ! -e $LIB ]]; then
        result "$name" "$LIB missing; run make first"
        continue
    fi
    rc=0
    # shellcheck disable=SC2086  # the argument string is split on purpose
    timeout "$PER_RUN_TIMEOUT" env LD_PRELOAD="$LIB" "$BIN/$name" $args >"$out" 2>"$err" || rc=$?
    last=$(tail -n 1 "$out" || true)
    if ((rc == 124)); then
        result "$name" "timed out after ${PER_RUN_TIMEOUT}s"
    elif ((rc > 128)); then
        result "$name" "killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
    elif ((rc != 0)); then
        msg=$(tail -n 1 "$err" | cut -c1-120 || true)
        result "$name" "exit status $rc${msg:+: $msg}"
    elif grep -q 'cannot be preloaded' "$err"; then
        result "$name" "ld.so could not preload $LIB"
    elif ! [[ $last =~ ^bench=$name\ (ops_per_sec|seconds)=[0-9] && $last == *" peak_rss_kb="* ]]; then
        result "$name" "no result line; last line: '${last:0:80}'"
    else
        result "$name" ""
    fi
done

echo "bench smoke summary: $pass of $((pass + fail)) programs passed"
((fail == 0))
