#!/usr/bin/env bash
# Optional: posenc's bf16 attention tile products beside libxsmm 1.17's and oneDNN 2.6's
# (README.md here). Not built by `make test` or CI.
#
#   bench/bf16_libraries/run.sh [ROUNDS]
#
# Needs Debian's libxsmm-dev and libdnnl-dev, and posenc's build folder (`make test` made it;
# BUILD=dir for another). The bench is compiled here, into the build folder, against posenc's
# core library and the libraries' static (libxsmm) and shared (oneDNN) builds; one thread.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD:-$root/build}
die() {
  echo "bench/bf16_libraries: $*" >&2
  exit 2
}
[[ -f /usr/include/libxsmm.h && -f /usr/lib/libxsmm.a ]] || die "needs libxsmm 1.17: apt-get install libxsmm-dev"
[[ -f /usr/include/oneapi/dnnl/dnnl.hpp ]] || die "needs oneDNN 2.6: apt-get install libdnnl-dev"
[[ -f $build/CMakeCache.txt ]] || die "no posenc build in $build (run make test first, or set BUILD)"
cmake --build "$build" --target posenc_core > "$build/bf16_libraries.build.log" 2>&1 || die "building posenc_core failed: $build/bf16_libraries.build.log"
out=$build/bf16_libraries_tiles_bench
g++ -O2 -std=c++17 -fopenmp -I "$root/core/include" -I "$root/core/src" "$root/bench/bf16_libraries/tiles_bench.cc" \
  "$build/core/libposenc_core.a" -lhwy /usr/lib/libxsmm.a /usr/lib/libxsmmnoblas.a -ldnnl -lpthread -ldl -lm -o "$out" \
  >> "$build/bf16_libraries.build.log" 2>&1 || die "compiling the bench failed: $build/bf16_libraries.build.log"
OMP_NUM_THREADS=1 exec "$out" "$@"
