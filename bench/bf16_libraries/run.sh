#!/usr/bin/env bash
# Optional: posenc's bf16 attention tile products beside libxsmm 1.17's and oneDNN 2.6's
# (README.md here). Not built by `make test` or CI.
#
#   bench/bf16_libraries/run.sh [ROUNDS]
#
# Needs Debian's libxsmm-dev and libdnnl-dev (installed by scripts/install-deps.sh when missing)
# and posenc's build folder (`make test` made it; BUILD=dir for another). The bench is compiled
# here, into the build folder, against posenc's core library and the libraries' static (libxsmm)
# and shared (oneDNN) builds; one thread.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD:-$root/build}
die() {
  echo "bench/bf16_libraries: $*" >&2
  exit 2
}
# The two libraries, installed here when missing (posenc's own script: root or sudo), as the
# llama.cpp bench fetches llama.cpp; nothing else in posenc needs them.
"$root/scripts/install-deps.sh" libxsmm-dev libdnnl-dev > /dev/null || die "could not install libxsmm-dev and libdnnl-dev (scripts/install-deps.sh)"
[[ -f /usr/include/libxsmm.h && -f /usr/lib/libxsmm.a ]] || die "libxsmm-dev is installed but /usr/include/libxsmm.h or /usr/lib/libxsmm.a is missing"
[[ -f /usr/include/oneapi/dnnl/dnnl.hpp ]] || die "libdnnl-dev is installed but /usr/include/oneapi/dnnl/dnnl.hpp is missing"
[[ -f $build/CMakeCache.txt ]] || die "no posenc build in $build (run make test first, or set BUILD)"
cmake --build "$build" --target posenc_core > "$build/bf16_libraries.build.log" 2>&1 || die "building posenc_core failed: $build/bf16_libraries.build.log"
out=$build/bf16_libraries_tiles_bench
g++ -O2 -std=c++17 -fopenmp -I "$root/core/include" -I "$root/core/src" "$root/bench/bf16_libraries/tiles_bench.cc" \
  "$build/core/libposenc_core.a" -lhwy /usr/lib/libxsmm.a /usr/lib/libxsmmnoblas.a -ldnnl -lpthread -ldl -lm -o "$out" \
  >> "$build/bf16_libraries.build.log" 2>&1 || die "compiling the bench failed: $build/bf16_libraries.build.log"
OMP_NUM_THREADS=1 exec "$out" "$@"
