#!/usr/bin/env bash
# make install into a temporary prefix (and staged with DESTDIR), then use it as a user would:
# build a program with `pkg-config --cflags --libs hakmem` (shared and static), run it and the
# installed hakmem command; make uninstall must leave nothing behind.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/usr

check() { # check NAME COMMAND...: PASS if the command succeeds
    local name=$1; shift
    local out
    if out=$("$@" 2>&1); then echo "PASS: install $name"
    else echo "FAIL: install $name"; printf '%s\n' "$out" | head -5 | sed 's/^/  /'; fi
}

check "make install PREFIX=..." make -s install PREFIX="$prefix"
check "soname" sh -c "readelf -d '$prefix/lib/libhakmem.so' | grep -q 'SONAME.*libhakmem.so.0'"

cat > "$tmp/prog.c" <<'C'
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    void *p = malloc(1000), *q = hak_malloc(50);
    int ok = hak_owns(p) && hak_owns(q); /* malloc itself is hakmem's */
    hak_free(q);
    free(p);
    puts(ok ? "hakmem" : "not hakmem");
    return !ok;
}
C
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
check "pkg-config knows it" pkg-config --exists hakmem
check "shared: build with pkg-config" sh -c \
    "cc -o '$tmp/prog' '$tmp/prog.c' \$(pkg-config --cflags --libs hakmem)"
check "shared: run" sh -c "LD_LIBRARY_PATH='$prefix/lib' '$tmp/prog' | grep -qx hakmem"
check "static: build with pkg-config --static" sh -c \
    "cc -static -o '$tmp/prog_static' '$tmp/prog.c' \$(pkg-config --cflags --static --libs hakmem)"
check "static: run" sh -c "'$tmp/prog_static' | grep -qx hakmem"
check "the installed hakmem command preloads the installed library" sh -c \
    "HAKMEM_STATS=1 '$prefix/bin/hakmem' -- build/tests/hello 2>&1 >/dev/null | grep -q '^hakmem stats'"
check "the installed hakmem report reads a JSON report" sh -c \
    "'$prefix/bin/hakmem' --stats=json --stats-file='$tmp/r.json' -- build/tests/hello >/dev/null &&
     '$prefix/bin/hakmem' report '$tmp/r.json' | grep -q '^slab acquire'"
check "make uninstall" make -s uninstall PREFIX="$prefix"
left=$(find "$prefix" -type f -o -type l)
if [ -z "$left" ]; then echo "PASS: install nothing left after uninstall"
else echo "FAIL: install left after uninstall: $left"; fi

check "make install DESTDIR=... PREFIX=/usr/local" make -s install DESTDIR="$tmp/stage"
check "staged under DESTDIR, pointing at PREFIX" sh -c \
    "grep -q '^libdir=/usr/local/lib$' '$tmp/stage/usr/local/lib/pkgconfig/hakmem.pc' &&
     grep -q 'HAKMEM_LIB:-/usr/local/lib/libhakmem.so.0' '$tmp/stage/usr/local/bin/hakmem'"
