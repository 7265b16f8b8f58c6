#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

// `posenc bench attention` under the bench command (libtorch builds only).
void add_bench_attention_command(CLI::App* bench);

}  // namespace posenc::cli
