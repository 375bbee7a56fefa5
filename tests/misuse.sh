#!/usr/bin/env bash
# Each misuse must produce one line "hakmem: OP(0xADDR): PROBLEM" on stderr and abort; with
# HAKMEM_ABORT_ON_MISUSE=0 the same line is printed and the program carries on.
set -u
cd "$(dirname "$0")/.."
lib=$PWD/build/libhakmem.so
bin=build/tests/test_misuse

expect() { # expect MODE REGEX
    local err rc
    err=$(LD_PRELOAD=$lib $bin "$1" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 134 ] && [ "$(printf '%s\n' "$err" | grep -c .)" -eq 1 ] &&
        printf '%s\n' "$err" | grep -Eq "^hakmem: $2"; then
        echo "PASS: misuse $1"
    else
        echo "FAIL: misuse $1 (status $rc, stderr: $err)"
    fi
}

expect free-stack 'free\(0x[0-9a-f]+\): invalid pointer \(not allocated by hakmem\)$'
expect free-mmap 'free\(0x[0-9a-f]+\): invalid pointer \(not allocated by hakmem\)$'
expect free-misaligned 'free\(0x[0-9a-f]+\): invalid pointer \(not a block hakmem handed out\)$'
expect free-interior 'free\(0x[0-9a-f]+\): invalid pointer \(not a block hakmem handed out\)$'
expect free-interior-48 'free\(0x[0-9a-f]+\): invalid pointer \(not a block hakmem handed out\)$'
expect free-uncarved 'free\(0x[0-9a-f]+\): invalid pointer \(not a block hakmem handed out\)$'
expect free-interior-owned 'free\(0x[0-9a-f]+\): invalid pointer \(not a block hakmem handed out\)$'
expect double-free 'free\(0x[0-9a-f]+\): double free$'
expect double-free-mid 'free\(0x[0-9a-f]+\): double free$'
expect double-free-large 'free\(0x[0-9a-f]+\): double free$'
expect free-interior-mid 'free\(0x[0-9a-f]+\): invalid pointer \(not a block hakmem handed out\)$'
expect free-interior-large 'free\(0x[0-9a-f]+\): invalid pointer \(not allocated by hakmem\)$'
expect realloc-foreign 'realloc\(0x[0-9a-f]+\): invalid pointer'
expect usable-size-foreign 'malloc_usable_size\(0x[0-9a-f]+\): invalid pointer'

out=$(HAKMEM_ABORT_ON_MISUSE=0 LD_PRELOAD=$lib $bin free-stack 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^hakmem: free(0x' &&
    printf '%s\n' "$out" | grep -q '^survived$'; then
    echo "PASS: misuse report without abort (HAKMEM_ABORT_ON_MISUSE=0)"
else
    echo "FAIL: misuse report without abort (status $rc: $out)"
fi
