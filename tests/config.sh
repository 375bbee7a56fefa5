#!/usr/bin/env bash
# HAKMEM_* configuration: the README's table must match the code's (src/config.c, printed by
# HAKMEM_CONFIG=1): the same variables, defaults and values; each variable is tried with a
# good, a malformed and an out-of-range value (a warning naming it and the default used, and
# the program runs on); an unknown HAKMEM_ name warns; valid settings print nothing.
set -u
cd "$(dirname "$0")/.."
lib=$PWD/build/libhakmem.so
probe=build/tests/hello

run() { env "$@" LD_PRELOAD="$lib" "$probe" 2>&1 >/dev/null; }

code=$(run HAKMEM_CONFIG=1)
table=$(printf '%s\n' "$code" | python3 -c '
import re, sys
code = {}
for l in sys.stdin:
    m = re.match(r"hakmem config: (HAKMEM_\w+)=.* \(default (.*); values (.*)\): ", l)
    if m: code[m[1]] = (m[2], m[3])
readme = {}
for l in open("README.md"):
    m = re.match(r"\| `(HAKMEM_\w+)` \| (.*?) \| (.*?) \| ", l)
    if m: readme[m[1]] = (m[2].strip("`"), m[3].strip("`").replace("\\|", "|"))
bad = [n for n in sorted(set(code) | set(readme)) if code.get(n) != readme.get(n)]
for n in bad: print(f"  {n}: code {code.get(n)}, README {readme.get(n)}")
print(f"{len(code)} {len(bad)}")
')
n=$(printf '%s\n' "$table" | tail -1 | cut -d" " -f1); nbad=$(printf '%s\n' "$table" | tail -1 | cut -d" " -f2)
if [ "$n" -gt 5 ] && [ "$nbad" -eq 0 ]; then echo "PASS: config README table matches the code ($n variables)"
else echo "FAIL: config README table differs from the code"; printf '%s\n' "$table" | sed '$d'; fi

# expect NAME VALUE PATTERN: the setting gives exactly one stderr line matching PATTERN (a
# warning), or with PATTERN "-" no warning and HAKMEM_CONFIG shows the value taken.
expect() {
    local name=$1 value=$2 pat=$3 out
    if [ "$pat" = "-" ]; then
        out=$(run "$name=$value" | grep '^hakmem: ') # warnings (the stats and config print too)
        shown=$(run "$name=$value" HAKMEM_CONFIG=1 | grep "^hakmem config: $name=")
        if [ -z "$out" ] && [ "${shown#hakmem config: $name=$value }" != "$shown" ]; then
            echo "PASS: config $name=$value is taken"
        else echo "FAIL: config $name=$value (stderr: $out; shown: $shown)"; fi
        return
    fi
    out=$(run "$name=$value"); rc=$?
    if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ] &&
        printf '%s\n' "$out" | grep -Eq "^hakmem: $name=.* is $pat; using the default "; then
        echo "PASS: config $name=$value warns"
    else echo "FAIL: config $name=$value (status $rc, stderr: $out)"; fi
}

long=$(printf 'x%.0s' $(seq 300))
while read -r name default values; do
    case $values in
    0..*) max=${values#0..}
        expect "$name" "$max" -
        expect "$name" "12x" "not a number from 0 to $max"
        expect "$name" "$((max + 1))" "out of range \(0 to $max\)" ;;
    "0|1") expect "$name" 1 -; expect "$name" yes "not a number from 0 to 1"
        expect "$name" 2 "out of range \(0 to 1\)" ;;
    *"|all") expect "$name" pool,os -; expect "$name" pool,bogus "not a list of .*" ;;
    *"|"*) expect "$name" "${values##*|}" -; expect "$name" nonsense "not one of .*" ;;
    "a directory") expect "$name" /nonexistent -; expect "$name" "$long" "longer than 255 bytes" ;;
    "a file") [ "$name" = HAKMEM_LIB ] && continue
        expect "$name" /dev/null -; expect "$name" "$long" "longer than 255 bytes" ;;
    esac
done < <(printf '%s\n' "$code" |
    sed -n 's/^hakmem config: \(HAKMEM_[A-Z_]*\)=.* (default \(.*\); values \(.*\)): .*/\1 \2 \3/p')

out=$(run HAKMEM_PURGE_DELAY_MSS=5)
if printf '%s\n' "$out" | grep -q '^hakmem: unknown variable HAKMEM_PURGE_DELAY_MSS (ignored'; then
    echo "PASS: config an unknown HAKMEM_ name warns"
else echo "FAIL: config an unknown HAKMEM_ name warns (stderr: $out)"; fi
out=$(run HAKMEM_ACE=0 HAKMEM_SOFT_CAP=3 HAKMEM_ON_ERROR=warn HAKMEM_PURGE_DELAY_MS=)
if [ -z "$out" ]; then echo "PASS: config valid and empty settings print nothing"
else echo "FAIL: config valid and empty settings print nothing (stderr: $out)"; fi

# HAKMEM_LARGE_ARENAS=0: one large arena per CPU the process may run on where that is more
# than two (at most 64), else one (src/large.c says why).
arenas() { # arenas CPUS: the arenas a process on those CPUs (taskset's list) starts with
    taskset -c "$1" env HAKMEM_STATS=1 LD_PRELOAD="$lib" "$probe" 2>&1 >/dev/null |
        sed -n 's/^  large: \([0-9]*\) arenas.*/\1/p'
}
mine=$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))') # the CPUs allowed
set -- $mine
cpus=$#
all=$((cpus > 2 ? (cpus > 64 ? 64 : cpus) : 1))
one=$(arenas "$1"); every=$(arenas "$(printf '%s\n' "$mine" | tr ' ' ,)")
two=1; [ "$cpus" -ge 2 ] && two=$(arenas "$1,$2")
if [ "$one" = 1 ] && [ "$two" = 1 ] && [ "$every" = "$all" ]; then
    echo "PASS: config the large arenas follow the CPUs (1 CPU: 1, 2: 1, $cpus: $all)"
else echo "FAIL: config the large arenas follow the CPUs (1 CPU: $one, 2: $two, $cpus: $every; want 1, 1, $all)"; fi
