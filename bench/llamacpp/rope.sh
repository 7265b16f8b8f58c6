#!/usr/bin/env bash
# Optional: llama.cpp's RoPE (ggml_rope_ext / ggml_rope_multi, CPU) against Hugging Face's numbers
# for every real config posenc walks (README.md here).
#
#   bench/llamacpp/rope.sh POSENC_BINARY [LLAMA_CPP_DIR]  ->  markdown table on stdout
#
# Per config in tests/data/real-configs: `posenc golden` writes HF's q and k before and after RoPE
# at 0, 1, 127, 4095, C, 4C, 131071; rope_keys.py derives the GGUF keys llama.cpp's converter
# writes and the hparams its loader reads; rope_vs_hf rotates golden's q and k with ggml and
# compares. OUT (default a temporary directory) keeps each model's golden, keys and results.
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[[ $# -ge 1 ]] || die "usage: rope.sh POSENC_BINARY [LLAMA_CPP_DIR]"
posenc=$(command -v "$1" 2> /dev/null) || die "'$1' is not an executable (build it: cmake --build build --target posenc)"
need python3 "install Python 3 (Debian: apt-get install python3)"
llamacpp_configure "${2:-}"
cmake --build "$build" --target rope_vs_hf -j "${JOBS:-$(nproc 2> /dev/null || echo 2)}" > "$build.build.log" 2>&1 || {
  tail -n 40 "$build.build.log" >&2
  die "build failed (last lines above; all in $build.build.log)"
}

configs=$here/../../tests/data/real-configs
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
for config in "$configs"/*.json; do
  name=$(basename "$config" .json)
  [[ $name == manifest || $name == keys-in-the-wild ]] && continue
  dir=$out/$name
  mkdir -p "$dir"
  if ! "$posenc" golden --config "$config" --out "$dir" > /dev/null 2> "$dir/golden.err"; then
    printf '{"model": "%s", "golden_error": %s}\n' "$name" "$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read().strip()))' "$dir/golden.err")" > "$dir/results.jsonl"
    continue
  fi
  python3 "$here/rope_keys.py" "$config" "$dir/manifest.json" > "$dir/keys.json"
  if python3 -c 'import json,sys; sys.exit(0 if "not_converted" in json.load(open(sys.argv[1])) else 1)' "$dir/keys.json"; then
    : > "$dir/results.jsonl"
  else
    "$build/rope_vs_hf" "$dir" "$dir/keys.json" > "$dir/results.jsonl"
  fi
done
python3 "$here/rope_table.py" "$out" "$commit" "$tag"
