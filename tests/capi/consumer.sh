#!/usr/bin/env bash
# The installed C ABI, as a C program outside the tree links it: libposenc_c.so.<major> exports
# only posenc_* symbols, each versioned POSENC_<major>; examples/c/rope.c builds and runs through
# pkg-config (shared, and static with -DPOSENC_STATIC) and through find_package(posenc) posenc::c.
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
lib=$work/prefix/lib
major=$(sed -n 's/^#define POSENC_ABI_VERSION \([0-9]*\)$/\1/p' "$src/capi/include/posenc.h")
test -n "$major"
so=$lib/libposenc_c.so.$major
readelf -d "$so" | grep -q "SONAME.*\[libposenc_c.so.$major\]"
exports=$(nm -D --defined-only "$so" | awk '$2 ~ /[TDBRW]/ {print $3}')
test -n "$exports"
bad=$(echo "$exports" | grep -v "^posenc_[a-z0-9_]*@@POSENC_$major\$" || true)
if [ -n "$bad" ]; then echo "exported beyond posenc_*@@POSENC_$major:"; echo "$bad"; exit 1; fi
config=$src/tests/data/real-configs/Llama-3.1-8B-Instruct.json
export PKG_CONFIG_PATH=$lib/pkgconfig
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/examples/c/rope.c" -o "$work/rope-pc" $(pkg-config --cflags --libs posenc-c) \
  -Wl,-rpath,"$lib"
"$work/rope-pc" "$config" | grep -q "llama3 RoPE"
cc -std=c99 -Wall -Werror -pedantic -DPOSENC_STATIC $(pkg-config --cflags posenc-c) "$src/examples/c/rope.c" -o "$work/rope-static" \
  "$lib/libposenc_c.a" $(pkg-config --libs --static posenc) -lstdc++ -lm
"$work/rope-static" "$config" | grep -q "llama3 RoPE"
cmake -S "$src/tests/capi/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DEXAMPLE="$src/examples/c/rope.c" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/rope" "$config" | grep -q "llama3 RoPE"
echo "C ABI consumer: $(echo "$exports" | wc -l) symbols posenc_*@@POSENC_$major; pkg-config (shared, static) and find_package build and run"
