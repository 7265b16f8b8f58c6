// Every posenc subcommand, one function each that adds it (its options and its callback) to the
// app: the list run_cli (app.cc) assembles. Each lives in its own <name>_command.cc, but explain
// lives beside plot (plot_command.cc).
#pragma once

#include <stdexcept>

namespace CLI {
class App;
}

namespace posenc::cli {

void add_freqs_command(CLI::App& app);    // RoPE schedule of a config.json or of flags
void add_table_command(CLI::App& app);    // the numbers of a scheme
void add_check_command(CLI::App& app);    // the properties each scheme claims, measured
void add_bench_command(CLI::App& app);    // benchmarks (rope; with libtorch: train, attention)
void add_plot_command(CLI::App& app);     // pictures
void add_explain_command(CLI::App& app);  // a model's positional encoding in words and numbers
void add_spec_command(CLI::App& app);     // per-layer positional semantics of a config.json
void add_golden_command(CLI::App& app);   // test vectors for inference engines
void add_gguf_command(CLI::App& app);     // a GGUF file's positional keys against HF's schedule
void add_tour_command(CLI::App& app);     // the learner's walk, each claim measured live
#ifdef POSENC_WITH_TORCH
void add_lab_command(CLI::App& app);                // experiments: extrapolate, sort, passkey
void add_lab_passkey_command(CLI::App& lab);        // lab passkey
void add_lab_vision_command(CLI::App& lab);         // lab vision
void add_lab_leaderboard_command(CLI::App& lab);    // lab leaderboard
void add_bench_attention_command(CLI::App* bench);  // bench attention
#endif

// Thrown by a command whose checks ran and failed: exit 1 (not a usage error).
struct ChecksFailed : std::runtime_error {
  ChecksFailed() : std::runtime_error("property checks failed") {}
};

}  // namespace posenc::cli
