#!/usr/bin/env bash
# Installs every Debian package posenc needs, for all of its layers, in one place.
# Idempotent: packages already present are left alone, and `apt-get update` runs only when
# something is missing. Runs as root (or through sudo when it is available).
#
#   scripts/install-deps.sh [PACKAGE ...]   # the list below, and these too (an optional
#                                           # benchmark's own, e.g. bench/bf16_libraries/run.sh)
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ccache pkg-config
  # core: SIMD with dynamic dispatch, strict config parsing, CLI
  libhwy-dev nlohmann-json3-dev libcli11-dev
  # tests and benchmarks; clang + its runtimes for libFuzzer (make fuzz)
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev libomp-dev
  # pictures
  libpng-dev librsvg2-bin
  # libtorch layer, lab, and the PyTorch-eager side of the benchmarks
  libtorch-dev python3-torch python3-numpy
  # the distributed lab: Gloo headers and library for libtorch's c10d (ProcessGroupGloo)
  libgloo-dev
  # the Python package (pybind11 extension over the core) and its tests
  pybind11-dev python3-dev python3-pytest
  # pip install . (pyproject.toml, setuptools backend, --no-build-isolation) into a venv
  python3-pip python3-venv python3-setuptools
  # Debian's libtorch links the reference BLAS; OpenBLAS takes over the libblas alternative
  # (matrix products ~30x faster on this class of machine).
  libopenblas0-pthread
  # the lab's corpora: the King James Bible (public domain) and, of another genre, fortune cookies
  bible-kjv fortunes
  # the leaderboard's report rendered in a real browser by its test (headless)
  chromium
)
PACKAGES+=("$@")

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
