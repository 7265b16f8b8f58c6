// The options every lab command shares (extrapolate, sort, passkey), declared once for all of
// them: the run's size flags, its training settings, where it writes, and the launcher flags
// (--nproc, --rank, --world-size, --master-addr, --master-port, --dist-timeout, --distribute).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "posenc_lab/distributed.h"
#include "posenc_lab/run_settings.h"

namespace posenc::cli {

// --quick / --full (excluding each other): what each runs is the command's help text.
void add_size_flags(CLI::App* cmd, bool* quick, bool* full, const std::string& quick_help, const std::string& full_help);

// The settings a lab run shares; each pointer is the config field the option sets (its value now
// is the default CLI11 shows). corpus may be null (a task without a text corpus).
struct LabRunTargets {
  std::vector<std::string>* schemes;
  lab::TrainSettings* training;  // --train-len, --steps, --threads, --out
  lab::ModelShape* shape;        // --layers, --d-model, --heads
  int* seed;
  std::string* corpus;
  bool* json;
  lab::LaunchConfig* launch;  // null: a command that runs in one process only
};
// --steps, --seed, --threads, --out, --layers, --d-model, --heads and --json: how any lab model
// trains and how big it is (add_lab_run_options adds them; `lab vision` alone, with its grids).
void add_lab_model_options(CLI::App* cmd, lab::TrainSettings* training, lab::ModelShape* shape, int* seed, bool* json);

// --schemes, --train-len, --steps, --seed, --threads (at most this machine's hardware threads),
// --out, --layers, --d-model, --heads, --corpus, --json and the launcher flags. `unit` names what
// train-len counts.
void add_lab_run_options(CLI::App* cmd, const LabRunTargets& t, const std::string& unit);

// --extensions: RoPE's length extensions to score (names.h's table of lab::RopeExtension); a
// name not in it is an Error naming it and the names allowed.
void add_extensions_option(CLI::App* cmd, std::vector<lab::RopeExtension>* extensions);

// A list of fusions (names.h's table of torch_layer::Fusion: add, concat, multiply) into
// *fusions; a name not in it is an Error naming it and the names allowed.
void add_fusions_option(CLI::App* cmd, const std::string& flag, std::vector<std::string>* fusions, const std::string& help);

// --remap-groups, --remap-windows: the settings the remap extensions are scored at (lab::RemapSettings).
void add_remap_options(CLI::App* cmd, lab::RemapSettings* remaps);

// Adds the flags to cmd, parsed into *launch (which must outlive cmd's callback).
void add_launch_options(CLI::App* cmd, lab::LaunchConfig* launch);

// Call first in the command's callback: *launch completed from the environment and checked (an
// Error naming a bad value), and a batch of `batch` rows that data parallelism could not split
// over the ranks refused before any starts, and so is an --out that cannot be the output
// directory (out_dir; "" for none): each rank would otherwise wait out --dist-timeout for the
// others. Returns true when this process started the local ranks of --nproc and they finished:
// the command's work is then done.
bool launched_local_ranks(lab::LaunchConfig* launch, int batch, const std::string& out_dir);

}  // namespace posenc::cli
