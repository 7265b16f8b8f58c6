#include "commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_fields.h"
#include "posenc/rope_schedule.h"
#include "freqs_vision.h"
#include "options.h"

namespace posenc::cli {
namespace {

struct FreqsArgs {
  ConfigArgs source;
  std::optional<std::int64_t> seq_len;
  bool json = false;
  RopeParams flags;                          // the schedule from flags, one per field-table row
  std::vector<CLI::Option*> schedule_flags;  // any of these set means "from flags"
  VisionFreqsArgs vision;
  CLI::Option* seq_len_option = nullptr;
};

// What a flag's help says beyond the row's line: the rope types that read the field.
std::string read_by_text(const RopeField& row) {
  if (row.read_by.is_every()) return "";
  std::string types;
  for (const std::string& name : enum_names<RopeType>())
    if (row.read_by.has(from_name<RopeType>(name))) types += (types.empty() ? "" : ", ") + name;
  return " (" + types + ")";
}

// One flag per row of the field table, named after HF's key (--rope-theta), with an older
// spelling where posenc had one (--theta); bools are flags with a --no- form, lists take
// comma-separated values.
std::vector<CLI::Option*> add_rope_field_flags(CLI::App* cmd, RopeParams& flags) {
  std::vector<CLI::Option*> out;
  for_each_field(flags, [&](const RopeField& row, auto& member) {
    using T = std::decay_t<decltype(member)>;
    const std::string flag = flag_of(row.name);
    const std::string names = row.flag_legacy ? flag + "," + row.flag_legacy : flag;
    const std::string help = row.help + read_by_text(row);
    if constexpr (std::is_same_v<T, RopeType>) {
      out.push_back(add_enum_option(cmd, names, member, help));
    } else if constexpr (std::is_same_v<T, bool>) {
      out.push_back(cmd->add_flag(names + ",!--no-" + flag.substr(2), member, help)->capture_default_str());
    } else if constexpr (std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<int>>) {
      out.push_back(add_list_option(cmd, names, member, help));
    } else {
      out.push_back(cmd->add_option(names, member, help)->capture_default_str());
    }
  });
  return out;
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
    if (p.mrope_xdrope) j["mrope_xdrope"] = true;
  }
  if (const double m = deepseek_softmax_scale_multiplier(p); m != 1.0) j["deepseek_softmax_scale_multiplier"] = m;
  if (p.llama_4_scaling_beta) j["llama_4_scaling_beta"] = *p.llama_4_scaling_beta;
  if (p.alpha) j["alpha"] = *p.alpha;
  if (p.clip_low != 0) {
    j["clip_low"] = p.clip_low;
    j["clip_hard"] = p.clip_hard;
  }
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
  if (p.clip_low != 0) std::printf("   lowest %d frequencies clipped (%s)", p.clip_low, p.clip_hard ? "hard" : "soft");
  if (s.type != RopeType::kDefault || s.seq_len || p.clip_low != 0) std::printf("\n");
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
  if (run_vision_freqs(a.vision, {a.source, a.schedule_flags, a.flags.head_dim, a.flags.theta,
                                  a.seq_len_option->count() > 0, a.json}))
    return;
  bool from_flags = false;
  for (const CLI::Option* o : a.schedule_flags) from_flags = from_flags || o->count() > 0;
  if (a.source.config.empty() && !from_flags) throw Error("give --config config.json, or the schedule as flags (--head-dim ...)");
  if (!a.source.config.empty() && from_flags) throw Error("--config and schedule flags (--rope-type, --head-dim, ...) exclude each other");

  ModelRope model;
  if (!a.source.config.empty()) {
    model = a.source.load();
  } else {
    const auto head_dim = std::find_if(a.schedule_flags.begin(), a.schedule_flags.end(),
                                       [](const CLI::Option* o) { return o->check_name("--head-dim"); });
    if (head_dim == a.schedule_flags.end() || (*head_dim)->count() == 0)
      throw Error("--head-dim is required when the schedule comes from flags (or give --config)");
    model.layers.push_back({"", true, a.flags, std::nullopt});
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
      const RopeSchedule s = compute_schedule(prefill_params(layer, a.seq_len), a.seq_len, numerics);
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
  const RopeSchedule s = compute_schedule(prefill_params(layer, a.seq_len), a.seq_len, numerics);
  if (a.json)
    std::cout << schedule_json(model, layer, s, a.source.hf_compatible).dump(1) << "\n";
  else
    print_table(model, layer, s);
}

}  // namespace

void add_freqs_command(CLI::App& app) {
  auto args = std::make_shared<FreqsArgs>();
  CLI::App* cmd = app.add_subcommand("freqs", "RoPE frequency schedule (inv_freq, attention factor) of a config.json or of flags; --vision: a vision tower's 2-D RoPE");
  add_config_options(cmd, args->source, false, "layer type to show (default: full_attention; all: every one)");
  args->seq_len_option = cmd->add_option("--seq-len", args->seq_len, "the schedule in force at this sequence length (dynamic, longrope)");
  add_json_flag(cmd, args->json);
  args->schedule_flags = add_rope_field_flags(cmd, args->flags);
  add_vision_freqs_options(cmd, args->vision);
  cmd->callback([args] { run_freqs(*args); });
}

}  // namespace posenc::cli
