#!/usr/bin/env bash
# Runs every test and prints one closing line "N passed, N failed"; exits 1 on any failure.
# Each test program prints "PASS: ..." / "FAIL: ..." lines; scripts do the same.
set -u
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() { # run NAME CMD...: counts its PASS/FAIL lines; a crash without them is one failure
    local name=$1; shift
    echo "== $name"
    local out rc
    out=$("$@" 2>&1); rc=$?
    printf '%s\n' "$out" | tee -a "$log" | grep -E '^(PASS|FAIL)|^  ' || true
    if [ $rc -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL'; then
        echo "FAIL: $name exited with status $rc" | tee -a "$log"
        printf '%s\n' "$out" | tail -5
    fi
}

# test_threads checks that the large tier's arenas keep to themselves: it needs several
# whatever the CPUs, and more than 8 to see that as many threads that meet take as many
# arenas. A test that hangs fails after 10 minutes rather than holding the run.
arenas="timeout 600 env HAKMEM_LARGE_ARENAS=16"
for t in test_size_class test_slab test_api test_random test_threads; do
    run "$t (release)" $arenas build/tests/$t
    run "$t (debug)" $arenas build/tests/${t}_debug
done
run "test_random (release, HAKMEM_ACE=0)" timeout 600 env HAKMEM_ACE=0 build/tests/test_random
for t in test_api test_random test_threads; do
    run "$t (hardened)" $arenas build/tests/${t}_hardened
done
# Out of memory: each under its own address-space limit (not under the sanitizers).
for f in "" _debug _hardened; do
    run "test_oom${f:+ ($f)}" timeout 300 build/tests/test_oom$f
done

# The memory lifecycle, one process per mode under the configuration it needs (see the top of
# tests/test_lifecycle.c). The cgroup mode watches a directory made to look like a cgroup.
cgdir=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$cgdir"' EXIT
lifecycle() { # lifecycle FLAVOUR: every mode of test_lifecycle in that build
    local bin=build/tests/test_lifecycle$1
    run "test_lifecycle stages${1:+ ($1)}" env HAKMEM_ACE=0 HAKMEM_SOFT_CAP=0 \
        HAKMEM_PURGE_DELAY_MS=60000 HAKMEM_LARGE_CACHE_MB=16 $bin stages
    run "test_lifecycle fixed${1:+ ($1)}" env HAKMEM_ACE=0 HAKMEM_SOFT_CAP=2 \
        HAKMEM_PURGE_DELAY_MS=200 HAKMEM_UNMAP_DELAY_MS=400 $bin fixed
    run "test_lifecycle ace${1:+ ($1)}" env HAKMEM_ACE=1 $bin ace
    run "test_lifecycle cache${1:+ ($1)}" env HAKMEM_ACE=1 $bin cache
    echo 1000000000 > "$cgdir/memory.max"
    echo 100000000 > "$cgdir/memory.current"
    run "test_lifecycle cgroup${1:+ ($1)}" env HAKMEM_ACE=1 HAKMEM_CGROUP="$cgdir" \
        HAKMEM_POPULATE=on $bin cgroup
    run "test_lifecycle slack${1:+ ($1)}" env HAKMEM_ACE=1 HAKMEM_SS_CACHE=2 $bin slack
    run "test_lifecycle bg${1:+ ($1)}" env HAKMEM_ACE=0 HAKMEM_BG_THREAD=1 \
        HAKMEM_PURGE_DELAY_MS=100 $bin bg
    run "test_lifecycle kept${1:+ ($1)}" env HAKMEM_ACE=0 HAKMEM_SOFT_CAP=8 HAKMEM_SS_CACHE=1 \
        HAKMEM_PURGE_DELAY_MS=60000 $bin kept
    run "test_lifecycle fill${1:+ ($1)}" env -u HAKMEM_POPULATE $bin fill
    run "test_lifecycle fill_wave${1:+ ($1)}" env -u HAKMEM_POPULATE $bin fill_wave
    run "test_lifecycle fill_on${1:+ ($1)}" env HAKMEM_POPULATE=on $bin fill_on
    run "test_lifecycle fill_off${1:+ ($1)}" env HAKMEM_POPULATE=off $bin fill_off
}
lifecycle ""
lifecycle _debug
for t in test_size_class test_slab test_api test_threads; do
    run "$t (ASan+UBSan)" $arenas build/tests/${t}_asan
done
run "test_random (ASan+UBSan, 10% of the operations)" build/tests/test_random_asan 10
lifecycle _asan
# TSan follows at most 64 locks held by one thread, and fork holds every lock: 4 arenas.
run "test_threads (TSan)" timeout 900 env HAKMEM_LARGE_ARENAS=4 TSAN_OPTIONS=halt_on_error=1 build/tests/test_threads_tsan
run "test_random (TSan, 10% of the operations)" env TSAN_OPTIONS=halt_on_error=1 build/tests/test_random_tsan 10
run "test_api through LD_PRELOAD" env LD_PRELOAD="$PWD/build/libhakmem.so" build/tests/test_api_preload
run "test_api through LD_PRELOAD (hardened)" env LD_PRELOAD="$PWD/build/hardened/libhakmem.so" \
    build/tests/test_api_preload
run "start-up without pthread keys" timeout 60 env LD_PRELOAD="$PWD/build/libhakmem.so" build/tests/test_no_keys
run "loaded at run time (dlopen)" build/tests/test_dlopen "$PWD/build/libhakmem.so"
# Several large arenas, as a machine of more than two CPUs has by default (one on two CPUs or
# fewer, and in the run below that asks for one).
run "stress, 10 s, 4 large arenas (make stress runs it longer)" \
    env HAKMEM_LARGE_ARENAS=4 build/tests/stress 10 4
# More threads than cores by far: idle owners' slabs are let go, and past 32 threads first
# blocks come from shared slabs.
run "stress, 10 s, 48 threads" build/tests/stress 10 48
# One large arena for every thread, as HAKMEM_LARGE_ARENAS=1 and a process on two CPUs or
# fewer have: an allocation there once went on without the lock.
run "stress, 10 s, 4 threads, one large arena (HAKMEM_LARGE_ARENAS=1)" \
    env HAKMEM_LARGE_ARENAS=1 build/tests/stress 10 4
# Pages released at once and no empty slab kept: every slab that empties goes to the pool and
# its pages at once, so one that reaches the pool while still in use is soon found (an
# orphan freed into as its last owner's own did, 1 run in 120: heap.c, hk_heap_free_own).
run "stress, 10 s, 8 threads, nothing kept (HAKMEM_PURGE_DELAY_MS=0 HAKMEM_SOFT_CAP=0)" \
    env HAKMEM_PURGE_DELAY_MS=0 HAKMEM_SOFT_CAP=0 build/tests/stress 10 8
# The chaos build (src/chaos.h): random yields and sleeps where threads race, and ticks, helps
# and hand-overs many times as often, so that a window of a few instructions between what a
# thread read unmarked and what it does is crossed thousands of times a second (the fault
# above, undone: 10 runs of 5 s in 10 stopped, against 1 run in 175 of the plain stress).
run "stress under the chaos build, 10 s, 32 threads, nothing kept" \
    env HAKMEM_PURGE_DELAY_MS=0 HAKMEM_SOFT_CAP=0 build/tests/stress_chaos 10 32
# Workers of 100 to 1,100 steps: threads exit and hand their heaps over 10 times as often.
run "stress under the chaos build, 10 s, 48 threads of 100 to 1,100 steps" \
    build/tests/stress_chaos 10 48 1 1100
run "fuzz ops (libFuzzer, 10 s; make fuzz runs it longer)" tests/fuzz.sh 10
run "configuration" tests/config.sh
run "tracing" tests/trace.sh
run "statistics and the hakmem command" tests/stats.sh
run "make install, pkg-config, make uninstall" tests/install.sh
run "misuse reports" tests/misuse.sh
run "real programs" tests/programs.sh
run "real programs (hardened)" env HAKMEM_LIB="$PWD/build/hardened/libhakmem.so" tests/programs.sh
run "servers and interpreters" tests/servers.sh
if [ -x tests/bench_smoke.sh ]; then run "benchmark smoke" tests/bench_smoke.sh; fi

pass=$(grep -c '^PASS' "$log")
fail=$(grep -c '^FAIL' "$log")
echo
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
