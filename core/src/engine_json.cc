// JSON of the engine kit's reports (see posenc/engine_json.h).
#include "posenc/engine_json.h"

#include <nlohmann/json.hpp>

#include "posenc/error.h"

namespace posenc {
namespace {

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
  if (const auto& x = l.indexer)  // DeepSeek-V3.2 only: absent for every other family
    j["indexer"] = {{"heads", x->heads},           {"head_dim", x->head_dim},
                    {"rotary_offset", x->rotary_offset}, {"rotary_dim", x->rotary_dim},
                    {"pairing", pairing_name(x->layout)}, {"rotated_channels", x->rotated_channels},
                    {"softmax_scale", x->softmax_scale}, {"schedule", l.schedule}};
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
      e["row_offset"] = p.row_offset;  // position p reads row p + row_offset (OPT, BART 2; RoBERTa pad + 1)
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

// The vision tower's 2-D RoPE: frequencies, the axis each reads, pairing and token order.
json vision_rope_json(const VisionRope& v) {
  const VisionRopeParams& p = v.params;
  json j = {{"family", to_string(p.family)},
            {"hf_source", v.hf_source},
            {"head_dim", p.head_dim},
            {"theta", p.theta},
            {"pairing", pairing_name(v.layout)},
            {"blocks", v.blocks},  // the head's channels split into this many RoPEs (Gemma 4: 2 halves)
            {"inv_freq", std::vector<double>(v.inv_freq.begin(), v.inv_freq.end())},
            {"axis_of_freq", std::vector<int>(v.axis_of_freq.begin(), v.axis_of_freq.end())},  // 0 row, 1 column
            {"angles", "float32(inv_freq[f] * float32(coordinate[axis_of_freq[f]]))"},
            {"coordinates_from", p.family == VisionRopeFamily::kLlama4 ? 1 : 0},
            {"class_token", p.family == VisionRopeFamily::kLlama4 ? json("last, unrotated (angle 0)") : json(nullptr)},
            {"token_order", vision_rope_token_order(v)},
            {"summary", vision_rope_summary(v)}};
  if (p.family == VisionRopeFamily::kQwen2Vl) j["spatial_merge_size"] = p.merge_size;
  else if (p.family != VisionRopeFamily::kGemma4) j["patches_per_side"] = p.patches_per_side;
  return j;
}

json spec_object(const ModelSpec& s) {
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
  j["vision_rope"] = s.vision_rope ? vision_rope_json(*s.vision_rope) : json(nullptr);
  j["warnings"] = s.warnings;
  j["notes"] = s.rope.notes;
  return j;
}

}  // namespace

std::string model_spec_json(const ModelSpec& spec) { return spec_object(spec).dump(1); }

std::string vision_rope_json_text(const VisionRope& rope) { return vision_rope_json(rope).dump(1); }

std::string gguf_report_json(const GgufReport& report) {
  if (!report.file || !report.rope) throw Error("gguf_report_json: the file and its schedule are required");
  const GgufFile& f = *report.file;
  const GgufRope& r = *report.rope;
  json keys = json::object();
  for (const auto& [key, value] : r.keys) keys[key] = value;  // as the text report shows them
  json j = {{"architecture", r.arch},
            {"gguf_version", f.version},
            {"metadata_keys", f.metadata.size()},
            {"tensors", f.tensors.size()},
            {"rope_keys", keys},
            {"freq_factors_tensor", r.freq_factors_tensor.empty() ? json(nullptr) : json(r.freq_factors_tensor)},
            {"n_rot", r.n_rot},
            {"freq_base", r.freq_base},
            {"scaling_type", r.scaling_type},
            {"factor", r.factor},
            {"n_ctx_orig", r.n_ctx_orig},
            {"ext_factor", r.ext_factor},
            {"beta_fast", r.beta_fast},
            {"beta_slow", r.beta_slow},
            {"attn_factor", r.attn_factor},
            {"yarn_log_multiplier", r.log_multiplier},
            {"attention_factor", r.attention_factor},
            {"inv_freq", r.inv_freq}};
  if (report.mismatches) {
    json m = json::array();
    for (const GgufMismatch& x : *report.mismatches) m.push_back({{"key", x.key}, {"message", x.message}});
    j["agrees_with_hf"] = report.mismatches->empty();
    j["mismatches"] = m;
  }
  return j.dump(1);
}

}  // namespace posenc
