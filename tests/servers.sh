#!/usr/bin/env bash
# A server and two interpreters under hakmem, each compared with the same run without it:
# - redis-server, started on a free loopback port with a private directory and no
#   persistence, loaded with a deterministic data set (strings up to 2.5 MB, strings grown by
#   APPEND, lists, hashes, sets, sorted sets, then partly deleted), churned by redis-benchmark
#   (small, 10 KB and 200 KB values), then checked (the data set read back against its model,
#   DEBUG DIGEST identical in every run) and shut down, which must end with status 0. Debian's
#   redis-server is linked to libjemalloc.so.2 by name (malloc, free, ...), so what it runs on
#   is whichever library comes first in the lookup order: jemalloc as packaged, glibc's malloc
#   when libc.so.6 is preloaded, hakmem when libhakmem.so is. It runs on all three; INFO
#   memory says which served the memory (jemalloc's own counter, allocator_allocated, stays
#   near zero when it did not) and gives the fragmentation ratios of the closing note;
# - lua5.4 running tests/lua/garbage.lua: identical output and status;
# - python3 running some modules of its own test suite: both runs pass the same modules.
# hakmem must really have been loaded: its stats line (HAKMEM_STATS=1) on stderr at exit, and
# for the long runs libhakmem.so in /proc/PID/maps while they run (python's tests check that
# the interpreters they start write nothing on stderr, so they run without HAKMEM_STATS).
# Missing programs fail, naming the Debian package to install (.ci/run installs them).
set -u
cd "$(dirname "$0")/.."
root=$PWD
lib=$(readlink -f "${HAKMEM_LIB:-$root/build/libhakmem.so}")
work=$(mktemp -d)
declare -A groups=() # the process groups of start, until await has collected their leader
cleanup() {
    local g
    for g in "${!groups[@]}"; do kill -9 -- -"$g" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# start OUT ERR CMD...: starts CMD in the background in a process group of its own (so that it
# and everything it starts can be killed together); its pid in $started.
start() {
    local out=$1 err=$2; shift 2
    setsid "$@" >"$out" 2>"$err" </dev/null &
    started=$!
    groups[$started]=1
}

# await PID SECONDS: the exit status of a process from start, or 124 once it has run past
# SECONDS (it and its process group are then killed).
await() {
    local pid=$1 i=0 rc
    while kill -0 "$pid" 2>/dev/null && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 -- -"$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        rc=124
    else
        wait "$pid"; rc=$?
    fi
    unset "groups[$pid]"
    return $rc
}

# mapped PID EXE: waits (up to 20 s) for process PID to run a program whose path contains
# EXE, then says whether hakmem's library is mapped into it.
mapped() {
    local pid=$1 i=0
    while [ $i -lt 200 ] && kill -0 "$pid" 2>/dev/null; do
        case $(readlink "/proc/$pid/exe" 2>/dev/null) in
        *"$2"*) grep -qF "$lib" "/proc/$pid/maps" 2>/dev/null; return ;;
        esac
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
indent() { sed 's/^/    /'; } # diagnostics: tests/run.sh shows lines that start with spaces
stats_line() { grep -q "^hakmem stats (pid $1):" "$2"; }

# ---------------------------------------------------------------------------------------
# redis

# redis_data FILE EXPECTED: writes the data set (redis protocol, database 1) to FILE, and to
# EXPECTED the queries that check it, each line "COMMAND<TAB>expected reply lines, joined
# by ^" (what redis-cli prints when its output is not a terminal).
redis_data() {
    python3 - "$1" "$2" <<'PY'
import sys
out, exp = open(sys.argv[1], "wb"), open(sys.argv[2], "w")
state = 1
def rnd(n):
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    return (state >> 33) % n
def cmd(*args):
    a = [x if isinstance(x, bytes) else str(x).encode() for x in args]
    out.write(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
def val(i, n):
    unit = ("%d-" % i).encode()
    return (unit * (n // len(unit) + 1))[:n]
db = {}
cmd("SELECT", 1)
for i in range(30000):
    v = val(i, 1 + rnd(300) if i % 50 else 1000 + rnd(30000))
    db["str:%d" % i] = v; cmd("SET", "str:%d" % i, v)
for i in range(8):
    v = val(i, 200000 + rnd(2300000))
    db["big:%d" % i] = v; cmd("SET", "big:%d" % i, v)
for i in range(4):
    db["grown:%d" % i] = b""
    for j in range(60):
        p = val(j, 5000 + rnd(30000))
        db["grown:%d" % i] += p; cmd("APPEND", "grown:%d" % i, p)
for i in range(300):
    l = db["list:%d" % i] = []
    for _ in range(4):
        batch = [val(len(l) + k, 1 + rnd(120)) for k in range(50)]
        l += batch; cmd("RPUSH", "list:%d" % i, *batch)
for i in range(300):
    h = db["hash:%d" % i] = {}
    args = []
    for j in range(300 if i % 3 == 0 else 60):
        h["f%d" % j] = val(j * i, 1 + rnd(80)); args += ["f%d" % j, h["f%d" % j]]
    cmd("HSET", "hash:%d" % i, *args)
for i in range(100):
    s = db["set:%d" % i] = set()
    members = [str(rnd(100000)) if i % 2 else "m%d" % rnd(100000) for _ in range(300)]
    s.update(members); cmd("SADD", "set:%d" % i, *members)
for i in range(100):
    z = db["zset:%d" % i] = {}
    args = []
    for j in range(200):
        m, sc = "m%d" % j, rnd(1000000)
        z[m] = sc; args += [sc, m]
    cmd("ZADD", "zset:%d" % i, *args)
for i in range(0, 30000, 3):
    del db["str:%d" % i]; cmd("DEL", "str:%d" % i)
for i in range(0, 300, 2):
    del db["list:%d" % i][:30]; cmd("LPOP", "list:%d" % i, 30)
    for j in range(10):
        del db["hash:%d" % i]["f%d" % j]
    cmd("HDEL", "hash:%d" % i, *["f%d" % j for j in range(10)])
for i in range(0, 100, 3):
    for m in sorted(db["zset:%d" % i].items(), key=lambda kv: (kv[1], kv[0]))[:50]:
        del db["zset:%d" % i][m[0]]
    cmd("ZREMRANGEBYRANK", "zset:%d" % i, 0, 49)
for i in range(8):
    b = bytearray(db["big:%d" % i]); b[1000:1005] = b"HELLO"; db["big:%d" % i] = bytes(b)
    cmd("SETRANGE", "big:%d" % i, 1000, "HELLO")
for i in range(50):
    db["counter:%d" % i] = str(sum(range(i * 10 + 1))).encode()
    for k in range(i * 10 + 1):
        cmd("INCRBY", "counter:%d" % i, k)

def q(command, reply):
    exp.write("%s\t%s\n" % (command, "^".join(str(r) for r in reply)))
q("DBSIZE", [len(db)])
q("EXISTS str:3", [0])
for i in (1, 2, 4, 499, 29999):
    q("GET str:%d" % i, [db["str:%d" % i].decode()])
for i in range(8):
    q("STRLEN big:%d" % i, [len(db["big:%d" % i])])
    q("GETRANGE big:%d 990 1010" % i, [db["big:%d" % i][990:1011].decode()])
for i in range(4):
    g = db["grown:%d" % i]
    q("STRLEN grown:%d" % i, [len(g)])
    q("GETRANGE grown:%d %d %d" % (i, len(g) // 2, len(g) // 2 + 30), [g[len(g) // 2:len(g) // 2 + 31].decode()])
for i in (0, 7, 150, 299):
    l = db["list:%d" % i]
    q("LLEN list:%d" % i, [len(l)])
    q("LRANGE list:%d 0 2" % i, [x.decode() for x in l[:3]])
    q("LINDEX list:%d -1" % i, [l[-1].decode()])
for i in (0, 1, 3, 298):
    h = db["hash:%d" % i]
    q("HLEN hash:%d" % i, [len(h)])
    q("HGET hash:%d f20" % i, [h["f20"].decode()])
    q("HEXISTS hash:%d f5" % i, [int("f5" in h)])
for i in (0, 1, 99):
    q("SCARD set:%d" % i, [len(db["set:%d" % i])])
    q("SISMEMBER set:%d %s" % (i, min(db["set:%d" % i])), [1])
for i in (0, 1, 99):
    z = sorted(db["zset:%d" % i].items(), key=lambda kv: (kv[1], kv[0]))
    q("ZCARD zset:%d" % i, [len(z)])
    q("ZRANGE zset:%d 0 1 WITHSCORES" % i, [z[0][0], z[0][1], z[1][0], z[1][1]])
for i in (0, 1, 49):
    q("GET counter:%d" % i, [db["counter:%d" % i].decode()])
PY
}

if ! command -v redis-server >/dev/null 2>&1; then
    echo "FAIL: redis-server not found (install the Debian package redis-server)"
elif ! command -v redis-cli >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
    echo "FAIL: redis-cli or redis-benchmark not found (install the Debian package redis-tools)"
elif ! command -v python3 >/dev/null 2>&1; then
    echo "FAIL: redis-server (python3, which writes its data set, not found: install python3)"
else
    redis_t0=$(now)
    redis_data "$work/redis.data" "$work/redis.expected"
    # glibc's libc.so.6, preloaded, comes before libjemalloc.so.2 in the lookup order.
    libc=$(ldd "$(command -v redis-server)" | awk '$1 == "libc.so.6" { print $3 }')
    # jemalloc as packaged is the third run, where the server is linked to it by name.
    modes="glibc hakmem"
    ldd "$(command -v redis-server)" | grep -q 'libjemalloc\.so' && modes="glibc jemalloc hakmem"
    digest_ref=
    declare -A ops info digest frag idle
    cli() { timeout 60 redis-cli -p "$port" "$@"; }
    # redis_mode MODE: one run of the server on MODE's allocator; why says what failed (empty
    # when every check passed), and its figures go to ops, info, frag and idle.
    redis_mode() {
        local mode=$1 d=$work/redis-$1 launch attempt up load b size out n want name rate
        local used jeal heap q got rc
        mkdir -p "$d"
        case $mode in
        glibc) launch=(env LD_PRELOAD="$libc") ;;
        jemalloc) launch=(env) ;;
        hakmem) launch=(env HAKMEM_STATS=1 "$root/bin/hakmem") ;;
        esac
        for attempt in 1 2 3; do # a port found free may be taken before the server binds it
            port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
            rm -f "$d/redis.log"
            start "$d/stdout" "$d/stderr" "${launch[@]}" redis-server --port "$port" \
                --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$d" \
                --logfile "$d/redis.log" --enable-debug-command local
            pid=$started
            up=
            for _ in $(seq 100); do
                kill -0 "$pid" 2>/dev/null || break
                if [ "$(timeout 5 redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then up=1; break; fi
                sleep 0.1
            done
            [ -n "$up" ] && break
            await "$pid" 5
            grep -q 'Address already in use' "$d/redis.log" 2>/dev/null || break
        done
        if [ -z "$up" ]; then why="did not start"; return; fi
        if [ $mode = hakmem ] && ! grep -qF "$lib" "/proc/$pid/maps"; then why="hakmem was not loaded"; fi
        load=$(cli --pipe <"$work/redis.data" 2>&1 | tail -n 1)
        case $load in *"errors: 0,"*) ;; *) why=${why:-"loading the data set: $load"} ;; esac
        for b in "-n 20000 -d 100 -r 10000 -t set,get,incr,lpush,lpop,sadd,hset,lrange_100,mset" \
                 "-n 5000 -d 10000 -r 2000 -t set,get" "-n 400 -d 200000 -r 100 -t set,get"; do
            kill -0 "$pid" 2>/dev/null || break
            size=$(echo "$b" | awk '{ print $4 }')
            out=$(timeout 40 redis-benchmark -p "$port" $b -q 2>&1 | tr '\r' '\n')
            while read -r name rate; do
                ops[$mode,$size,$name]=$rate
            done < <(printf '%s\n' "$out" | grep -v 'needed to' |
                     sed -n 's/^\([A-Z_0-9]*\)[^:]*: \([0-9.]*\) requests per second.*/\1 \2/p')
            # (lrange_100 first fills its list with LPUSH: one line more than its tests)
            n=$(printf '%s\n' "$out" | grep -c 'requests per second')
            want=$(echo "$b" | awk '{ print split($NF, t, ",") }')
            [ "$n" -ge "$want" ] || why=${why:-"redis-benchmark $b: $(printf '%s\n' "$out" | grep -v '^$' | tail -n 1)"}
        done
        if ! kill -0 "$pid" 2>/dev/null; then
            await "$pid" 1; why="died during redis-benchmark, status $?"; return
        fi
        sleep 0.3 # INFO's ratio is updated every 100 ms
        cli info memory | tr -d '\r' >"$d/info"
        get() { sed -n "s/^$1://p" "$d/info"; }
        used=$(get used_memory); jeal=$(get allocator_allocated)
        frag[$mode]=$(get mem_fragmentation_ratio)
        heap=$(awk '/\[heap\]/ { print $1 }' "/proc/$pid/maps")
        [ -n "$heap" ] && heap=$(( (16#${heap#*-} - 16#${heap%-*}) / 1024 ))
        info[$mode]="used_memory $used, used_memory_rss $(get used_memory_rss), mem_fragmentation_ratio ${frag[$mode]}, allocator_allocated $jeal, mem_allocator $(get mem_allocator) (as built), brk heap ${heap:-0} KB"
        # Which allocator served the memory: jemalloc counts what it holds itself, and glibc's
        # malloc grows its main arena with brk (jemalloc and hakmem map memory).
        if [ $mode = jemalloc ]; then
            [ "${jeal:-0}" -gt $((${used:-0} / 2)) ] || why=${why:-"jemalloc does not hold the data (allocator_allocated $jeal, used_memory $used)"}
        elif [ -n "$jeal" ]; then
            [ "$jeal" -lt $((${used:-0} / 10)) ] || why=${why:-"jemalloc still holds the data (allocator_allocated $jeal, used_memory $used)"}
        fi
        if [ $mode = glibc ]; then
            [ $((${heap:-0} * 1024)) -gt $((${used:-0} / 4)) ] || why=${why:-"glibc's heap holds ${heap:-0} KB only"}
        fi
        # The data set, read back against its model, and its digest.
        while IFS=$'\t' read -r q want; do
            got=$(cli -n 1 $q 2>&1 | tr -d '\r' | paste -sd '^')
            [ "$got" = "$want" ] || { why=${why:-"data: $q gave '${got:0:60}', expected '${want:0:60}'"}; break; }
        done <"$work/redis.expected"
        cli -n 0 flushdb >/dev/null # what redis-benchmark left: random keys
        digest[$mode]=$(cli debug digest)
        case ${digest[$mode]} in
        *[!0-9a-f]* | "") why=${why:-"DEBUG DIGEST: ${digest[$mode]}"} ;;
        *) [ -n "$digest_ref" ] || digest_ref=${digest[$mode]}
           [ "${digest[$mode]}" = "$digest_ref" ] || why=${why:-"DEBUG DIGEST ${digest[$mode]}, in the first run $digest_ref"} ;;
        esac
        cli set hakmem:check "$(seq 1 2000 | paste -sd,)" >/dev/null
        [ "$(cli get hakmem:check)" = "$(seq 1 2000 | paste -sd,)" ] || why=${why:-"SET/GET of a known value"}
        # What is given back once the benchmark's keys are gone and the server is idle.
        sleep 3
        idle[$mode]=$(cli info memory | tr -d '\r' | sed -n 's/^used_memory_rss://p')
        info[$mode]+=", used_memory_rss $((${idle[$mode]:-0} / 1048576)) MiB after FLUSHDB of the benchmark's keys and 3 s idle"
        if ! kill -0 "$pid" 2>/dev/null; then
            await "$pid" 1; why="died during the checks, status $?"; return
        fi
        cli shutdown nosave >/dev/null 2>&1
        await "$pid" 20; rc=$?
        if [ $rc -eq 124 ]; then why=${why:-"did not exit after SHUTDOWN, killed"}
        elif [ $rc -ne 0 ]; then why=${why:-"exited with status $rc"}
        elif ! grep -q 'ready to exit, bye bye' "$d/redis.log"; then why=${why:-"no clean shutdown in its log"}
        fi
        if [ $mode = hakmem ] && ! stats_line "$pid" "$d/stderr"; then why=${why:-"hakmem was not loaded (no stats line)"}; fi
    }
    for mode in $modes; do
        why=
        redis_mode $mode 2>>"$work/redis.diag"
        case $mode in
        glibc) label="on glibc's malloc" ;;
        jemalloc) label="on jemalloc, as packaged" ;;
        hakmem) label="under hakmem" ;;
        esac
        if [ -n "$why" ]; then
            echo "FAIL: redis-server $label ($why)"
            { grep -m3 '^hakmem:' "$work/redis-$mode/stderr"
              grep -m5 -E 'crashed|Backtrace|ASSERTION|Guru|signal' "$work/redis-$mode/redis.log"
              tail -n 3 "$work/redis.diag"; } 2>/dev/null | indent
        else
            echo "PASS: redis-server $label"
        fi
        rm -f "$work/redis.diag"
    done
    for mode in glibc jemalloc hakmem; do
        [ -n "${info[$mode]-}" ] && echo "  redis INFO memory ($mode): ${info[$mode]}"
    done
    for size in 100 10000 200000; do
        line=
        for name in $(printf '%s\n' "${!ops[@]}" | awk -F, -v s=$size '$2 == s { print $3 }' | sort -u); do
            line+=" $name "
            for mode in glibc jemalloc hakmem; do
                rate=${ops[$mode,$size,$name]-}
                line+=$([ $mode = glibc ] || printf /)${rate%.*}$([ -n "$rate" ] || printf -)
            done
        done
        [ -n "$line" ] && echo "  redis-benchmark -d $size, requests/s glibc/jemalloc/hakmem:$line"
    done
    mib() { [ -n "${idle[$1]-}" ] && echo "$((${idle[$1]} / 1048576)) MiB" || echo "?"; }
    echo "  redis mem_fragmentation_ratio after the benchmark: hakmem ${frag[hakmem]-?}, glibc ${frag[glibc]-?}, jemalloc ${frag[jemalloc]-?}; rss after dropping its keys and 3 s idle: hakmem $(mib hakmem), glibc $(mib glibc), jemalloc $(mib jemalloc) ($(secs "$redis_t0" "$(now)") s)"
fi

# ---------------------------------------------------------------------------------------
# lua

if ! command -v lua5.4 >/dev/null 2>&1; then
    echo "FAIL: lua5.4 not found (install the Debian package lua5.4)"
else
    t0=$(now)
    timeout 120 lua5.4 tests/lua/garbage.lua >"$work/lua.plain" 2>"$work/lua.plain.err"
    rc_plain=$?
    t1=$(now)
    HAKMEM_STATS=1 timeout 120 "$root/bin/hakmem" lua5.4 tests/lua/garbage.lua \
        >"$work/lua.hak" 2>"$work/lua.hak.err"
    rc_hak=$?
    t2=$(now)
    if ! grep -q '^hakmem stats (pid [0-9]*):' "$work/lua.hak.err"; then
        echo "FAIL: lua5.4 garbage.lua under hakmem (hakmem was not loaded)"
        grep -m3 '^hakmem:' "$work/lua.hak.err" | indent
    elif [ $rc_plain -ne $rc_hak ]; then
        echo "FAIL: lua5.4 garbage.lua under hakmem (status $rc_hak, without it $rc_plain)"
        grep -v '^ ' "$work/lua.hak.err" | grep -v '^hakmem stats' | head -n 5 | indent
    elif ! cmp -s "$work/lua.plain" "$work/lua.hak"; then
        echo "FAIL: lua5.4 garbage.lua under hakmem (output differs)"
        diff "$work/lua.plain" "$work/lua.hak" | head -n 5 | indent
    elif [ $rc_plain -ne 0 ]; then
        echo "FAIL: lua5.4 garbage.lua (status $rc_plain even without hakmem)"
        tail -n 3 "$work/lua.plain.err" | indent
    else
        echo "PASS: lua5.4 garbage.lua under hakmem"
    fi
    echo "  lua5.4 garbage.lua: $(secs "$t0" "$t1") s without hakmem, $(secs "$t1" "$t2") s with it"
fi

# ---------------------------------------------------------------------------------------
# python3's own tests: allocation-heavy modules (containers, strings, regular expressions,
# serialisation, the collector, weak references, decimal, XML, email, thread queues) that need
# no network and are not timing-sensitive: 15 to 25 s each way on two cores.

pytests="test_list test_dict test_set test_unicode test_bytes test_re test_json test_pickle
    test_gc test_weakref test_decimal test_xml_etree test_email test_queue"
if ! command -v python3 >/dev/null 2>&1; then
    echo "FAIL: python3 not found (install the Debian package python3)"
elif ! python3 -c 'import test.libregrtest, test.test_dict' >/dev/null 2>&1; then
    echo "FAIL: python3's test suite not found (install the Debian package $(python3 -c 'import sys; print("libpython%d.%d-testsuite" % sys.version_info[:2])'))"
else
    declare -A pyrc pyt
    for mode in plain hakmem; do
        d=$work/py-$mode
        mkdir -p "$d/tmp"
        launch=(env -C "$d" TMPDIR="$d/tmp"); [ $mode = hakmem ] && launch+=("$root/bin/hakmem")
        t0=$(now)
        start "$d/out" "$d/err" "${launch[@]}" python3 -m test -j2 --timeout 120 $pytests
        pid=$started
        if [ $mode = hakmem ]; then mapped "$pid" python && loaded=1 || loaded=; fi
        await "$pid" 150; pyrc[$mode]=$?
        pyt[$mode]=$(secs "$t0" "$(now)")
        grep -o '^[0-9:]* load avg: [0-9.]* \[ *[0-9]*/[0-9]*[^]]*\] test_[a-z_0-9]* passed' "$d/out" |
            awk '{ print $(NF - 1) }' | sort >"$d/passed"
    done
    npass=$(wc -l <"$work/py-hakmem/passed")
    nwant=$(echo $pytests | wc -w)
    if [ "${pyrc[hakmem]}" = 124 ]; then
        echo "FAIL: python3 -m test under hakmem (still running after 150 s, killed)"
    elif [ -z "$loaded" ]; then
        echo "FAIL: python3 -m test under hakmem (hakmem was not loaded)"
    elif [ "${pyrc[plain]}" != 0 ]; then
        echo "FAIL: python3 -m test (fails even without hakmem)"
        grep -E 'failed|^== Tests result' "$work/py-plain/out" | head -n 5 | indent
    elif [ "${pyrc[hakmem]}" != 0 ] || [ "$npass" -ne "$nwant" ]; then
        echo "FAIL: python3 -m test under hakmem (status ${pyrc[hakmem]}, $npass of $nwant modules passed)"
        grep -hE 'failed|crashed|^hakmem:|Fatal' "$work/py-hakmem/out" "$work/py-hakmem/err" | head -n 8 | indent
    elif ! cmp -s "$work/py-plain/passed" "$work/py-hakmem/passed"; then
        echo "FAIL: python3 -m test under hakmem (not the same modules passed)"
    else
        echo "PASS: python3 -m test, $nwant modules, under hakmem"
    fi
    echo "  python3 -m test ($nwant modules, -j2): ${pyt[plain]} s without hakmem, ${pyt[hakmem]} s with it"
fi
