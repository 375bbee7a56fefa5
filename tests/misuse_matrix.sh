#!/usr/bin/env bash
# tests/misuse_matrix.sh [name=lib.so ...] - runs every case of test_misuse under each
# allocator and prints one Markdown table: what each allocator did with each misuse.
#
#   reported  the allocator said so (a line on stderr) or aborted: the program stopped there
#   crashed   the program died of a signal other than SIGABRT, without a word (e.g. SIGSEGV)
#   missed    the program carried on and exited normally
#   n/a       the allocator lacks the call the case needs
# Without arguments: glibc, mimalloc and jemalloc where installed, and the default and
# hardened builds of hakmem. Used for docs/RELIABILITY.md; the counts go at the end.
set -u
cd "$(dirname "$0")/.."
bin=build/tests/test_misuse
multi=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multi

allocs=()
if (($# == 0)); then
    allocs+=("glibc=")
    for p in mimalloc=libmimalloc.so.2 jemalloc=libjemalloc.so.2 tcmalloc=libtcmalloc_minimal.so.4; do
        [ -e "$libdir/${p#*=}" ] && allocs+=("${p%%=*}=$libdir/${p#*=}")
    done
    allocs+=("hakmem=$PWD/build/libhakmem.so")
    [ -e build/hardened/libhakmem.so ] && allocs+=("hakmem-hardened=$PWD/build/hardened/libhakmem.so")
else
    allocs=("$@")
fi

outcome() { # outcome LIB CASE
    local err rc
    err=$(LD_PRELOAD=$1 MALLOC_CHECK_= timeout 20 "$bin" "$2" 2>&1 >/tmp/misuse_out.$$); rc=$?
    if [ $rc -eq 77 ]; then echo "n/a"
    elif [ $rc -eq 134 ] || [ -n "$err" ]; then echo "reported"
    elif [ $rc -ge 128 ]; then echo "crashed"
    elif [ $rc -eq 0 ] && grep -q '^survived$' /tmp/misuse_out.$$; then echo "missed"
    else echo "crashed"
    fi
}

header="| case | kind |"; rule="|---|---|"
for a in "${allocs[@]}"; do header+=" ${a%%=*} |"; rule+="---|"; done
echo "$header"; echo "$rule"
declare -A caught total
while read -r name kind; do
    row="| ${name//_/-} | $kind |"
    for a in "${allocs[@]}"; do
        o=$(outcome "${a#*=}" "$name")
        row+=" $o |"
        [ "$o" = reported ] && caught[${a%%=*}]=$(( ${caught[${a%%=*}]:-0} + 1 ))
        [ "$o" != n/a ] && total[${a%%=*}]=$(( ${total[${a%%=*}]:-0} + 1 ))
    done
    echo "$row"
done < <("$bin" --list)
row="| **reported** | |"
for a in "${allocs[@]}"; do row+=" **${caught[${a%%=*}]:-0}** of ${total[${a%%=*}]:-0} |"; done
echo "$row"
rm -f /tmp/misuse_out.$$
