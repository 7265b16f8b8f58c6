// --threads, declared once for every command that runs threads (bench rope, bench train, the lab):
// the same range, the same message. 100 000 threads crashed libgomp and hung libtorch.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "posenc/rope_kernels.h"

namespace posenc::cli {

// Adds --threads to cmd, checked to lie in [min_threads, kMaxThreads] when parsed (a value
// outside is a usage error, exit 2, naming the value and the range). `help` says what the
// value means (e.g. "torch threads (0: default)"); the range is appended. Target: int or
// std::optional<int>.
template <typename T>
CLI::Option* add_threads_option(CLI::App* cmd, T& target, const std::string& help, int min_threads = 0) {
  return cmd
      ->add_option("--threads", target, help + "; in [" + std::to_string(min_threads) + ", " + std::to_string(kMaxThreads) + "]")
      ->check(CLI::Range(min_threads, kMaxThreads));
}

}  // namespace posenc::cli
