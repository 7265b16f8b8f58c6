#include "commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "options.h"
#include "posenc/error.h"
#include "posenc/model_spec.h"

namespace posenc::cli {
namespace {

struct SpecArgs {
  ConfigArgs source;
  bool json = false;
};

using nlohmann::json;

json optional_json(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); }

// The keys engines' tests read (index ... softmax_scale_multiplier) are fixed; the rest may grow.
json layer_json(const LayerSpec& l) {
  json j = {{"index", l.index},
            {"layer_type", l.layer_type},
            {"rope", l.rope},
            {"pairing", pairing_name(l.layout)},
            {"rotary_dim", l.rotary_dim},
            {"attention", to_string(l.attention)},
            {"window", optional_json(l.window)},
            {"query_scale", nullptr},
            {"softmax_scale_multiplier", l.softmax_scale_multiplier},
            {"softmax_scale", l.softmax_scale},
            {"head_dim", l.head_dim},
            {"rotary_offset", l.rotary_offset},
            {"qk_norm", l.qk_norm == QkNormPlacement::kNone ? json(nullptr) : json(to_string(l.qk_norm))},
            {"schedule", l.schedule < 0 ? json(nullptr) : json(l.schedule)}};
  if (const char* order = output_order(l.layout)) j["output_order"] = order;
  j["rotated_channels"] = l.rotated_channels;  // [begin, end) ranges; two for Gemma 4's proportional
  j["kv_shared_from"] = l.kv_shared_from ? json(*l.kv_shared_from) : json(nullptr);
  const QueryScaling& q = l.query_scale;
  if (q.rule == QueryScale::kLlama4Temperature)
    j["query_scale"] = {{"rule", q.name()}, {"attn_scale", q.scale}, {"floor_scale", q.floor_scale},
                        {"formula", "1 + attn_scale * log1p(floor((p + 1) / floor_scale))"}};
  else if (q.rule == QueryScale::kLlama4ScalingBeta)
    j["query_scale"] = {{"rule", q.name()}, {"beta", q.scale}, {"original_max_position_embeddings", q.floor_scale},
                        {"formula", "1 + beta * log(1 + floor(p / original_max_position_embeddings))"}};
  else if (q.rule == QueryScale::kQwenLogN)
    j["query_scale"] = {{"rule", q.name()}, {"seq_length", q.floor_scale},
                        {"formula", "log(p + 1) / log(seq_length) when p + 1 > seq_length, else 1 (p: cache index)"}};
  return j;
}

// The model's positional scheme, per stack: what replaces RoPE when it is not RoPE.
json positions_json(const ModelPositions& m) {
  json stacks = json::array();
  for (const PositionStack& p : m.stacks) {
    json e = {{"stack", p.stack}, {"scheme", to_string(p.scheme)}, {"hf_source", p.hf_source},
              {"layers", optional_json(p.layers)}};
    if (p.scheme == PositionScheme::kLearnedAbsolute || p.scheme == PositionScheme::kSinusoidal) {
      e["max_positions"] = p.rows;  // the table's rows: positions 0 .. rows - 1
      e["width"] = p.width;
    }
    if (p.scheme == PositionScheme::kSinusoidal)
      e["sinusoidal"] = {{"layout", to_string(p.sinusoidal.layout)}, {"freq", to_string(p.sinusoidal.freqs)},
                         {"base", p.sinusoidal.base}};
    if (p.scheme == PositionScheme::kAlibi) {
      e["heads"] = p.heads;
      e["slopes"] = p.alibi_slopes;
      e["slopes_float32"] = std::vector<double>(p.alibi_slopes_f32.begin(), p.alibi_slopes_f32.end());
      e["bias_scale"] = p.alibi_bias_scale;  // Falcon: 1/sqrt(head_dim) on q.k + bias together
    }
    if (p.scheme == PositionScheme::kT5Buckets) {
      e["heads"] = p.heads;
      e["num_buckets"] = p.buckets.num_buckets;
      e["max_distance"] = p.buckets.max_distance;
      e["bidirectional"] = p.buckets.bidirectional;
    }
    e["facts"] = p.facts;
    stacks.push_back(e);
  }
  return {{"rope", m.is_rope()}, {"summary", m.summary()}, {"stacks", stacks}, {"notes", m.notes}};
}

json spec_json(const ModelSpec& s) {
  json j;
  j["model_type"] = s.rope.model_type;
  j["positions"] = positions_json(s.positions);
  j["family_known"] = s.family != nullptr;
  j["hf_source"] = s.family ? json(s.family->hf_source) : json(nullptr);
  j["schedules"] = json::array();
  for (std::size_t i = 0; i < s.rope.layers.size(); ++i) {
    const LayerRope& l = s.rope.layers[i];
    json e = {{"layer_type", l.layer_type}, {"has_rope", l.has_rope}};
    if (l.has_rope) {
      const RopeSchedule& r = s.schedules[i];
      e["rope_type"] = to_string(r.type);
      e["rotary_dim"] = r.rotary_dim;
      e["attention_factor"] = r.attention_factor;  // on cos and sin (logits get its square)
      e["inv_freq"] = std::vector<double>(r.inv_freq.begin(), r.inv_freq.end());
      // Qwen-1: a prefill longer than this fixes a larger base (freqs --seq-len L shows it).
      if (l.ntk_prefill_length) e["ntk_prefill_length"] = *l.ntk_prefill_length;
    }
    j["schedules"].push_back(e);
  }
  j["mrope_section"] = s.mrope_section;
  j["mrope_style"] = s.mrope_style ? json(to_string(*s.mrope_style)) : json(nullptr);
  j["layers"] = json::array();
  for (const LayerSpec& l : s.layers) j["layers"].push_back(layer_json(l));
  // Layers alike but not counted (no num_hidden_layers): one entry that holds for each.
  j["every_layer"] = s.every_layer ? layer_json(*s.every_layer) : json(nullptr);
  j["warnings"] = s.warnings;
  j["notes"] = s.rope.notes;
  return j;
}

// One text line per run of consecutive layers with the same facts.
std::string describe(const ModelSpec& s, const LayerSpec& l) {
  std::string d = l.layer_type + ": ";
  if (l.rope) {
    const RopeSchedule& r = s.schedules[l.schedule];
    std::string channels;
    for (const auto& c : l.rotated_channels)
      channels += (channels.empty() ? "" : " and ") + ("[" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ")");
    d += "RoPE " + std::string(to_string(r.type)) + ", " + pairing_name(l.layout) +
         (output_order(l.layout) ? " (output in half-split order)" : "") + " pairs, channels " + channels + " of " +
         std::to_string(l.head_dim) + ", attention factor " + format_number(r.attention_factor);
  } else {
    d += "no positional encoding (NoPE)";
  }
  d += "; " + std::string(to_string(l.attention)) + " attention";
  if (l.window) d += " (" + std::to_string(*l.window) + ")";
  if (l.query_scale.rule != QueryScale::kNone) d += "; query scaling " + std::string(l.query_scale.name());
  d += "; softmax scale " + format_number(l.softmax_scale);
  if (l.softmax_scale_multiplier != 1) d += " (x" + format_number(l.softmax_scale_multiplier) + " mscale^2)";
  if (l.qk_norm != QkNormPlacement::kNone) d += "; q/k norm " + std::string(to_string(l.qk_norm));
  if (l.kv_shared_from) d += "; K/V (rotated keys) of layer " + std::to_string(*l.kv_shared_from);
  return d;
}

// A model without RoPE: each stack's scheme, its numbers and what HF does with it.
void print_positions_text(const ModelPositions& m) {
  std::printf("model_type %s\npositions: %s (no RoPE)\n", m.model_type.c_str(), m.summary().c_str());
  for (const PositionStack& p : m.stacks) {
    std::printf("%s%s: %s\n  follows %s\n", p.stack.c_str(),
                p.layers ? (" (" + std::to_string(*p.layers) + " layers)").c_str() : "", to_string(p.scheme),
                p.hf_source.c_str());
    if (p.scheme == PositionScheme::kAlibi) {
      std::printf("  slopes");
      for (double v : p.alibi_slopes) std::printf(" %s", format_number(v).c_str());
      std::printf("\n");
    }
    for (const auto& f : p.facts) std::printf("  %s\n", f.c_str());
  }
  for (const auto& n : m.notes) std::printf("note: %s\n", n.c_str());
}

void print_text(const ModelSpec& s) {
  if (!s.positions.is_rope()) return print_positions_text(s.positions);
  std::printf("model_type %s\n", s.rope.model_type.c_str());
  if (s.family) std::printf("follows %s\n", s.family->hf_source);
  if (!s.mrope_section.empty()) {
    std::printf("M-RoPE sections");
    for (int v : s.mrope_section) std::printf(" %d", v);
    std::printf(" (%s)\n", s.mrope_style ? to_string(*s.mrope_style) : "");
  }
  // Each distinct description once, in order of first appearance, with every layer that has it.
  std::vector<std::string> order;
  std::map<std::string, std::string> indices;
  for (const LayerSpec& l : s.layers) {
    const std::string d = describe(s, l);
    auto [it, fresh] = indices.emplace(d, std::to_string(l.index));
    if (fresh) order.push_back(d);
    else it->second += " " + std::to_string(l.index);
  }
  for (const auto& d : order) std::printf("layers %s\n  %s\n", indices[d].c_str(), d.c_str());
  if (s.every_layer) std::printf("every layer (their number is not in the config)\n  %s\n", describe(s, *s.every_layer).c_str());
  for (const auto& n : s.rope.notes) std::printf("note: %s\n", n.c_str());
}

void run_spec(const SpecArgs& a) {
  const ModelSpec s = load_model_spec(a.source.config, ConfigOptions{a.source.lenient, a.source.hf_compatible});
  for (const auto& w : s.warnings) std::cerr << "posenc: warning: " << w << "\n";
  if (a.json)
    std::cout << spec_json(s).dump(1) << "\n";
  else
    print_text(s);
}

}  // namespace

void add_spec_command(CLI::App& app) {
  auto args = std::make_shared<SpecArgs>();
  CLI::App* cmd = app.add_subcommand("spec", "per-layer positional semantics of a config.json (RoPE or NoPE, pairing, "
                                             "rotary channels, schedule, attention kind, query and softmax scaling; "
                                             "learned, sinusoidal, ALiBi or T5 positions for models without RoPE)");
  add_config_options(cmd, args->source, true, "");
  add_json_flag(cmd, args->json);  // its layers array has one entry per layer
  cmd->callback([args] { run_spec(*args); });
}

}  // namespace posenc::cli
