#include "posenc/model_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "config_doc.h"
#include "config_text.h"
#include "deepseek_v4.h"
#include "json_fields.h"
#include "model_layers.h"
#include "posenc/error.h"

namespace posenc {
namespace {

using nlohmann::json;
namespace jf = json_fields;

double QueryScalingAt(const QueryScaling& q, std::int64_t p) {
  switch (q.rule) {
    case QueryScale::kNone: return 1.0;
    case QueryScale::kLlama4Temperature:
      return 1.0 + q.scale * std::log1p(std::floor((static_cast<double>(p) + 1.0) / q.floor_scale));
    case QueryScale::kLlama4ScalingBeta:
      return 1.0 + q.scale * std::log(1.0 + std::floor(static_cast<double>(p) / q.floor_scale));
    case QueryScale::kQwenLogN: {
      // logn_list[p] = math.log(p + 1, seq_length) when p + 1 > seq_length: log(x) / log(base).
      const double i = static_cast<double>(p) + 1.0;
      return i > q.floor_scale ? std::log(i) / std::log(q.floor_scale) : 1.0;
    }
  }
  return 1.0;
}

// The channels that rotate: frequency j < rotated / 2 of the rotary block [offset, offset + R)
// moves channels j and j + R/2 under rotate_half, 2j and 2j + 1 under the interleaved pairings
// (DeepSeek-V3 reads interleaved pairs); frequencies past rotated / 2 are zero and move nothing.
std::vector<std::array<int, 2>> rotated_channels(RopeLayout layout, int offset, int R, int rotated) {
  if (rotated <= 0 || rotated >= R || layout != RopeLayout::kHalfSplit) return {{offset, offset + (rotated > 0 ? rotated : R)}};
  return {{offset, offset + rotated / 2}, {offset + R / 2, offset + R / 2 + rotated / 2}};
}

// Engines multiply q.k by the softmax scale in float32 (HF: `attn_weights * self.scaling` in the
// model dtype; golden.cc casts dot * scale to float): a scale outside float32's normal range
// [2^-126, FLT_MAX] is 0, subnormal or inf there, and every logit with it (issue 33, spec-023:
// query_pre_attn_scalar 1e-320 gave a scale of 1e160 and logits of +-inf).
void check_softmax_scale(double scale, const std::string& from) {
  if (scale >= std::numeric_limits<float>::min() && scale <= std::numeric_limits<float>::max()) return;
  throw Error((from.empty() ? std::string("the config") : from) + " gives a softmax scale of " + format_number(scale) +
              "; expected one in float32's normal range [1.1754944e-38, 3.4028235e+38], where engines apply it");
}

struct SpecBuilder {
  const ConfigDoc& doc;
  const json& model;  // text_config or the top level
  const std::string& where;  // "" or "text_config"
  const FamilyQuirks& row;
  ModelSpec& out;

  std::optional<std::int64_t> integer(const char* key) const { return jf::integer(model, key, where); }
  bool flag(const char* key, bool absent) const { return jf::boolean(model, key, where).value_or(absent); }
  // Llama 4's attn_temperature_tuning: meta-llama/Llama-4-Scout-17B-16E ships the number 4, and
  // Llama4TextAttention tests it for truth (`if self.attn_temperature_tuning and not self.use_rope`),
  // so a finite number counts as on unless 0, with a warning that says so.
  bool truthy_flag(const char* key, bool absent) const {
    const auto it = model.find(key);
    if (it == model.end() || !it->is_number()) return flag(key, absent);
    const double v = jf::number_in(model, key, where, -1e308, 1e308).value_or(0);
    const std::string w = at(key) + " is the number " + format_number(v) + ", not true or false; HF tests it for truth, so it is " +
                          (v != 0 ? "on" : "off");
    if (std::find(out.warnings.begin(), out.warnings.end(), w) == out.warnings.end()) out.warnings.push_back(w);
    return v != 0;
  }
  std::string at(const std::string& key) const { return doc.at(key); }

  // Per-layer layer types: the config's layer_types, else the family's default pattern (HF's
  // config __init__). nullopt when the family needs layer_types and the config has none.
  std::optional<std::vector<std::string>> layer_types(std::int64_t layers) const {
    if (auto types = model_layers::config_layer_types(doc)) {
      if (static_cast<std::int64_t>(types->size()) != layers)
        throw Error(at(row.layer_types_key) + " has " + std::to_string(types->size()) + " entries but " +
                    at(row.layer_count_key) + " is " + std::to_string(layers) + "; they must agree");
      return types;
    }
    return model_layers::default_layer_types(doc, layers);
  }

  int schedule_for(const std::string& type) const {
    const auto& layers = out.rope.layers;
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (layers[i].layer_type == type) return static_cast<int>(i);
    if (layers.size() == 1) return 0;  // one schedule for every layer type
    throw Error("no rope parameters for layer type '" + type + "'");
  }

  RopeLayout layout() const {
    if (!row.rope_interleave_key) return row.layout;
    return flag("rope_interleave", true) ? RopeLayout::kDeepSeekV3 : RopeLayout::kHalfSplit;
  }

  QkNormPlacement qk_norm(bool rope) const {
    switch (row.qk_norm) {
      case QkNorm::kNone: return QkNormPlacement::kNone;
      case QkNorm::kBeforeRope: return QkNormPlacement::kBeforeRope;
      case QkNorm::kBeforeRopeIfFlag: return flag("use_qk_norm", false) ? QkNormPlacement::kBeforeRope : QkNormPlacement::kNone;
      case QkNorm::kAfterRopeIfFlag: return flag("use_qk_norm", false) ? QkNormPlacement::kAfterRope : QkNormPlacement::kNone;
      case QkNorm::kL2AfterRopeIfFlag:
        return rope && flag("use_qk_norm", false) ? QkNormPlacement::kL2AfterRope : QkNormPlacement::kNone;
    }
    return QkNormPlacement::kNone;
  }

  QueryScaling query_scale(bool rope, const RopeParams& p) const {
    QueryScaling q;
    if (row.query_scale == QueryScale::kLlama4Temperature && !rope && truthy_flag("attn_temperature_tuning", true)) {
      q.rule = row.query_scale;
      q.scale = jf::number_in(model, "attn_scale", where, 0, std::numeric_limits<double>::max()).value_or(0.1);
      q.floor_scale = jf::positive_number(model, "floor_scale", where).value_or(8192);
      // Each finite alone, the product can still overflow (attn_scale 1e308, floor_scale 1e-300):
      // the scale at the last position a kernel accepts must be finite too.
      if (!std::isfinite(q.at(kMaxPosition)))
        throw Error(at("attn_scale") + " " + format_number(q.scale) + " with " + at("floor_scale") + " " +
                    format_number(q.floor_scale) + " makes the query scale at position 2^31-1 infinite; expected "
                    "a finite scale (Llama 4: attn_scale 0.1, floor_scale 8192)");
    } else if (row.query_scale == QueryScale::kLlama4ScalingBeta && p.llama_4_scaling_beta.value_or(0) != 0) {
      q.rule = row.query_scale;
      q.scale = *p.llama_4_scaling_beta;
      q.floor_scale = static_cast<double>(resolved_original_max(p));
    } else if (row.query_scale == QueryScale::kQwenLogN && flag("use_logn_attn", false)) {
      // QWenAttention: logn_tensor over config.seq_length (hf_config reads it into max_position_embeddings).
      if (!p.max_position_embeddings || *p.max_position_embeddings < 2)
        throw Error(at("use_logn_attn") + " is true but " + at("seq_length") + " is absent or < 2");
      q.rule = row.query_scale;
      q.floor_scale = static_cast<double>(*p.max_position_embeddings);
    }
    return q;
  }

  // Layer i's facts; rope_at: the index rules (no_rope_layers, cross-attention) for layer i.
  LayerSpec layer_at(std::int64_t i, const std::string& type, bool rope_at) const {
    LayerSpec l;
    l.index = static_cast<int>(i);
    l.layer_type = type;
    const int s = schedule_for(l.layer_type);
    const LayerRope& lr = out.rope.layers[s];
    if (l.layer_type == "kda_attention") l.layer_type = "linear_attention";  // Kimi Linear's name for it
    l.rope = rope_at && lr.has_rope && model_layers::type_rotates(doc, l.layer_type);
    // A window or chunk is a token count: read (and range-checked) only by the families that use it.
    const auto chunk = row.window == Window::kChunkedOnRopeLayers
                           ? jf::integer_in(model, "attention_chunk_size", where, 1, kMaxPosition)
                           : std::nullopt;
    if (l.layer_type == "linear_attention") l.attention = AttentionKind::kLinear;
    else if (!model_layers::is_attention(l.layer_type)) l.attention = AttentionKind::kNone;
    else if (row.rope_layers == RopeLayers::kNotCrossAttention && !rope_at) l.attention = AttentionKind::kCross;
    else if (l.layer_type == "sliding_attention" || (row.deepseek_v4 && deepseek_v4::is_compressed(l.layer_type)))
      l.attention = AttentionKind::kSliding, l.window = model_layers::sliding_window(doc);
    else if (row.window == Window::kChunkedOnRopeLayers && l.rope && chunk) {
      l.attention = AttentionKind::kChunked, l.window = chunk, l.layer_type = "chunked_attention";
    } else if (l.layer_type == "full_attention" || l.layer_type == "chunked_attention" || l.layer_type == "attention" ||
               l.layer_type == "hybrid") {
      // "attention": the hybrids' name (Jamba, Bamba, Granite 4, Nemotron-H); "hybrid": Zamba2's
      // shared attention block (full causal attention) before that layer's Mamba2.
      l.attention = AttentionKind::kFull;
    } else {
      throw Error(at(row.layer_types_key) + " entry " + std::to_string(i) + " '" + l.layer_type +
                  "' is not a layer type posenc knows for this family");
    }
    const RopeParams& p = lr.params;
    l.layout = layout();
    l.head_dim = p.head_dim;
    if (row.mla) {
      // Channels like every other count (hf_config.cc's channels()): golden writes at rotary_offset.
      l.rotary_offset = static_cast<int>(jf::integer_in(model, "qk_nope_head_dim", where, 0, kMaxHeadDim - p.head_dim).value_or(0));
      l.head_dim = l.rotary_offset + p.head_dim;
    }
    if (l.rope) {
      l.schedule = s;
      l.rotary_dim = out.schedules[s].rotary_dim;
      if (row.deepseek_v4) l.rotary_offset = l.head_dim - l.rotary_dim;  // x[..., -rope_dim:]: the trailing channels
      l.rotated_channels = rotated_channels(l.layout, l.rotary_offset, l.rotary_dim, out.schedules[s].rotated_dim);
    }
    l.query_scale = query_scale(l.rope, p);
    double base = 1.0 / std::sqrt(static_cast<double>(l.head_dim));
    std::string from;  // the config key the scale comes from, for the range check below
    const auto read = [&](const char* key) {
      const auto v = jf::positive_number(model, key, where);
      if (v) from = at(key) + " " + format_number(*v);
      return v;
    };
    if (row.softmax_scale == SoftmaxScale::kQueryPreAttnScalar)
      if (auto q = read("query_pre_attn_scalar")) base = 1.0 / std::sqrt(*q);
    // GraniteConfig: attention_multiplier defaults to 1.0.
    if (row.softmax_scale == SoftmaxScale::kAttentionMultiplier) base = read("attention_multiplier").value_or(1.0);
    if (row.softmax_scale == SoftmaxScale::kOne) base = 1.0;
    // FalconH1Config: key_multiplier defaults to 1.0; it multiplies k, hence every q.k.
    if (row.softmax_scale == SoftmaxScale::kHalfHeadDim) base = 1.0 / std::sqrt(l.head_dim / 2.0);
    if (row.softmax_scale == SoftmaxScale::kKeyMultiplier) base *= read("key_multiplier").value_or(1.0);
    if (row.softmax_scale == SoftmaxScale::kDeepSeekMla && lr.has_rope)
      l.softmax_scale_multiplier = deepseek_softmax_scale_multiplier(p);
    l.softmax_scale = base * l.softmax_scale_multiplier;
    check_softmax_scale(l.softmax_scale, from);
    l.qk_norm = qk_norm(l.rope);
    if (row.dsa_indexer && l.rope) l.indexer = indexer(l, out.schedules[s]);
    if (row.deepseek_v4 && l.rope && l.layer_type == "compressed_sparse_attention")
      l.indexer = deepseek_v4::indexer(doc, l.rotary_dim);  // DeepseekV4CSACompressor.indexer
    return l;
  }

  // DeepseekV32Config: index_n_heads 64, index_head_dim 128 by default; the indexer rotates its
  // first qk_rope_head_dim channels (the layer's rotary_dim) half-split with the layer's cos/sin.
  IndexerSpec indexer(const LayerSpec& l, const RopeSchedule& schedule) const {
    IndexerSpec x;
    x.heads = static_cast<int>(jf::integer_in(model, "index_n_heads", where, 1, kMaxHeadDim).value_or(64));
    x.rotary_dim = l.rotary_dim;
    x.head_dim = static_cast<int>(jf::integer_in(model, "index_head_dim", where, x.rotary_dim, kMaxHeadDim).value_or(128));
    if (x.head_dim < x.rotary_dim)  // the default 128 against a larger qk_rope_head_dim
      throw Error(at("index_head_dim") + " " + std::to_string(x.head_dim) + " must be >= " + at("qk_rope_head_dim") +
                  " " + std::to_string(x.rotary_dim) + ": the indexer rotates that many of its channels");
    x.softmax_scale = 1.0 / std::sqrt(static_cast<double>(x.head_dim));
    x.rotated_channels = rotated_channels(x.layout, x.rotary_offset, x.rotary_dim, schedule.rotated_dim);
    return x;
  }

  // Without a layer count, a model whose layers are provably alike still has facts for every
  // layer (issue 26: `posenc golden` on a config without num_hidden_layers): one rope for all,
  // no layer_types, and no rule that picks layers by index or by a pattern.
  bool layers_alike() const {
    if (out.rope.layers.size() != 1 || !out.rope.layers[0].layer_type.empty()) return false;
    if (model_layers::config_layer_types(doc)) return false;
    if (row.rope_layers == RopeLayers::kNoRopeLayersList || row.rope_layers == RopeLayers::kNotCrossAttention)
      return false;
    switch (row.window) {
      case Window::kNone:
      case Window::kEveryLayer: return true;
      case Window::kQwen2: return !(flag("use_sliding_window", false) && model_layers::sliding_window(doc));
      case Window::kLayerTypes:
      case Window::kChunkedOnRopeLayers: return false;
    }
    return false;
  }

  void run() {
    const auto count = model_layers::layer_count(doc);
    if (!count) {
      if (layers_alike()) {
        const auto types = model_layers::default_layer_types(doc, 1);
        out.every_layer = layer_at(0, types ? (*types)[0] : "full_attention", true);
        return;
      }
      out.warnings.push_back(at(row.layer_count_key) + " is absent: the number of layers is unknown, so no "
                             "per-layer list");
      return;
    }
    const std::int64_t layers = *count;
    if (layers < 1 || layers > model_layers::kMaxLayers)
      throw Error(at(row.layer_count_key) + " must be in [1, " + std::to_string(model_layers::kMaxLayers) + "], got " +
                  std::to_string(layers));
    const auto types = layer_types(layers);
    if (!types) {
      out.warnings.push_back(at("layer_types") + " is absent and posenc does not know this family's default "
                             "pattern: per-layer semantics are unknown");
      return;
    }
    const auto rope = model_layers::index_rotates(doc, layers);
    for (std::int64_t i = 0; i < layers; ++i) out.layers.push_back(layer_at(i, (*types)[i], rope[i]));
    if (row.kv_sharing) share_kv(*types);
  }

  // Gemma3nTextAttention / Gemma4TextAttention: layers from first = L - num_kv_shared_layers on
  // take the K/V of the last layer of their type before first (kv_shared_layer_index: HF's
  // prev_layers[::-1].index, a ValueError when no earlier layer has the type).
  void share_kv(const std::vector<std::string>& types) {
    const std::int64_t layers = static_cast<std::int64_t>(types.size());
    const auto shared = integer("num_kv_shared_layers").value_or(0);
    if (shared < 0 || shared >= layers)
      throw Error(at("num_kv_shared_layers") + " must be in [0, " + std::to_string(layers - 1) + "] (layers " +
                  std::to_string(layers) + "), got " + std::to_string(shared));
    const std::int64_t first = layers - shared;
    for (std::int64_t i = first; i < layers; ++i) {
      std::int64_t from = first - 1;
      while (from >= 0 && types[from] != types[i]) --from;
      if (from < 0)
        throw Error(at("num_kv_shared_layers") + " = " + std::to_string(shared) + ": layer " + std::to_string(i) +
                    " ('" + types[i] + "') shares K/V, but no layer before " + std::to_string(first) +
                    " has its type (HF raises ValueError)");
      out.layers[i].kv_shared_from = static_cast<int>(from);
    }
  }
};

// The families whose get_rope_index golden follows, and what it reads besides the grids:
// Qwen2-VL (modeling_qwen2_vl.py get_rope_index: T step 1), Qwen2.5-VL (modeling_qwen2_5_vl.py:
// T step vision_config.tokens_per_second x int(second_per_grid_t), 1 s per grid when the
// processor gives none), Qwen3-VL and Qwen3.5 (modeling_qwen3_vl.py get_rope_index: videos
// repeat_interleave'd into one t = 1 grid per frame, the timestamps being text between them).
std::optional<MropeVision> read_mrope_vision(const ConfigDoc& doc) {
  const std::string& f = doc.families();
  MropeVision v;
  for (const char* name :
       {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "hunyuan_vl", "qwen2_5_omni"})
    if (f.find(std::string("|") + name + "|") != std::string::npos && v.family.empty()) v.family = name;
  if (v.family.empty()) return std::nullopt;
  v.frames_split = v.family.rfind("qwen3", 0) == 0;
  const json* vc = doc.vision_config();
  if (vc)
    if (const auto m = json_fields::integer_in(*vc, "spatial_merge_size", "vision_config", 1, 64)) v.merge_size = static_cast<int>(*m);
  if (v.family == "qwen2_5_vl") {
    v.time_interval = 4;  // Qwen2_5_VLVisionConfig's default tokens_per_second
    if (vc)
      if (const auto t = json_fields::number_in(*vc, "tokens_per_second", "vision_config", 0, 1e6)) v.time_interval = *t;
  }
  if (v.family == "qwen2_5_omni") {
    // modeling_qwen2_5_omni.py get_rope_index: each piece at the last piece's max + 1; image and video
    // T ids at position_id_per_seconds (Qwen2_5OmniThinkerConfig: 25) per second. Audio is not in
    // golden's sequence.
    v.rule = MropeIndexRule::kV4_49;
    v.time_interval = v.image_time_interval = 25;
    if (const json* thinker = json_fields::object(doc.top(), "thinker_config", ""))
      if (const auto t = json_fields::number_in(*thinker, "position_id_per_seconds", "thinker_config", 0, 1e6))
        v.time_interval = v.image_time_interval = *t;
  }
  return v;
}

}  // namespace

double QueryScaling::at(std::int64_t position) const { return QueryScalingAt(*this, position); }

const char* QueryScaling::name() const {
  switch (rule) {
    case QueryScale::kNone: return "none";
    case QueryScale::kLlama4Temperature: return "llama4_attn_temperature_tuning";
    case QueryScale::kLlama4ScalingBeta: return "llama_4_scaling_beta";
    case QueryScale::kQwenLogN: return "qwen_logn_attn";
  }
  return "none";
}

ModelSpec parse_model_spec(const std::string& json_text, const ConfigOptions& options) {
  const ConfigDoc doc(json_text);
  ModelSpec spec;
  spec.positions = read_model_positions(doc);
  std::vector<std::string> tower_warnings;
  spec.vision_rope = read_vision_rope(doc, tower_warnings);
  if (!spec.positions.is_rope()) {
    spec.warnings = tower_warnings;
    spec.rope.model_type = spec.positions.model_type;
    return spec;
  }
  spec.rope = read_model_rope(doc, options);  // validates every rope dict
  spec.warnings = spec.rope.warnings;
  spec.warnings.insert(spec.warnings.end(), tower_warnings.begin(), tower_warnings.end());
  for (const LayerRope& l : spec.rope.layers) {
    spec.schedules.push_back(l.has_rope ? compute_schedule(l.params) : RopeSchedule{});
    if (l.has_rope && !l.params.mrope_section.empty() && spec.mrope_section.empty()) {
      spec.mrope_section = l.params.mrope_section;
      spec.mrope_style = l.params.mrope_xdrope        ? MropeStyle::kXdrope
                         : l.params.mrope_interleaved ? MropeStyle::kInterleaved
                                                      : MropeStyle::kContiguous;
    }
  }
  spec.family = doc.family();
  if (!spec.family) {
    spec.warnings.push_back("model_type '" + spec.rope.model_type +
                            "' is not in posenc's family table: per-layer semantics (which layers rotate, "
                            "pairing, attention kind, query and softmax scaling) are unknown; only the "
                            "schedule is given");
    return spec;
  }
  // DeepseekV32Config drops DeepseekV3Config's rope_interleave (modular_deepseek_v32.py: an
  // AttributeError), so the key is not read: say so rather than honour or drop it silently.
  if (spec.family->mla && !spec.family->rope_interleave_key && doc.model().contains("rope_interleave"))
    spec.warnings.push_back(doc.at("rope_interleave") + " is not read by model_type '" + spec.rope.model_type +
                            "' (HF: its layout is fixed, " + pairing_name(spec.family->layout) + " pairs); ignored");
  if (!spec.mrope_section.empty() && spec.family->mrope_style && !spec.rope.layers[0].params.mrope_interleaved)
    spec.mrope_style = spec.family->mrope_style;
  if (!spec.mrope_section.empty()) spec.mrope_vision = read_mrope_vision(doc);
  if (spec.mrope_section.empty() && !spec.family->default_mrope_section.empty()) {  // Qwen3-Omni's code default
    spec.mrope_section = spec.family->default_mrope_section;
    spec.mrope_style = spec.family->mrope_style;
    spec.rope.notes.push_back("no mrope_section: the family's code uses " + std::string(spec.family->hf_source));
  } else if (spec.mrope_section.empty() && spec.family->mrope_style)  // Qwen2.5-Omni v5: rope_parameters["mrope_section"]
    spec.warnings.push_back("no mrope_section in " + doc.at("rope_parameters") + ": HF v5's M-RoPE for model_type '" +
                            spec.rope.model_type + "' reads it in the forward and raises KeyError; posenc describes "
                            "text positions only (every axis equal)");
  SpecBuilder{doc, doc.model(), doc.where(), *spec.family, spec}.run();
  return spec;
}

ModelSpec load_model_spec(const std::string& path, const ConfigOptions& options) {
  return config_text::parse_config_file(path, [&](const std::string& text) { return parse_model_spec(text, options); });
}

}  // namespace posenc
