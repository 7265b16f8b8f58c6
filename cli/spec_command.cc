#include "commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "options.h"
#include "posenc/error.h"
#include "posenc/engine_json.h"
#include "posenc/model_spec.h"

namespace posenc::cli {
namespace {

struct SpecArgs {
  ConfigArgs source;
  bool json = false;
};

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
  if (const auto& x = l.indexer) {
    d += "; DSA indexer: " + std::to_string(x->heads) + " heads of " + std::to_string(x->head_dim) + ", RoPE " +
         pairing_name(x->layout) + " pairs on channels";
    for (const auto& c : x->rotated_channels) d += " [" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ")";
    d += " (the layer's cos/sin), softmax scale " + format_number(x->softmax_scale);
  }
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

void print_vision_rope(const ModelSpec& s) {
  if (const auto& v = s.vision_rope) std::printf("vision tower: %s\n  follows %s\n", vision_rope_summary(*v).c_str(), v->hf_source);
}

void print_text(const ModelSpec& s) {
  if (!s.positions.is_rope()) {
    print_positions_text(s.positions);
    return print_vision_rope(s);
  }
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
  print_vision_rope(s);
  for (const auto& n : s.rope.notes) std::printf("note: %s\n", n.c_str());
}

void run_spec(const SpecArgs& a) {
  const ModelSpec s = load_model_spec(a.source.config, ConfigOptions{a.source.lenient, a.source.hf_compatible});
  for (const auto& w : s.warnings) std::cerr << "posenc: warning: " << w << "\n";
  if (a.json)
    std::cout << model_spec_json(s) << "\n";
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
