#include "commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "options.h"
#include "posenc/golden.h"

namespace posenc::cli {
namespace {

struct GoldenArgs {
  ConfigArgs source;
  std::string out;
  std::vector<std::int64_t> positions;
  std::uint64_t seed = 0;
};

void run_golden(const GoldenArgs& a) {
  const ModelSpec spec = load_model_spec(a.source.config, ConfigOptions{a.source.lenient, a.source.hf_compatible});
  for (const auto& w : spec.warnings) std::cerr << "posenc: warning: " << w << "\n";
  const Golden g = make_golden(spec, GoldenParams{a.positions, a.seed});
  write_golden(g, a.out);
  std::printf("wrote %s/golden.safetensors (%zu tensors) and %s/manifest.json\n", a.out.c_str(),
              g.tensors.tensors.size(), a.out.c_str());
}

}  // namespace

void add_golden_command(CLI::App& app) {
  auto args = std::make_shared<GoldenArgs>();
  CLI::App* cmd = app.add_subcommand("golden", "test vectors for an engine: cos/sin, q and k before and after the "
                                               "positional treatment, logits, per layer type (safetensors + manifest)");
  add_config_options(cmd, args->source, true, "");
  add_out_option(cmd, args->out, "directory for golden.safetensors and manifest.json")->required();
  add_positions_option(cmd, args->positions, "positions (default: 0,1,127,4095, the original context, 4x it, 131071)");
  add_seed_option(cmd, args->seed, "seed of q and k");
  cmd->callback([args] { run_golden(*args); });
}

}  // namespace posenc::cli
