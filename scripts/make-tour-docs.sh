#!/usr/bin/env bash
# Regenerates docs/tour.md and docs/tour.zh.md from the tour's own output, so the pages say what
# `posenc tour` measures (tests/cli_tour_test.cc fails when they drift).
# usage: scripts/make-tour-docs.sh [PATH_TO_POSENC]   (default: build/cli/posenc)
set -euo pipefail
cd "$(dirname "$0")/.."
posenc=${1:-build/cli/posenc}
"$posenc" tour --markdown --lang en > docs/tour.md
"$posenc" tour --markdown --lang zh > docs/tour.zh.md
echo "make-tour-docs: docs/tour.md, docs/tour.zh.md from $posenc"
