#!/usr/bin/env bash
# bench/deps.sh - install what bench/run.sh can use (what `make bench-deps`
# runs).  Debian/Ubuntu, as root (or via sudo).  Idempotent: packages that
# are already installed are not touched, and nothing is done when all are.
#
#   peers:  libmimalloc-dev libjemalloc-dev libgoogle-perftools-dev
#   chart:  python3-matplotlib (else gnuplot-nox)
#   tools:  valgrind strace time python3
set -euo pipefail

want=(libmimalloc-dev libjemalloc-dev libgoogle-perftools-dev
      python3 python3-matplotlib valgrind strace time)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

if ! command -v apt-get >/dev/null 2>&1; then
    echo "bench/deps.sh: apt-get not found; install these by hand: ${want[*]} (or gnuplot-nox instead of python3-matplotlib)" >&2
    exit 1
fi

missing=()
for p in "${want[@]}"; do
    installed "$p" || missing+=("$p")
done
# gnuplot is only the fallback for the chart
if installed gnuplot-nox || installed gnuplot-qt || installed gnuplot-x11; then
    missing=("${missing[@]/python3-matplotlib/}")
fi
# drop empty entries left by the substitution above
pkgs=()
for p in "${missing[@]}"; do [[ -n $p ]] && pkgs+=("$p"); done

if ((${#pkgs[@]} == 0)); then
    echo "bench/deps.sh: everything is installed already"
    exit 0
fi

SUDO=()
if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || { echo "bench/deps.sh: run as root" >&2; exit 1; }
    SUDO=(sudo)
fi
echo "bench/deps.sh: installing ${pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${pkgs[@]}"; then
    # matplotlib is big; gnuplot-nox is enough for the chart
    fallback=()
    for p in "${pkgs[@]}"; do
        [[ $p == python3-matplotlib ]] && p=gnuplot-nox
        fallback+=("$p")
    done
    echo "bench/deps.sh: retrying with ${fallback[*]}" >&2
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${fallback[@]}"
fi
echo "bench/deps.sh: done"
