#!/usr/bin/env bash
# bench/device_prep.sh [NAME=PATCH ...] - gathers what the thread sweep needs on a machine
# that has no package registry and no compiler of ours (the 16-core machine some sessions are
# lent), into .device/ (git-ignored), for bench/device_sweep.sh to run there:
#   .device/lib/    libhakmem.so (this tree's release build), the Debian peers' .so files,
#                   and hakmem-NAME.so for each NAME=PATCH: this tree with PATCH applied
#                   (git apply), built in a scratch clone
#   .device/bin/    the benchmark programs (build/bench)
# Then, for the device tool: carry [".device"], command "bash bench/device_sweep.sh".
# The programs and libraries built on this Debian run there unchanged (docs/BENCHMARKS.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=$ROOT/.device
die() { echo "device_prep.sh: error: $*" >&2; exit 2; }

cd "$ROOT"
make -s release >&2 || die "the release build failed"
make -s -C bench >&2 || die "building the benchmark programs failed"
rm -rf "$DEV"
mkdir -p "$DEV/lib" "$DEV/bin"
cp build/libhakmem.so "$DEV/lib/"
cp build/bench/* "$DEV/bin/"

ma=$(gcc -print-multiarch 2>/dev/null || true)
peers=/usr/lib/${ma:-x86_64-linux-gnu}
for f in libmimalloc.so.2 libjemalloc.so.2 libtcmalloc_minimal.so.4; do
    if [[ -e $peers/$f ]]; then
        cp -L "$peers/$f" "$DEV/lib/"
    else
        echo "device_prep.sh: note: $peers/$f missing (make bench-deps): not carried" >&2
    fi
done

for spec in "$@"; do
    name=${spec%%=*} patch=${spec#*=}
    [[ $name != "$spec" && $name =~ ^[a-z0-9_-]+$ ]] || die "'$spec' is not NAME=PATCH"
    [[ -f $patch ]] || die "no patch '$patch'"
    patch=$(cd "$(dirname "$patch")" && pwd)/$(basename "$patch")
    tmp=$(mktemp -d)
    git clone -q "$ROOT" "$tmp/src"
    (cd "$tmp/src" && git apply "$patch" && make -s build/libhakmem.so >&2) ||
        { rm -rf "$tmp"; die "patch '$patch' did not apply or build"; }
    cp "$tmp/src/build/libhakmem.so" "$DEV/lib/hakmem-$name.so"
    rm -rf "$tmp"
done

size=$(du -sm "$DEV" | cut -f1)
echo "device_prep.sh: .device holds $size MiB (the device tool carries 64 MiB at most):" >&2
ls -l "$DEV/lib" >&2
((size < 64)) || die ".device is too large to carry"
