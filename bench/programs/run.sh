#!/usr/bin/env bash
# bench/programs/run.sh [REPS] - real programs on hakmem beside its peers.
#
# Runs each script below with each allocator preloaded (glibc: none), REPS times
# (default 3), the allocators interleaved, and prints the median seconds and peak RSS of
# each (/usr/bin/time). The programs are whatever the machine has: lua5.4, python3,
# sqlite3, redis-server (with redis-benchmark and redis-cli), ruby and gcc; one that is
# missing is skipped. HAKMEM_LIB names the library to measure (default build/libhakmem.so).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REPS=${1:-3}
M=/usr/lib/x86_64-linux-gnu
declare -A LIBS=([hakmem]=${HAKMEM_LIB:-$ROOT/build/libhakmem.so} [glibc]= \
    [mimalloc]=$M/libmimalloc.so.2 [jemalloc]=$M/libjemalloc.so.2 \
    [tcmalloc]=$M/libtcmalloc_minimal.so.4)
ORDER=(hakmem glibc mimalloc jemalloc tcmalloc)
PROGS=(
    "lua_tables|lua5.4|lua5.4 $HERE/lua_tables.lua"
    "lua_tables_strings|lua5.4|lua5.4 $HERE/lua_tables_strings.lua"
    "lua_trees|lua5.4|lua5.4 $HERE/lua_trees.lua"
    "lua_words|lua5.4|lua5.4 $HERE/lua_words.lua"
    "lua_garbage|lua5.4|lua5.4 $ROOT/tests/lua/garbage.lua"
    "py_dict|python3|python3 $HERE/py_dict.py"
    "sqlite_rows|sqlite3|sqlite3 :memory: < $HERE/sqlite_rows.sql"
    "redis_lists|redis-server|$HERE/redis_lists.sh"
    "ruby_index|ruby|ruby $HERE/ruby_index.rb"
    "gcc|gcc|gcc -O2 -c $ROOT/src/heap.c -I$ROOT/src -I$ROOT/include -o /dev/null"
)
[[ -x /usr/bin/time ]] || { echo "run.sh: /usr/bin/time is needed" >&2; exit 2; }
out=$(mktemp)
tf=$(mktemp)
trap 'rm -f "$out" "$tf"' EXIT
for ((r = 0; r < REPS; r++)); do
    for p in "${PROGS[@]}"; do
        IFS='|' read -r name tool cmd <<<"$p"
        command -v "$tool" >/dev/null || continue
        for a in "${ORDER[@]}"; do
            lib=${LIBS[$a]}
            [[ -z $lib || -e $lib ]] || continue
            LD_PRELOAD=$lib /usr/bin/time -o "$tf" -f '%e %M' bash -c "$cmd" >/dev/null 2>&1 ||
                { echo "run.sh: $name failed on $a" >&2; continue; }
            echo "$name $a $(tail -n 1 "$tf")" >>"$out"
        done
    done
done
python3 - "$out" "${ORDER[@]}" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
names = []
for line in open(sys.argv[1]):
    n, a, t, m = line.split()
    if n not in names: names.append(n)
    rows[n][a].append((float(t), int(m) / 1024))
order = [a for a in sys.argv[2:]]
print("| program | " + " | ".join(order) + " |")
print("|---" * (len(order) + 1) + "|")
for n in names:
    cells = []
    for a in order:
        v = rows[n].get(a)
        cells.append("-" if not v else "%.2f s, %.0f MiB" % (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)))
    print("| `%s` | %s |" % (n, " | ".join(cells)))
PY
