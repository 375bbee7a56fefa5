#!/usr/bin/env bash
# bench/run.sh - run the hakmem benchmark suite against glibc and the peers.
#
# What `make bench` runs.  See docs/BENCHMARKS.md for how to read the output.
#
# Environment:
#   BENCH=quick|full     parameter set (default full; quick < 3 min)
#   THREADS=2            thread counts for the threaded programs, e.g. 4,8,16
#   REPS=3               timed repetitions per benchmark and allocator (>= 1)
#   ONLY=a,b             run only these benchmarks (names of the table below,
#                        or programs of bench/Makefile: all their entries)
#   ALLOCATORS=a,b       run only these allocators (glibc,hakmem,mimalloc,...)
#   NO_STRACE=1          skip the strace syscall-count runs
#   NO_CALLGRIND=1       skip the callgrind instruction counts
#   NO_CHART=1           skip the PNG chart
#   HAKMEM_LIB=path      library under test (default build/libhakmem.so)
#   EXTRA=name=path,...  more libraries to run beside it (e.g. an older build);
#                        name=path:VAR=value:... runs that one with the
#                        variables set (hakmem-ace0=build/libhakmem.so:HAKMEM_ACE=0)
#   LIBDIR=path          where to look for the Debian peers
#                        (default /usr/lib/<multiarch>)
#   RESULTS_DIR=path     where results go (default bench/results)
#   RUN_TIMEOUT=secs     per-run time limit (default 30 quick, 300 full)
#   BENCH_BIN=path       programs built already (bench/device_prep.sh's), used as they
#                        are: nothing is built (default: build/bench, made first)
#
# Output: progress on stderr, the tables on stdout; files in RESULTS_DIR:
#   runs-<stamp>.csv     one row per run
#   summary-<stamp>.csv  one row per benchmark and allocator
#   tables-<stamp>.md    the tables printed at the end
#   chart-<stamp>.png    one chart (matplotlib, else gnuplot)
#   latest-*.{csv,md,png} copies of the newest of each
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR=$ROOT/bench
BIN=${BENCH_BIN:-$ROOT/build/bench}

BENCH=${BENCH:-full}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
ONLY=${ONLY:-}
ALLOCATORS=${ALLOCATORS:-}
RESULTS_DIR=${RESULTS_DIR:-$BENCH_DIR/results}
HAKMEM_LIB=${HAKMEM_LIB:-$ROOT/build/libhakmem.so}

die() { echo "run.sh: error: $*" >&2; exit 2; }
log() { echo "$*" >&2; }

case $BENCH in
    quick) RUN_TIMEOUT=${RUN_TIMEOUT:-30} ;;
    full)  RUN_TIMEOUT=${RUN_TIMEOUT:-300} ;;
    *) die "BENCH must be quick or full (got '$BENCH')" ;;
esac
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "REPS must be a positive integer (got '$REPS')"
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "RUN_TIMEOUT must be a positive integer"

IFS=, read -r -a THREAD_LIST <<< "$THREADS"
((${#THREAD_LIST[@]} > 0)) || die "THREADS is empty"
for t in "${THREAD_LIST[@]}"; do
    if ! [[ $t =~ ^[1-9][0-9]*$ ]] || ((t > 1024)); then
        die "THREADS must be a comma-separated list of integers 1..1024 (got '$THREADS')"
    fi
done

# ---------------------------------------------------------------------------
# Benchmark table.  Fields: name | threaded (1/0) | quick args | full args.
# name is a program of bench/Makefile, or ID:PROGRAM to run a program with
# other arguments under a name of its own.  @T@ is replaced by the thread
# count.  The strace run always uses the quick arguments (syscall counts are
# comparable between modes and stay cheap).
# ---------------------------------------------------------------------------
BENCH_DEFS=(
    "random_mixed|0|4000000 8192 42|10000000 8192 42"
    "random_mixed_big:random_mixed|0|4000000 1000000 42|20000000 2000000 42"
    "random_mixed_count:random_mixed|0|4000000 8192 42 1|10000000 8192 42 1"
    "tight|0|32 20000000|32 50000000"
    "tight_mid:tight|0|100000 2000000|100000 10000000"
    "larson|1|@T@ 0.5 16 1024 1000 50000 42|@T@ 3 16 1024 1000 50000 42"
    "larson_short:larson|1|@T@ 0.5 8 1000 5000 1000 42|@T@ 3 8 1000 5000 1000 42"
    "cache_thrash|1|@T@ 1000 8 80000|@T@ 1000 8 400000"
    "cache_scratch|1|@T@ 1000 8 80000|@T@ 1000 8 400000"
    "prod_cons|1|@T@ 1000000 16 256 1024 42|@T@ 4000000 16 256 1024 42"
    "prod_cons_256k:prod_cons|1|@T@ 20000 16 262144 64 42|@T@ 100000 16 262144 64 42"
    "thread_churn|1|@T@ 500 1000 16 512 42|@T@ 2000 2000 16 512 42"
    "thread_churn_main:thread_churn|1|@T@ 300 2000 16 3072 42 main|@T@ 2000 2000 16 3072 42 main"
    "crowd|0|1000 8 16 4096 3 42|1000 8 16 4096 10 42"
    "crowd_idle:crowd|0|1000 8 16 4096 3 42 0|1000 8 16 4096 10 42 0"
    "mixed_churn|1|@T@ 20 2000 1024 4096 42|@T@ 100 2000 1024 4096 42"
    "large_churn:mixed_churn|0|1 10 2000 256 4096 42 0,0,0,1|1 60 2000 512 4096 42 0,0,0,1"
    "mid_churn:mixed_churn|0|1 20 2000 256 4096 42 0,0,1,0|1 100 2000 1024 4096 42 0,0,1,0"
    "shared_swap|1|@T@ 2000000 100000 5 16384 42|@T@ 10000000 100000 5 16384 42"
    "shared_swap_mid:shared_swap|1|@T@ 2000000 100000 5 16384 42 25|@T@ 10000000 100000 5 16384 42 25"
    "shared_swap_big16:shared_swap|0|16 200000 1024 100 1048576 42|16 1000000 1024 100 1048576 42"
    "scatter|1|@T@ 10000 1000 100 2 8 16000 42|@T@ 50000 1000 100 2 8 16000 42"
    "burst|0|128 1200 42|1024 1200 42"
    "realloc_grow|0|1000 100000 262144 42|1000 500000 262144 42"
    "realloc_step:realloc_grow|0|8 100000 4194304 42 4096|8 400000 4194304 42 4096"
    "large|0|300 64 32768 4 42|2000 64 32768 4 42"
    "large_4m:large|0|20000 64 4096 4 42|20000 64 4096 4 42"
    "large_many:large|0|5000 1024 4096 1024 42|20000 1024 4096 1024 42"
    "large_untouched:large|0|20000 5120 25600 20 42 0|100000 5120 25600 20 42 0"
    "large_calloc:large|0|200 5120 25600 20 42 0 1|2000 5120 25600 20 42 0 1"
    "large_swap|1|@T@ 50000 64 1024 4096 42|@T@ 200000 64 1024 4096 42"
    "big_zero|0|50 5 25 42|300 5 25 42"
    "waves|0|8 32 100 42|20 64 300 42"
    "waves_big:waves|0|8 64 100 42 8388608|20 128 300 42 8388608"
    "phases|0|3 20 80 42|5 20 80 42"
    "teardown|0|500000 4 16 128 random 42|2000000 5 16 128 random 42"
    "teardown_handoff:teardown|0|500000 4 16 128 random 42 1|2000000 5 16 128 random 42 1"
    "teardown_pool:teardown|0|500000 4 16 128 random 42 8|2000000 5 16 128 random 42 8"
    "sweep|0|200000 10 50 16 128 42|200000 40 50 16 128 42"
)
def_name() { local n=${1%%|*}; echo "${n%%:*}"; }   # the entry's name
def_prog() { local n=${1%%|*}; echo "${n#*:}"; }    # the program it runs
CG_SIZE=32
CG_N1=100000
CG_N2=200000

in_list() { # in_list WORD COMMA-LIST
    local w=$1 l=,$2,
    [[ $l == *,"$w",* ]]
}

if [[ -n $ONLY ]]; then
    for p in ${ONLY//,/ }; do
        found=0
        for def in "${BENCH_DEFS[@]}"; do
            [[ $(def_name "$def") == "$p" || $(def_prog "$def") == "$p" ]] && found=1
        done
        ((found)) || die "ONLY: unknown benchmark '$p'"
    done
fi

# ---------------------------------------------------------------------------
# Build the programs.
# ---------------------------------------------------------------------------
if [[ -n ${BENCH_BIN:-} ]]; then
    [[ -x $BIN/tight ]] || die "BENCH_BIN: no benchmark programs in '$BIN'"
else
    log "== building benchmark programs (make -C bench)"
    make -s -C "$BENCH_DIR" >&2 || die "building the benchmark programs failed"
fi

# ---------------------------------------------------------------------------
# Allocators: glibc always, hakmem when built, Debian peers when installed.
# ---------------------------------------------------------------------------
if [[ -z ${LIBDIR:-} ]]; then
    ma=$(gcc -print-multiarch 2>/dev/null || true)
    LIBDIR=/usr/lib/${ma:-x86_64-linux-gnu}
fi

find_lib() { # find_lib PATTERN... -> first existing file
    local pat f
    for pat in "$@"; do
        for f in "$LIBDIR"/$pat; do
            if [[ -e $f ]]; then
                echo "$f"
                return 0
            fi
        done
    done
    return 1
}

ALLOC_NAMES=(glibc)
ALLOC_LIBS=("")
ALLOC_ENVS=("") # VAR=value words for the allocator's runs, space-separated
add_alloc() { # add_alloc NAME LIB [ENV]
    if [[ -n $ALLOCATORS ]] && ! in_list "$1" "$ALLOCATORS"; then
        return 0
    fi
    ALLOC_NAMES+=("$1")
    ALLOC_LIBS+=("$2")
    ALLOC_ENVS+=("${3:-}")
}
if [[ -e $HAKMEM_LIB ]]; then
    add_alloc hakmem "$HAKMEM_LIB"
else
    log "note: $HAKMEM_LIB not found: hakmem is not benchmarked (run make first)"
fi
# Other builds beside it, e.g. EXTRA=hakmem-before=/tmp/old/libhakmem.so: a
# before/after comparison interleaved in one run.
if [[ -n ${EXTRA:-} ]]; then
    IFS=, read -r -a extra_list <<< "$EXTRA"
    for e in "${extra_list[@]}"; do
        [[ $e == ?*=?* ]] || die "EXTRA: expected NAME=PATH[:VAR=value...], got '$e'"
        spec=${e#*=}
        path=${spec%%:*}
        vars=""
        [[ $spec == *:* ]] && vars=${spec#*:}
        [[ -e $path ]] || die "EXTRA: $path not found"
        IFS=: read -r -a var_list <<< "$vars"
        for v in "${var_list[@]}"; do
            [[ $v =~ ^[A-Z_][A-Z0-9_]*=[^[:space:]]*$ ]] ||
                die "EXTRA: expected VAR=value after the path, got '$v'"
        done
        ALLOC_NAMES+=("${e%%=*}")
        ALLOC_LIBS+=("$path")
        ALLOC_ENVS+=("${var_list[*]}")
    done
fi
if lib=$(find_lib 'libmimalloc.so.2' 'libmimalloc.so*'); then add_alloc mimalloc "$lib"; fi
if lib=$(find_lib 'libjemalloc.so.2' 'libjemalloc.so*'); then add_alloc jemalloc "$lib"; fi
if lib=$(find_lib 'libtcmalloc_minimal.so.4' 'libtcmalloc_minimal.so*' \
                  'libtcmalloc.so.4' 'libtcmalloc.so*'); then
    add_alloc tcmalloc "$lib"
fi
if [[ -n $ALLOCATORS ]] && ! in_list glibc "$ALLOCATORS"; then
    log "note: glibc is always run (it is the reference for the ratios)"
fi

# Environment prefix for one allocator: glibc runs with LD_PRELOAD unset.
# Only the benchmark process gets the preload, never timeout/strace/valgrind.
env_for() { # env_for INDEX -> sets ENV_CMD array
    if [[ -z ${ALLOC_LIBS[$1]} ]]; then
        ENV_CMD=(env -u LD_PRELOAD)
    else
        ENV_CMD=(env "LD_PRELOAD=${ALLOC_LIBS[$1]}")
    fi
    # shellcheck disable=SC2206  # the words are VAR=value, checked above
    ENV_CMD+=(${ALLOC_ENVS[$1]})
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Sanity check: the library must load (ld.so only warns when it cannot
# preload, and the program would silently run on glibc) and survive a
# short run.
OK_NAMES=()
OK_LIBS=()
OK_ENVS=()
for i in "${!ALLOC_NAMES[@]}"; do
    env_for "$i"
    if timeout 20 "${ENV_CMD[@]}" "$BIN/tight" 32 1000 >"$TMP/sanity.out" 2>"$TMP/sanity.err" &&
        ! grep -q 'cannot be preloaded' "$TMP/sanity.err" &&
        tail -n 1 "$TMP/sanity.out" | grep -q '^bench=tight '; then
        OK_NAMES+=("${ALLOC_NAMES[$i]}")
        OK_LIBS+=("${ALLOC_LIBS[$i]}")
        OK_ENVS+=("${ALLOC_ENVS[$i]}")
    else
        log "warning: allocator ${ALLOC_NAMES[$i]} (${ALLOC_LIBS[$i]:-libc}) failed the sanity run; skipped:"
        sed 's/^/    /' "$TMP/sanity.err" | head -n 5 >&2
    fi
done
ALLOC_NAMES=("${OK_NAMES[@]}")
ALLOC_LIBS=("${OK_LIBS[@]}")
ALLOC_ENVS=("${OK_ENVS[@]}")
NALLOC=${#ALLOC_NAMES[@]}
((NALLOC > 0)) || die "no allocator passed the sanity run (not even glibc)"
for i in "${!ALLOC_NAMES[@]}"; do
    log "allocator: ${ALLOC_NAMES[$i]}  ${ALLOC_LIBS[$i]:-(libc, no LD_PRELOAD)} ${ALLOC_ENVS[$i]}"
done

# ---------------------------------------------------------------------------
# Expand the benchmark list (program x thread count).
# ---------------------------------------------------------------------------
B_ID=()     # benchmark id shown in tables, e.g. larson-t2
B_PROG=()
B_ARGS=()   # timed arguments
B_SARGS=()  # strace arguments
for def in "${BENCH_DEFS[@]}"; do
    IFS='|' read -r _ threaded qargs fargs <<< "$def"
    name=$(def_name "$def")
    prog=$(def_prog "$def")
    if [[ -n $ONLY ]] && ! in_list "$name" "$ONLY" && ! in_list "$prog" "$ONLY"; then
        continue
    fi
    args=$fargs
    [[ $BENCH == quick ]] && args=$qargs
    if [[ $threaded == 1 ]]; then
        for t in "${THREAD_LIST[@]}"; do
            B_ID+=("$name-t$t")
            B_PROG+=("$prog")
            B_ARGS+=("${args//@T@/$t}")
            B_SARGS+=("${qargs//@T@/$t}")
        done
    else
        B_ID+=("$name")
        B_PROG+=("$prog")
        B_ARGS+=("$args")
        B_SARGS+=("$qargs")
    fi
done
NBENCH=${#B_ID[@]}

# ---------------------------------------------------------------------------
# Tools.
# ---------------------------------------------------------------------------
HAVE_STRACE=0
if [[ -z ${NO_STRACE:-} ]]; then
    if command -v strace >/dev/null 2>&1 &&
        strace -f -c -o /dev/null -e trace=mmap /bin/true >/dev/null 2>&1; then
        HAVE_STRACE=1
    else
        log "note: strace missing or not permitted: no syscall counts (make bench-deps)"
    fi
fi
STRACE_OPTS=(-f -c -e "trace=mmap,munmap,madvise,mremap,brk")
if ((HAVE_STRACE)) && strace --seccomp-bpf -f -c -o /dev/null -e trace=mmap /bin/true >/dev/null 2>&1; then
    STRACE_OPTS=(--seccomp-bpf "${STRACE_OPTS[@]}")
fi
HAVE_VALGRIND=0
if [[ -z ${NO_CALLGRIND:-} ]]; then
    if command -v valgrind >/dev/null 2>&1; then
        HAVE_VALGRIND=1
    else
        log "note: valgrind missing: no callgrind instruction counts (make bench-deps)"
    fi
fi

PY=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1; then PY=$p; break; fi
done
[[ -n $PY ]] || die "python3 is needed for the summary (make bench-deps)"

# ---------------------------------------------------------------------------
# Results files.
# ---------------------------------------------------------------------------
mkdir -p "$RESULTS_DIR"
STAMP=$(date +%Y%m%d-%H%M%S)
RUNS=$RESULTS_DIR/runs-$STAMP.csv
SUMMARY=$RESULTS_DIR/summary-$STAMP.csv
TABLES=$RESULTS_DIR/tables-$STAMP.md
CHART=$RESULTS_DIR/chart-$STAMP.png
echo "date,benchmark,allocator,rep,figure,unit,peak_rss_kb,syscalls,better,status,mmap,munmap,madvise,mremap,brk,mode,args,extra" > "$RUNS"

# run_strace INDEX ALLOC -> sets SC_* (counts, "" when unknown)
run_strace() {
    local b=$1 a=$2 f="$TMP/strace.txt"
    SC_MMAP="" SC_MUNMAP="" SC_MADVISE="" SC_MREMAP="" SC_BRK="" SC_SUM=""
    ((HAVE_STRACE)) || return 0
    local preload=(-E LD_PRELOAD) v
    [[ -n ${ALLOC_LIBS[$a]} ]] && preload=(-E "LD_PRELOAD=${ALLOC_LIBS[$a]}")
    for v in ${ALLOC_ENVS[$a]}; do preload+=(-E "$v"); done
    # shellcheck disable=SC2086  # word splitting of the argument string is wanted
    if ! timeout "$RUN_TIMEOUT" strace "${STRACE_OPTS[@]}" -o "$f" "${preload[@]}" \
        "$BIN/${B_PROG[$b]}" ${B_SARGS[$b]} >/dev/null 2>"$TMP/strace.err"; then
        log "    strace run failed for ${B_ID[$b]} / ${ALLOC_NAMES[$a]}"
        return 0
    fi
    SC_MMAP=0 SC_MUNMAP=0 SC_MADVISE=0 SC_MREMAP=0 SC_BRK=0
    local name calls
    while read -r name calls; do
        case $name in
            mmap) SC_MMAP=$calls ;;
            munmap) SC_MUNMAP=$calls ;;
            madvise) SC_MADVISE=$calls ;;
            mremap) SC_MREMAP=$calls ;;
            brk) SC_BRK=$calls ;;
        esac
    done < <(awk 'NF >= 5 && $4 ~ /^[0-9]+$/ { print $NF, $4 }' "$f")
    SC_SUM=$((SC_MMAP + SC_MUNMAP + SC_MADVISE))
}

fmt_fig() { # human-friendly figure for progress lines
    awk -v v="$1" 'BEGIN { if (v >= 1e5) printf "%.3e", v; else printf "%.4g", v }'
}

# Other processes disturb the figures (2 cores).  Measure how much CPU was
# used by anything other than this script and its children, from /proc/stat
# (user+nice+system+irq+softirq+steal) minus our own utime+stime+cutime+cstime.
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
NCPU=$(nproc 2>/dev/null || echo 1)
cpu_sample() { # -> "busy_ticks own_ticks wall_ns"
    local busy own
    busy=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat 2>/dev/null || echo 0)
    own=$(sed 's/^.*) //' "/proc/$$/stat" 2>/dev/null | awk '{ print $12 + $13 + $14 + $15 }' || echo 0)
    echo "$busy $own $(date +%s%N)"
}
foreign_pct() { # foreign_pct "SAMPLE0" "SAMPLE1" -> percent of all CPUs
    awk -v a="$1" -v b="$2" -v hz="$HZ" -v n="$NCPU" 'BEGIN {
        split(a, x, " "); split(b, y, " ");
        wall = (y[3] - x[3]) / 1e9; other = (y[1] - x[1]) - (y[2] - x[2]);
        if (wall <= 0 || other < 0) other = 0;
        printf "%.0f", (wall > 0 ? 100 * other / (wall * hz * n) : 0) }'
}
pre=$(cpu_sample)
sleep 1
PRE_LOAD=$(foreign_pct "$pre" "$(cpu_sample)")
if ((PRE_LOAD >= 25)); then
    log "warning: other processes are using about $PRE_LOAD% of the CPUs right now: the figures will be disturbed"
fi
RUN_SAMPLE0=$(cpu_sample)

TOTAL=$((NBENCH * NALLOC * REPS))
N=0
START=$(date +%s)
log "== BENCH=$BENCH THREADS=$THREADS REPS=$REPS: $NBENCH benchmarks x $NALLOC allocators x $REPS reps = $TOTAL timed runs"
for b in "${!B_ID[@]}"; do
    id=${B_ID[$b]}
    # one untimed strace run per allocator (also warms the page cache)
    B_SAMPLE0=$(cpu_sample)
    declare -a S_MMAP=() S_MUNMAP=() S_MADVISE=() S_MREMAP=() S_BRK=() S_SUM=()
    for a in "${!ALLOC_NAMES[@]}"; do
        if ((HAVE_STRACE)); then
            log "[strace] $id  ${ALLOC_NAMES[$a]}  (${B_PROG[$b]} ${B_SARGS[$b]})"
        fi
        run_strace "$b" "$a"
        S_MMAP[a]=$SC_MMAP S_MUNMAP[a]=$SC_MUNMAP S_MADVISE[a]=$SC_MADVISE
        S_MREMAP[a]=$SC_MREMAP S_BRK[a]=$SC_BRK S_SUM[a]=$SC_SUM
    done
    for ((rep = 1; rep <= REPS; rep++)); do
        for a in "${!ALLOC_NAMES[@]}"; do
            N=$((N + 1))
            alloc=${ALLOC_NAMES[$a]}
            env_for "$a"
            # shellcheck disable=SC2086
            if timeout "$RUN_TIMEOUT" "${ENV_CMD[@]}" "$BIN/${B_PROG[$b]}" ${B_ARGS[$b]} \
                >"$TMP/out" 2>"$TMP/err"; then
                rc=0
            else
                rc=$?
            fi
            line=$(tail -n 1 "$TMP/out" || true)
            figure="" unit="" better="" peak="" extra="" status=ok
            if ((rc == 124)); then
                status="timeout(${RUN_TIMEOUT}s)"
            elif ((rc > 128)); then
                status="SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
            elif ((rc != 0)); then
                status="exit($rc)"
            elif grep -q 'cannot be preloaded' "$TMP/err"; then
                status="preload-failed"
            elif [[ $line != "bench=${B_PROG[$b]} "* ]]; then
                status="no-result-line"
            fi
            if [[ $status == ok ]]; then
                read -r -a fields <<< "$line"
                key=${fields[1]%%=*}
                figure=${fields[1]#*=}
                case $key in
                    ops_per_sec) unit=ops/s better=higher ;;
                    seconds) unit=s better=lower ;;
                    *) unit=$key better=higher ;;
                esac
                for kv in "${fields[@]:2}"; do
                    if [[ $kv == peak_rss_kb=* ]]; then
                        peak=${kv#*=}
                    else
                        extra+="${extra:+;}$kv"
                    fi
                done
                log "[$N/$TOTAL] $id  $alloc  rep $rep/$REPS: $(fmt_fig "$figure") $unit"
            else
                log "[$N/$TOTAL] $id  $alloc  rep $rep/$REPS: FAILED ($status)"
                sed 's/^/    /' "$TMP/err" | tail -n 3 >&2
            fi
            printf '%s,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' \
                "$(date -Iseconds)" "$id" "$alloc" "$rep" "$figure" "$unit" "$peak" \
                "${S_SUM[a]}" "$better" "$status" "${S_MMAP[a]}" "${S_MUNMAP[a]}" \
                "${S_MADVISE[a]}" "${S_MREMAP[a]}" "${S_BRK[a]}" "$BENCH" \
                "${B_PROG[$b]} ${B_ARGS[$b]}" "$extra" >> "$RUNS"
        done
    done
    pct=$(foreign_pct "$B_SAMPLE0" "$(cpu_sample)")
    if ((pct >= 25)); then
        log "warning: other processes (or kernel threads) used about $pct% of the CPUs during $id: its figures may be disturbed"
    fi
done

# ---------------------------------------------------------------------------
# Callgrind: instructions per malloc+free pair of `tight 32`, as the
# difference of two runs so that start-up cost cancels.  Callgrind does not
# replace malloc (memcheck does), so the preloaded allocator is what runs.
# ---------------------------------------------------------------------------
if ((HAVE_VALGRIND)); then
    cg_ir() { # cg_ir INDEX N -> prints total Ir
        local out="$TMP/callgrind.out"
        env_for "$1"
        timeout "$RUN_TIMEOUT" "${ENV_CMD[@]}" valgrind --tool=callgrind \
            --soname-synonyms=somalloc=NONE --callgrind-out-file="$out" \
            "$BIN/tight" "$CG_SIZE" "$2" >/dev/null 2>"$TMP/cg.err" || return 1
        awk '/^(summary|totals):/ { print $2; exit }' "$out"
    }
    for a in "${!ALLOC_NAMES[@]}"; do
        alloc=${ALLOC_NAMES[$a]}
        log "[callgrind] tight $CG_SIZE  $alloc  (N=$CG_N1 and N=$CG_N2)"
        figure="" status=ok
        if ir1=$(cg_ir "$a" "$CG_N1") && ir2=$(cg_ir "$a" "$CG_N2") &&
            [[ $ir1 =~ ^[0-9]+$ && $ir2 =~ ^[0-9]+$ ]]; then
            figure=$(awk -v a="$ir1" -v b="$ir2" -v n1="$CG_N1" -v n2="$CG_N2" \
                'BEGIN { printf "%.2f", (b - a) / (n2 - n1) }')
            extra="ir_n1=$ir1;ir_n2=$ir2"
            log "    $figure Ir per malloc+free pair"
        else
            status=callgrind-failed extra=""
            log "    callgrind failed for $alloc"
            tail -n 3 "$TMP/cg.err" | sed 's/^/    /' >&2
        fi
        printf '%s,%s,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' \
            "$(date -Iseconds)" "callgrind_tight$CG_SIZE" "$alloc" 1 "$figure" "Ir/pair" "" \
            "" lower "$status" "" "" "" "" "" "$BENCH" \
            "tight $CG_SIZE $CG_N1 vs $CG_N2 under callgrind" "$extra" >> "$RUNS"
    done
fi

# ---------------------------------------------------------------------------
# Summary, tables, chart.
# ---------------------------------------------------------------------------
ELAPSED=$(($(date +%s) - START))
FOREIGN=$(foreign_pct "$RUN_SAMPLE0" "$(cpu_sample)")
log "other processes (and kernel threads) used about $FOREIGN% of the CPUs during the run"
LIBS_DESC=""
for i in "${!ALLOC_NAMES[@]}"; do
    LIBS_DESC+="${ALLOC_NAMES[$i]}=${ALLOC_LIBS[$i]:-libc (no LD_PRELOAD)}${ALLOC_ENVS[$i]:+ with ${ALLOC_ENVS[$i]}};"
done
"$PY" "$BENCH_DIR/report.py" summarize "$RUNS" "$SUMMARY" "$TABLES" --libs "$LIBS_DESC" \
    --title "hakmem benchmarks: BENCH=$BENCH THREADS=$THREADS REPS=$REPS ($(date +%F), ${ELAPSED}s, other CPU load ${FOREIGN}%)"
cat "$TABLES"

if [[ -z ${NO_CHART:-} ]]; then
    chart_py=""
    for p in /usr/bin/python3 python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import matplotlib' >/dev/null 2>&1; then
            chart_py=$p
            break
        fi
    done
    if [[ -n $chart_py ]]; then
        "$chart_py" "$BENCH_DIR/report.py" chart "$SUMMARY" "$CHART" \
            --title "hakmem benchmarks (BENCH=$BENCH, $(date +%F))"
    elif command -v gnuplot >/dev/null 2>&1; then
        "$PY" "$BENCH_DIR/report.py" gnuplot "$SUMMARY" "$CHART" "$TMP" \
            --title "hakmem benchmarks (BENCH=$BENCH, $(date +%F))"
        gnuplot "$TMP/chart.gp"
    else
        log "note: neither python3-matplotlib nor gnuplot found: no chart (make bench-deps)"
    fi
fi

for f in runs summary tables chart; do
    case $f in tables) ext=md ;; chart) ext=png ;; *) ext=csv ;; esac
    src=$RESULTS_DIR/$f-$STAMP.$ext
    [[ -e $src ]] && cp "$src" "$RESULTS_DIR/latest-$f.$ext"
done
log "== done in ${ELAPSED}s; results in $RESULTS_DIR:"
for f in "$RUNS" "$SUMMARY" "$TABLES" "$CHART"; do
    [[ -e $f ]] && log "   $f"
done
exit 0
