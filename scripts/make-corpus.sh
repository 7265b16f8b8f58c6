#!/usr/bin/env bash
# The lab's corpora, made from Debian packages at set-up time (never committed); which one by the
# output's file name:
#   data/kjv.txt       every verse of the King James Bible (bible-kjv; public domain), one per
#                      line, reference prefix removed
#   data/fortunes.txt  another genre: Debian's fortune cookies (fortunes: quotations, jokes,
#                      verse), every file but the ASCII art, '%' separators removed, and digits
#                      and '=' deleted, which the passkey task needs absent from its filler text
set -euo pipefail
out=${1:-data/kjv.txt}
mkdir -p "$(dirname "$out")"
trap 'rm -f "$out.tmp"' EXIT  # never a half-written corpus
case "$(basename "$out")" in
  kjv.txt)
    if ! command -v bible >/dev/null 2>&1; then
      echo "make-corpus: the 'bible' command is missing; run scripts/install-deps.sh (package bible-kjv)" >&2
      exit 1
    fi
    bible -f gen1:1-rev22:21 | sed -E 's/^[^ ]+ //' > "$out.tmp"
    ;;
  fortunes.txt)
    dir=/usr/share/games/fortunes
    if [ ! -f "$dir/fortunes" ]; then
      echo "make-corpus: $dir/fortunes is missing; run scripts/install-deps.sh (package fortunes)" >&2
      exit 1
    fi
    find "$dir" -maxdepth 1 -type f ! -name '*.*' ! -name 'ascii-art' -print0 | sort -z | xargs -0 cat |
      grep -v '^%$' | tr -d '0-9=' > "$out.tmp"
    ;;
  *)
    echo "make-corpus: no recipe for $out (known: data/kjv.txt, data/fortunes.txt)" >&2
    exit 1
    ;;
esac
mv "$out.tmp" "$out"
echo "make-corpus: $(wc -c < "$out") bytes in $out"
