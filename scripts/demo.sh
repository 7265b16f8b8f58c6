#!/usr/bin/env bash
# posenc's main job on built-in defaults: a short tour of RoPE frequency schedules.
# (The train-short/test-long lab will take this place once it exists.)
set -euo pipefail
POSENC=${1:-build/cli/posenc}
cd "$(dirname "$0")/.."

section() { printf '\n=== %s\n$ %s\n' "$1" "${*:2}"; }
# show TITLE FIRST LAST ARGS...: the header and table rows FIRST..LAST of `posenc ARGS`.
show() {
  section "$1" "posenc ${*:4}"
  "$POSENC" "${@:4}" | awk -v a="$2" -v b="$3" '/^ +[0-9]+  / { i = $1 + 0; if (i < a || i > b) next } { print }'
}

show "Llama 3.1: low frequencies divided by 8, high ones kept, a smooth band between" 26 37 \
  freqs --config examples/configs/llama3-128k.json
show "Qwen2.5 with YaRN x4: NTK-by-parts ramp over pairs 23..40 and attention factor 1.1386" 21 42 \
  freqs --config examples/configs/qwen2.5-yarn-128k.json
section "The same YaRN schedule from flags, as JSON" \
  "posenc freqs --rope-type yarn --theta 1e6 --head-dim 128 --factor 4 --original-max 32768 --json"
"$POSENC" freqs --rope-type yarn --theta 1e6 --head-dim 128 --factor 4 --original-max 32768 --json |
  python3 -c 'import json,sys; j=json.load(sys.stdin); print({k: j[k] for k in ("rope_type","rotary_dim","attention_factor","correction_range")}, "inv_freq[:3] =", j["inv_freq"][:3])'
show "Dynamic NTK at 4x its context: the base grows with the sequence" 0 4 \
  freqs --config examples/configs/dynamic-ntk.json --seq-len 131072
section "Bad input is an error that names the key (exit code 2)" \
  "posenc freqs --rope-type linear --head-dim 128 --factor -2"
if "$POSENC" freqs --rope-type linear --head-dim 128 --factor -2 2>&1; then exit 1; else echo "  (exit code $?)"; fi
