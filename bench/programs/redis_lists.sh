#!/usr/bin/env bash
# redis_lists.sh - redis-server on the allocator that LD_PRELOAD names (none: the C library's),
# driven by redis-benchmark as mimalloc-bench drives it: a million LPUSHes of 13 values onto
# one list, 16 to a pipeline, over a Unix socket of a private folder. The client runs on the C
# library's allocator, so that the time (run.sh times the whole script) follows the server's
# allocator; the peak RSS run.sh reports is the server's, the largest process. redis sizes
# every block it allocates and frees with malloc_usable_size (its used_memory).
set -eu
server_preload=${LD_PRELOAD:-}
unset LD_PRELOAD
dir=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$dir"' EXIT
LD_PRELOAD=$server_preload redis-server --port 0 --unixsocket "$dir/sock" --save "" \
    --appendonly no --dir "$dir" >/dev/null &
server=$!
for _ in $(seq 100); do
    redis-cli -s "$dir/sock" ping >/dev/null 2>&1 && break
    sleep 0.05
done
redis-benchmark -s "$dir/sock" -n 1000000 -P 16 -q lpush a 1 2 3 4 5 6 7 8 9 10 lrange a 1 10 \
    >/dev/null
redis-cli -s "$dir/sock" shutdown nosave >/dev/null || true
wait "$server"
server=
