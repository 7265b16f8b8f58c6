# Shared by run.sh and rope.sh (sourced, not run): finds or fetches the llama.cpp tree and
# configures the CMake project here against it.
#
#   llamacpp_configure [LLAMA_CPP_DIR]  sets src, commit, tag, build; the caller builds its target.
#
# Without LLAMA_CPP_DIR, the llama.cpp release pinned below is fetched once with npm (the
# node-llama-cpp package carries it as a git bundle) into the cache directory. Only ggml's CPU
# backend is built (static, -march=native, OpenMP, Release, ccache when present), in the cache
# directory, never in the repository.

NODE_LLAMA_CPP_VERSION=3.22.1  # its package/llama/llama.cpp.info.json: tag v0.5.0, bundle commit de3ff815ea7d
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${POSENC_LLAMACPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/posenc-llamacpp}

die() {
  echo "bench/llamacpp/$(basename "$0"): $*" >&2
  exit 1
}
need() { command -v "$1" > /dev/null 2>&1 || die "'$1' not found: $2"; }

llamacpp_configure() {
  need cmake "install CMake >= 3.14 (Debian: apt-get install cmake)"
  need c++ "install a C++17 compiler (Debian: apt-get install g++)"
  src=""
  if [[ -n ${1:-} ]]; then
    src=$(cd "$1" 2> /dev/null && pwd) || die "'$1' is not a directory"
  fi
  tag=""
  if [[ -z $src ]]; then
    src=$cache/llama.cpp-node-llama-cpp-$NODE_LLAMA_CPP_VERSION
    if [[ ! -f $src/ggml/CMakeLists.txt ]]; then
      need npm "install npm (Debian: apt-get install npm), or pass a llama.cpp checkout: run.sh /path/to/llama.cpp"
      need git "install git (Debian: apt-get install git), or pass a llama.cpp checkout: run.sh /path/to/llama.cpp"
      mkdir -p "$cache"
      tmp=$(mktemp -d "$cache/fetch.XXXXXX")
      trap 'rm -rf "$tmp"' EXIT
      echo "fetching llama.cpp from npm: node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >&2
      (cd "$tmp" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" > /dev/null) ||
        die "npm pack node-llama-cpp@$NODE_LLAMA_CPP_VERSION failed (no access to the npm registry?)"
      tar -xzf "$tmp/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz" -C "$tmp" \
        package/llama/gitRelease.bundle package/llama/llama.cpp.info.json ||
        die "the package holds no package/llama/gitRelease.bundle"
      git clone --quiet "$tmp/package/llama/gitRelease.bundle" "$tmp/llama.cpp" 2> /dev/null ||
        die "git clone of the bundle failed"
      cp "$tmp/package/llama/llama.cpp.info.json" "$src.info.json"
      rm -rf "$src"
      mv "$tmp/llama.cpp" "$src"
      rm -rf "$tmp"
      trap - EXIT
    fi
    [[ -f $src.info.json ]] && tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$src.info.json")
  fi
  [[ -f $src/ggml/CMakeLists.txt ]] || die "'$src' is not a llama.cpp tree (no ggml/CMakeLists.txt)"

  commit=unknown
  if command -v git > /dev/null 2>&1 && git -C "$src" rev-parse --git-dir > /dev/null 2>&1; then
    commit=$(git -C "$src" rev-parse HEAD)
    [[ -n $tag ]] || tag=$(git -C "$src" describe --tags --always 2> /dev/null || true)
    git -C "$src" diff-index --quiet HEAD -- 2> /dev/null || commit="$commit-dirty"
  fi

  mkdir -p "$cache"
  build=$cache/build-$(printf '%s' "$src" | cksum | cut -d' ' -f1)
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CPP_DIR="$src" -DLLAMA_CPP_COMMIT="$commit" \
    -DLLAMA_CPP_TAG="$tag" -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=ON -DGGML_CCACHE=ON \
    -DGGML_BACKEND_DL=OFF > "$build.configure.log" 2>&1 || {
    cat "$build.configure.log" >&2
    die "cmake configure failed (log above)"
  }
}
