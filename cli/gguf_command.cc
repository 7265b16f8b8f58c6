#include "commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "options.h"
#include "posenc/engine_json.h"
#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc::cli {
namespace {

struct GgufArgs {
  std::string file;
  ConfigArgs source;  // the config to compare with
  bool json = false;
};

// The same report as one JSON object (posenc.gguf() in Python returns it); exit 1 when it differs.
void print_json(const GgufFile& f, const GgufRope& r, const ConfigArgs& source) {
  std::vector<GgufMismatch> mismatches;
  if (!source.config.empty()) mismatches = compare_with_hf(r, source.load());
  std::cout << gguf_report_json(GgufReport{&f, &r, source.config.empty() ? nullptr : &mismatches}) << "\n";
  if (!mismatches.empty()) throw ChecksFailed();
}

void run_gguf(const GgufArgs& a) {
  // Only the header and the small positional tensors are read, whatever the model's size.
  const GgufFile f = read_gguf(a.file);
  const GgufRope r = gguf_rope(f);
  if (a.json) return print_json(f, r, a.source);
  std::printf("architecture %s (GGUF v%u, %zu keys, %zu tensors)\n", r.arch.c_str(), f.version, f.metadata.size(),
              f.tensors.size());
  for (const auto& [key, value] : r.keys) std::printf("  %s = %s\n", key.c_str(), value.c_str());
  if (!r.freq_factors_tensor.empty()) std::printf("  %s: per-frequency divisors\n", r.freq_factors_tensor.c_str());
  std::printf("llama.cpp schedule: n_rot %d, base %s, scaling %s, factor %s, ext_factor %s, attention factor %.9g\n",
              r.n_rot, format_number(r.freq_base).c_str(), r.scaling_type.c_str(), format_number(r.factor).c_str(),
              format_number(r.ext_factor).c_str(), r.attention_factor);
  for (std::size_t i = 0; i < r.inv_freq.size(); ++i) std::printf("%5zu  %.9g\n", i, r.inv_freq[i]);
  if (a.source.config.empty()) return;
  const auto mismatches = compare_with_hf(r, a.source.load());
  if (mismatches.empty()) {
    std::printf("agrees with HF's schedule for %s within float32 rounding\n", a.source.config.c_str());
    return;
  }
  std::printf("DIFFERS from HF's schedule for %s:\n", a.source.config.c_str());
  for (const auto& m : mismatches) std::printf("  %s: %s\n", m.key.c_str(), m.message.c_str());
  throw ChecksFailed();
}

}  // namespace

void add_gguf_command(CLI::App& app) {
  auto args = std::make_shared<GgufArgs>();
  CLI::App* cmd = app.add_subcommand("gguf", "a GGUF file's positional keys, the schedule llama.cpp computes from them, "
                                             "and with --config its agreement with HF's (exit 1 when they differ)");
  cmd->add_option("file", args->file, "the .gguf file")->required();
  add_config_options(cmd, args->source, false, "");
  add_json_flag(cmd, args->json);
  cmd->callback([args] { run_gguf(*args); });
}

}  // namespace posenc::cli
