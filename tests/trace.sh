#!/usr/bin/env bash
# HAKMEM_TRACE: each category gives its events on a scripted workload (tests/trace_workload.c),
# to stderr or to HAKMEM_TRACE_FILE ("%p": the pid), each line stamped with the time; with
# tracing off the same run writes nothing.
set -u
cd "$(dirname "$0")/.."
lib=$PWD/build/libhakmem.so
prog=build/tests/trace_workload
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$(LD_PRELOAD=$lib $prog 2>&1 >/dev/null)
if [ -z "$out" ]; then echo "PASS: trace off: nothing written"
else echo "FAIL: trace off: nothing written (got: $(printf '%s\n' "$out" | head -3))"; fi

# category EVENT-PATTERN
while read -r cat pattern; do
    out=$(HAKMEM_TRACE=$cat LD_PRELOAD=$lib $prog 2>&1 >/dev/null)
    others=$(printf '%s\n' "$out" | grep -v "^hakmem trace [0-9]*\.[0-9]\{6\} $cat: " | grep -c .)
    if printf '%s\n' "$out" | grep -Eq "^hakmem trace [0-9]+\.[0-9]{6} $cat: $pattern" &&
        [ "$others" -eq 0 ]; then
        echo "PASS: trace $cat ($(printf '%s\n' "$out" | grep -c .) lines)"
    else
        echo "FAIL: trace $cat (no line matching '$pattern', or $others lines of other kinds)"
        printf '%s\n' "$out" | head -5 | sed 's/^/  /'
    fi
done <<'T'
pool acquire stage [123] .*class_size [0-9]+ slots [0-9]+ slab 0x
os mmap addr 0x[0-9a-f]+ bytes [0-9]+
large hit \(served from free large memory\) bytes 3145728
ace soft cap up .*class_size 8192 from 1 to 2
thread adopt \(an exited thread's slab\) class_size 768
fail malloc failed: TooBig \(above PTRDIFF_MAX\) bytes 9223372036854775808
T

HAKMEM_TRACE=all HAKMEM_TRACE_FILE="$tmp/trace.%p" LD_PRELOAD=$lib $prog >/dev/null 2>"$tmp/err"
files=$(ls "$tmp"/trace.* 2>/dev/null | wc -l)
cats=$(cat "$tmp"/trace.* 2>/dev/null | sed -n 's/^hakmem trace [0-9.]* \([a-z]*\): .*/\1/p' | sort -u | tr '\n' ' ')
if [ "$files" -eq 1 ] && [ ! -s "$tmp/err" ] && [ "$cats" = "ace fail large os pool thread " ]; then
    echo "PASS: trace all to HAKMEM_TRACE_FILE with %p"
else
    echo "FAIL: trace all to HAKMEM_TRACE_FILE with %p ($files files, categories: $cats)"
fi
