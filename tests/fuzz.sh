#!/usr/bin/env bash
# Runs the libFuzzer harness build/fuzz/fuzz_ops (tests/fuzz_ops.c; `make fuzz` builds it) for
# SECONDS (default 60) and prints one line: "PASS: fuzz ops (N execs, M coverage)", or
# "FAIL: fuzz ops ..." naming the input that failed, then exits 1.
# The fuzzer works on build/fuzz/corpus, seeded from tests/fuzz_corpus (which it never writes),
# so what one run learns the next one starts from. Crash inputs and the log go to build/fuzz/.
# Replay a failing input: build/fuzz/fuzz_ops FILE (FUZZ_OPS_TRACE=1 lists its operations).
set -u
cd "$(dirname "$0")/.." || exit 1
secs=${1:-60}
bin=build/fuzz/fuzz_ops
dir=build/fuzz
corpus=$dir/corpus
log=$dir/fuzz.log

if [ ! -x "$bin" ]; then
    echo "FAIL: fuzz ops ($bin is missing: make fuzz builds it)"
    exit 1
fi
mkdir -p "$corpus"
cp -n tests/fuzz_corpus/* "$corpus"/ # seeds only: what the fuzzer found stays

# hakmem keeps freed memory for reuse (up to hundreds of MiB with its caches) besides the
# harness's 64 MiB of live blocks and ASan's own, hence the RSS limit. A single input runs in
# milliseconds: 30 s means hakmem hangs.
"$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 -max_len=4096 \
    -artifact_prefix="$dir/" -print_final_stats=1 "$corpus" >"$log" 2>&1
rc=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
if [ $rc -eq 0 ] && [ -n "$execs" ]; then
    echo "PASS: fuzz ops (${execs} execs, ${cov:-0} coverage)"
    exit 0
fi
artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
echo "FAIL: fuzz ops (exit status $rc; input: ${artifact:-none saved}; log: $log)"
# What went wrong, indented so that tests/run.sh shows it: the harness's report, or the
# sanitizer's or libFuzzer's summary.
grep -E '^fuzz_ops: |^hakmem: |^SUMMARY: |^==[0-9]+== ERROR' "$log" | head -5 | sed 's/^/  /'
exit 1
