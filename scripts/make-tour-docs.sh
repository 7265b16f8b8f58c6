#!/usr/bin/env bash
# Regenerates docs/tour.md and docs/tour.zh.md from the tour's own output, so the pages say what
# `posenc tour` measures (tests/cli_tour_test.cc fails when they drift).
# usage: scripts/make-tour-docs.sh [PATH_TO_POSENC [TOUR FLAGS...]]   (default: build/cli/posenc)
# Built with libtorch, the five training steps run too (tiny; --real for the lab's own size),
# on data/kjv.txt (`make corpus`) unless a flag says --corpus; their numbers are this machine's.
set -euo pipefail
cd "$(dirname "$0")/.."
posenc=${1:-build/cli/posenc}
shift || true
"$posenc" tour --markdown --lang en "$@" > docs/tour.md.tmp
"$posenc" tour --markdown --lang zh "$@" > docs/tour.zh.md.tmp
mv docs/tour.md.tmp docs/tour.md
mv docs/tour.zh.md.tmp docs/tour.zh.md
echo "make-tour-docs: docs/tour.md, docs/tour.zh.md from $posenc"
