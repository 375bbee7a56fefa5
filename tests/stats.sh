#!/usr/bin/env bash
# hakmem's report: HAKMEM_STATS=json is one valid JSON object per process with every field of
# the text report; HAKMEM_STATS_FILE ("%p": the pid) receives it; the report comes after the
# program's own buffered output; bin/hakmem's --stats, --trace, --config, --help, and
# `hakmem report` turning the JSON into a table.
set -u
cd "$(dirname "$0")/.."
lib=$PWD/build/libhakmem.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say() { if eval "$2"; then echo "PASS: stats $1"; else echo "FAIL: stats $1"; fi; }

HAKMEM_STATS=json LD_PRELOAD=$lib build/tests/trace_workload >/dev/null 2>"$tmp/j"
say "json is one valid object with the report's fields" "python3 - '$tmp/j' <<'P'
import json, sys
r = json.loads(open(sys.argv[1]).read())
need = ['pid', 'os_mmap', 'os_munmap', 'os_madvise', 'os_mremap', 'acquire_stage1',
        'acquire_stage2', 'acquire_stage3_cache', 'acquire_stage3_mmap', 'slab_adopt',
        'large_cache_hits', 'large_cache_misses', 'minor_faults', 'peak_rss_kb', 'classes']
assert all(k in r for k in need), [k for k in need if k not in r]
assert r['slab_adopt'] >= 1 and r['large_cache_hits'] >= 1 and r['os_mmap'] >= 2
assert any(c['size'] == 8192 and c['slabs_acquired'] >= 1 for c in r['classes'])
P"

# The counts of a multi-threaded run with known operations, against a run without them.
for n in 0 400; do
    HAKMEM_STATS=json LD_PRELOAD=$lib build/tests/stats_workload $n 2>"$tmp/w$n.json"
done
say "json counts are consistent and exact after a multi-threaded run" "python3 - '$tmp' <<'P'
import json, sys
a = json.load(open(sys.argv[1] + '/w0.json'))
b = json.load(open(sys.argv[1] + '/w400.json'))
assert b['counted'] == 1
for r in (a, b):
    for c in r['classes']:
        assert c['allocs'] - c['frees'] == c['live'], c
    tot = sum(c['allocs'] for c in r['classes']), sum(c['frees'] for c in r['classes'])
    assert tot[0] - tot[1] == sum(c['live'] for c in r['classes'])
ca = {c['size']: c for c in a['classes']}
z = {'allocs': 0, 'frees': 0, 'remote_frees': 0, 'live': 0}
n = 400
for size in (224, 1536, 57344):  # the classes of 200, 1500 and 50000 bytes
    x, y = ca.get(size, z), {c['size']: c for c in b['classes']}[size]
    d = {k: y[k] - x[k] for k in z}
    assert d == {'allocs': 4 * n, 'frees': 3 * n, 'remote_frees': 2 * n, 'live': n}, (size, d)
assert b['large_allocs'] == 8 and b['large_frees'] == 4, (b['large_allocs'], b['large_frees'])
assert b['threads_started'] >= 5 and b['threads_exited'] >= 4
# Every lock is counted: the large tier's (8 blocks and more), the orphans' stripes (4 threads
# exited holding blocks), the pool's mutex and its front stripes (slabs came and went), and
# none waited more often than it was taken.
assert b['large_lock'] >= 8 and b['orphan_lock'] >= 4, (b['large_lock'], b['orphan_lock'])
assert b['pool_lock'] >= 1 and b['pool_class_lock'] >= 1, (b['pool_lock'], b['pool_class_lock'])
for k in ('pool', 'pool_class', 'large', 'orphan'):
    assert b[k + '_lock'] >= b[k + '_lock_waited'] >= 0, k
P"

# Every class in use: the whole report still fits, and stays valid JSON.
HAKMEM_STATS=json HAKMEM_STATS_FILE="$tmp/all.json" build/tests/stress 1 2 >/dev/null
say "json with every class in use is complete" "python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r[\"classes\"]) >= 50, len(r[\"classes\"])
' '$tmp/all.json'"

HAKMEM_STATS=1 HAKMEM_STATS_FILE="$tmp/s.%p" LD_PRELOAD=$lib build/tests/hello >/dev/null 2>"$tmp/err"
say "HAKMEM_STATS_FILE with %p" "[ \$(ls '$tmp'/s.* | wc -l) -eq 1 ] && [ ! -s '$tmp/err' ] &&
    grep -q '^hakmem stats (pid [0-9]*):' '$tmp'/s.*"

# The program's last line is buffered (stdout to a file) until exit: it must come first.
(HAKMEM_STATS=1 LD_PRELOAD=$lib build/tests/hello >"$tmp/both" 2>&1)
say "the report comes after the program's buffered output" \
    "[ \"\$(head -1 '$tmp/both')\" = hello ] && grep -q '^hakmem stats' '$tmp/both'"

say "hakmem --stats" "bin/hakmem --stats -- build/tests/hello 2>&1 >/dev/null | grep -q '^hakmem stats (pid'"
say "hakmem --stats=json --stats-file" "bin/hakmem --stats=json --stats-file='$tmp/c.json' build/tests/hello >/dev/null &&
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '$tmp/c.json'"
say "hakmem --trace=os" "bin/hakmem --trace=os -- build/tests/hello 2>&1 >/dev/null | grep -q '^hakmem trace [0-9.]* os: mmap'"
say "hakmem --config" "bin/hakmem --config -- build/tests/hello 2>&1 >/dev/null | grep -q '^hakmem config: HAKMEM_TRACE='"
say "hakmem --help" "bin/hakmem --help | grep -q -- '--stats\\[=json\\]'"
say "hakmem with an unknown option fails" "! bin/hakmem --bogus build/tests/hello 2>/dev/null"
say "hakmem report turns the JSON into a table" "bin/hakmem report '$tmp/c.json' | grep -q '^slab acquire  *stage 1'"
