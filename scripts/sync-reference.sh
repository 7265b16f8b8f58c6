#!/usr/bin/env bash
# Refreshes the reference data the tests read (tests/data/) and the HF notes (docs/reference/)
# from the project's shared reference folder (../shared/reference by default), then rewrites
# tests/data/SHA256SUMS. The tests never read ../shared: a clone alone carries what they need.
# usage: scripts/sync-reference.sh [SOURCE_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-../shared/reference}
[ -f "$src/hf-golden.json" ] || { echo "sync-reference: no hf-golden.json in '$src'" >&2; exit 1; }
cp "$src/hf-golden.json" tests/data/hf-golden.json
mkdir -p tests/data/real-configs
cp "$src"/real-configs/*.json tests/data/real-configs/
cp "$src/hf-reference.md" "$src/model-semantics.md" docs/reference/
(cd tests/data && find . -name '*.json' | sort | xargs sha256sum > SHA256SUMS)
echo "sync-reference: $(ls tests/data/real-configs | wc -l) configs, hf-golden.json, notes from $src"
