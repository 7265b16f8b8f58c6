#!/usr/bin/env bash
# Installs posenc from BUILD_DIR into a temporary prefix, builds tests/consumer against it with
# find_package(posenc) and runs it; then checks the pkg-config file compiles the same program.
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" c++ -std=c++17 "$src/tests/consumer/main.cc" -o "$work/consumer-pc" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs --static posenc)
"$work/consumer-pc"
test -x "$work/prefix/bin/posenc"
echo "consumer: find_package(posenc) and pkg-config both build and run"
