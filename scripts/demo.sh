#!/usr/bin/env bash
# posenc's main job on built-in defaults: train short, test long (its lab run took 6 min on 2 busy cores),
# then a short look at the RoPE schedules the extensions use.
set -euo pipefail
POSENC=${1:-build/cli/posenc}
cd "$(dirname "$0")/.."

echo "=== posenc lab extrapolate --quick   (train at 64 characters, test up to 4096)"
"$POSENC" lab extrapolate --quick --out out/lab-quick

echo
echo "=== The schedules behind those extensions, for a real model: Llama 3.1's bands"
"$POSENC" freqs --config examples/configs/llama3-128k.json |
  awk '/^ +[0-9]+  / { i = $1 + 0; if (i < 27 || i > 36) next } { print }'
echo
echo "=== Qwen2.5 with YaRN x4 (as JSON)"
"$POSENC" freqs --config examples/configs/qwen2.5-yarn-128k.json --json |
  python3 -c 'import json,sys; j=json.load(sys.stdin); print({k: j[k] for k in ("rope_type","rotary_dim","attention_factor","correction_range")})'
echo
echo "=== The claims, checked live"
"$POSENC" check
