#!/usr/bin/env bash
# Optional: llama.cpp's CPU flash_attn_ext on the shapes of `posenc bench attention` (README.md here).
#
#   bench/llamacpp/run.sh [LLAMA_CPP_DIR] [--seq S --heads H --kv-heads K --head-dim D --threads T
#                                          --repeats R --kv-type f32|f16 --no-alibi --causal]
#
# Without LLAMA_CPP_DIR, the llama.cpp release pinned below is fetched once with npm (the
# node-llama-cpp package carries it as a git bundle) into the cache directory. Only ggml's CPU
# backend is built (static, -march=native, OpenMP, Release, ccache when present), in the cache
# directory, never in the repository. JOBS sets the build's parallelism (default: nproc).
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

dir=""
if [[ $# -gt 0 && $1 != -* ]]; then
  dir=$1
  shift
fi
llamacpp_configure "$dir"
cmake --build "$build" --target flash_attn_bench -j "${JOBS:-$(nproc 2> /dev/null || echo 2)}" > "$build.build.log" 2>&1 || {
  tail -n 40 "$build.build.log" >&2
  die "build failed (last lines above; all in $build.build.log)"
}
exec "$build/flash_attn_bench" "$@"
