#!/usr/bin/env bash
# The lab's English corpus, made from Debian's bible-kjv at set-up time (never committed):
# every verse of the King James Bible (public domain), one per line, reference prefix removed.
set -euo pipefail
out=${1:-data/kjv.txt}
if ! command -v bible >/dev/null 2>&1; then
  echo "make-corpus: the 'bible' command is missing; run scripts/install-deps.sh (package bible-kjv)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
trap 'rm -f "$out.tmp"' EXIT  # never a half-written corpus
bible -f gen1:1-rev22:21 | sed -E 's/^[^ ]+ //' > "$out.tmp"
mv "$out.tmp" "$out"
echo "make-corpus: $(wc -c < "$out") bytes in $out"
