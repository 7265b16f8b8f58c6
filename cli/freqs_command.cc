#include "commands.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"
#include "options.h"

namespace posenc::cli {
namespace {

struct FreqsArgs {
  ConfigArgs source;
  std::optional<std::int64_t> seq_len;
  bool json = false;
  // Schedule flags (instead of --config). Names follow the config keys they set.
  RopeType rope_type = RopeType::kDefault;
  std::optional<int> head_dim;
  std::optional<int> rotary_dim;
  std::optional<double> theta, partial_rotary_factor, factor, attention_factor, beta_fast, beta_slow,
      mscale, mscale_all_dim, low_freq_factor, high_freq_factor;
  std::optional<std::int64_t> max_pos, original_max;
  bool no_truncate = false;
  std::vector<double> short_factor, long_factor;
  std::vector<int> mrope_section;
  std::vector<CLI::Option*> schedule_flags;  // any of these set means "from flags"
};

RopeParams params_from_flags(const FreqsArgs& a) {
  RopeParams p;
  p.type = a.rope_type;
  if (!a.head_dim) throw Error("--head-dim is required when the schedule comes from flags (or give --config)");
  p.head_dim = *a.head_dim;
  p.rotary_dim = a.rotary_dim;
  if (a.theta) p.theta = *a.theta;
  if (a.partial_rotary_factor) p.partial_rotary_factor = *a.partial_rotary_factor;
  p.factor = a.factor;
  p.max_position_embeddings = a.max_pos;
  p.original_max_position_embeddings = a.original_max;
  p.attention_factor = a.attention_factor;
  if (a.beta_fast) p.beta_fast = *a.beta_fast;
  if (a.beta_slow) p.beta_slow = *a.beta_slow;
  p.mscale = a.mscale;
  p.mscale_all_dim = a.mscale_all_dim;
  p.truncate = !a.no_truncate;
  p.low_freq_factor = a.low_freq_factor;
  p.high_freq_factor = a.high_freq_factor;
  p.short_factor = a.short_factor;
  p.long_factor = a.long_factor;
  p.mrope_section = a.mrope_section;
  return p;
}

nlohmann::json optional_json(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json schedule_json(const ModelRope& model, const LayerRope& layer, const RopeSchedule& s, bool hf) {
  const RopeParams& p = layer.params;
  nlohmann::json j;
  j["model_type"] = model.model_type;
  j["layer_type"] = layer.layer_type;
  nlohmann::json types = nlohmann::json::array();
  for (const auto& l : model.layers)
    if (!l.layer_type.empty()) types.push_back(l.layer_type);
  j["layer_types"] = types;
  j["rope_type"] = to_string(s.type);
  j["head_dim"] = s.head_dim;
  j["rotary_dim"] = s.rotary_dim;
  j["rotated_dim"] = s.rotated_dim;
  j["rope_theta"] = p.theta;
  j["base"] = s.base;
  j["factor"] = p.type == RopeType::kDefault ? nlohmann::json(nullptr) : nlohmann::json(resolved_factor(p));
  j["max_position_embeddings"] = optional_json(p.max_position_embeddings);
  j["original_max_position_embeddings"] = optional_json(p.original_max_position_embeddings);
  j["seq_len"] = optional_json(s.seq_len);
  j["precision"] = hf ? "hf_float32" : "double";
  // Float32 values widened to double print exactly and round-trip.
  j["inv_freq"] = std::vector<double>(s.inv_freq.begin(), s.inv_freq.end());
  j["attention_factor"] = s.attention_factor;
  if (s.correction_range) j["correction_range"] = {(*s.correction_range)[0], (*s.correction_range)[1]};
  if (s.type == RopeType::kLongRope) j["uses_long_factors"] = s.uses_long_factors;
  if (!p.mrope_section.empty()) {
    j["mrope_section"] = p.mrope_section;
    j["mrope_interleaved"] = p.mrope_interleaved;
  }
  if (const double m = deepseek_softmax_scale_multiplier(p); m != 1.0) j["deepseek_softmax_scale_multiplier"] = m;
  if (p.llama_4_scaling_beta) j["llama_4_scaling_beta"] = *p.llama_4_scaling_beta;
  j["warnings"] = model.warnings;
  j["notes"] = model.notes;
  return j;
}

void print_table(const ModelRope& model, const LayerRope& layer, const RopeSchedule& s) {
  const RopeParams& p = layer.params;
  if (!model.model_type.empty()) std::printf("model_type %s", model.model_type.c_str());
  if (!layer.layer_type.empty()) {
    std::printf("   layer type %s (of:", layer.layer_type.c_str());
    for (const auto& l : model.layers) std::printf(" %s", l.layer_type.c_str());
    std::printf("; --layer-type picks one)");
  }
  if (!model.model_type.empty() || !layer.layer_type.empty()) std::printf("\n");
  std::printf("rope_type %s   head_dim %d   rotary_dim %d   theta %s   attention_factor %.9g\n",
              to_string(s.type), s.head_dim, s.rotary_dim, format_number(p.theta).c_str(), s.attention_factor);
  if (s.type != RopeType::kDefault) std::printf("factor %s", format_number(resolved_factor(p)).c_str());
  if (s.base != p.theta) std::printf("   NTK base %s", format_number(s.base).c_str());
  if (s.correction_range)
    std::printf("   correction range [%.6g, %.6g]", (*s.correction_range)[0], (*s.correction_range)[1]);
  if (s.type == RopeType::kLongRope) std::printf("   %s factors", s.uses_long_factors ? "long" : "short");
  if (s.seq_len) std::printf("   at seq_len %lld", static_cast<long long>(*s.seq_len));
  if (s.type != RopeType::kDefault || s.seq_len) std::printf("\n");
  std::printf("\n%5s  %-14s  %-20s  %-12s  %s\n", "i", "inv_freq", "wavelength (tokens)", "scale", "interpolated");
  for (std::size_t i = 0; i < s.inv_freq.size(); ++i) {
    const double inv = s.inv_freq[i], base = s.base_inv_freq[i];
    const double wl = wavelength(inv);
    const double scale = inv > 0 ? base / inv : 0;  // how much slower than the unscaled schedule
    const bool interpolated = inv > 0 && scale > 1 + 1e-6;
    std::printf("%5zu  %-14.8g  %-20.6g  %-12.6g  %s\n", i, inv, wl, scale,
                inv == 0 ? "(not rotated)" : interpolated ? "yes" : "no");
  }
  for (const auto& n : model.notes) std::printf("note: %s\n", n.c_str());
}

void run_freqs(const FreqsArgs& a) {
  bool from_flags = false;
  for (const CLI::Option* o : a.schedule_flags) from_flags = from_flags || o->count() > 0;
  if (a.source.config.empty() && !from_flags) throw Error("give --config config.json, or the schedule as flags (--head-dim ...)");
  if (!a.source.config.empty() && from_flags) throw Error("--config and schedule flags (--rope-type, --head-dim, ...) exclude each other");

  ModelRope model;
  if (!a.source.config.empty()) {
    model = a.source.load();
  } else {
    model.layers.push_back({"", true, params_from_flags(a)});
    validate(model.layers.back().params);
    advise(model.layers.back().params, model.warnings, model.notes);
  }
  for (const auto& w : model.warnings) std::cerr << "posenc: warning: " << w << "\n";
  const Numerics numerics = a.source.numerics();
  if (a.source.layer_type == "all") {  // every layer type with RoPE: {"layers": [schedule, ...]} or one table each
    nlohmann::json all = {{"layers", nlohmann::json::array()}};
    bool first = true;
    for (const LayerRope& layer : model.layers) {
      if (!layer.has_rope) continue;
      const RopeSchedule s = compute_schedule(layer.params, a.seq_len, numerics);
      if (a.json) {
        all["layers"].push_back(schedule_json(model, layer, s, a.source.hf_compatible));
      } else {
        if (!first) std::printf("\n");
        first = false;
        print_table(model, layer, s);
      }
    }
    if (a.json) std::cout << all.dump(1) << "\n";
    return;
  }
  const LayerRope& layer = model.select(a.source.layer_type);
  const RopeSchedule s = compute_schedule(layer.params, a.seq_len, numerics);
  if (a.json)
    std::cout << schedule_json(model, layer, s, a.source.hf_compatible).dump(1) << "\n";
  else
    print_table(model, layer, s);
}

}  // namespace

void add_freqs_command(CLI::App& app) {
  auto args = std::make_shared<FreqsArgs>();
  CLI::App* cmd = app.add_subcommand("freqs", "RoPE frequency schedule (inv_freq, attention factor) of a config.json or of flags");
  add_config_options(cmd, args->source, false, "layer type to show (default: full_attention; all: every one)");
  cmd->add_option("--seq-len", args->seq_len, "the schedule in force at this sequence length (dynamic, longrope)");
  add_json_flag(cmd, args->json);
  auto& f = args->schedule_flags;
  f.push_back(add_enum_option(cmd, "--rope-type", args->rope_type, "rope type"));
  f.push_back(add_head_dim_option(cmd, args->head_dim, "channels per head"));
  f.push_back(cmd->add_option("--rotary-dim", args->rotary_dim, "rotated channels (default: head_dim * partial rotary factor)"));
  f.push_back(cmd->add_option("--partial-rotary-factor", args->partial_rotary_factor, "fraction of head_dim that rotates, in (0, 1]"));
  f.push_back(cmd->add_option("--theta", args->theta, "rope_theta, the base (default 10000)"));
  f.push_back(cmd->add_option("--factor", args->factor, "scale factor s"));
  f.push_back(cmd->add_option("--max-pos", args->max_pos, "max_position_embeddings (dynamic's reference length)"));
  f.push_back(cmd->add_option("--original-max", args->original_max, "original_max_position_embeddings"));
  f.push_back(cmd->add_option("--attention-factor", args->attention_factor, "explicit attention factor (yarn, longrope)"));
  f.push_back(cmd->add_option("--beta-fast", args->beta_fast, "yarn beta_fast (default 32)"));
  f.push_back(cmd->add_option("--beta-slow", args->beta_slow, "yarn beta_slow (default 1)"));
  f.push_back(cmd->add_option("--mscale", args->mscale, "yarn mscale (used with --mscale-all-dim)"));
  f.push_back(cmd->add_option("--mscale-all-dim", args->mscale_all_dim, "yarn mscale_all_dim"));
  f.push_back(cmd->add_flag("--no-truncate", args->no_truncate, "yarn: keep the correction range fractional (gpt-oss)"));
  f.push_back(cmd->add_option("--low-freq-factor", args->low_freq_factor, "llama3 low_freq_factor"));
  f.push_back(cmd->add_option("--high-freq-factor", args->high_freq_factor, "llama3 high_freq_factor"));
  f.push_back(cmd->add_option("--short-factor", args->short_factor, "longrope short factors (comma-separated)")->delimiter(','));
  f.push_back(cmd->add_option("--long-factor", args->long_factor, "longrope long factors (comma-separated)")->delimiter(','));
  f.push_back(add_mrope_section_option(cmd, args->mrope_section, "M-RoPE sections T,H,W")->delimiter(','));
  cmd->callback([args] { run_freqs(*args); });
}

}  // namespace posenc::cli
