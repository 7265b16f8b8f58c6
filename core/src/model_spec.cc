#include "posenc/model_spec.h"

#include <algorithm>
#include <cmath>

#include "config_text.h"
#include "json_fields.h"
#include "posenc/error.h"

namespace posenc {
namespace {

using nlohmann::json;
namespace jf = json_fields;

constexpr std::int64_t kMaxLayers = 1 << 16;

double QueryScalingAt(const QueryScaling& q, std::int64_t p) {
  switch (q.rule) {
    case QueryScale::kNone: return 1.0;
    case QueryScale::kLlama4Temperature:
      return 1.0 + q.scale * std::log1p(std::floor((static_cast<double>(p) + 1.0) / q.floor_scale));
    case QueryScale::kLlama4ScalingBeta:
      return 1.0 + q.scale * std::log(1.0 + std::floor(static_cast<double>(p) / q.floor_scale));
  }
  return 1.0;
}

struct SpecBuilder {
  const json& model;  // text_config or the top level
  std::string where;  // "" or "text_config"
  const FamilyQuirks& row;
  ModelSpec& out;

  std::optional<std::int64_t> integer(const char* key) const { return jf::integer(model, key, where); }
  bool flag(const char* key, bool absent) const { return jf::boolean(model, key, where).value_or(absent); }
  std::string at(const std::string& key) const { return jf::path(where, key); }

  // Per-layer layer types: the config's layer_types, else the family's default pattern (HF's
  // config __init__). nullopt when the family needs layer_types and the config has none.
  std::optional<std::vector<std::string>> layer_types(std::int64_t layers) const {
    std::vector<std::string> types;
    if (model.contains("layer_types") && model["layer_types"].is_array()) {
      for (const json& t : model["layer_types"]) types.push_back(t.get<std::string>());  // checked by hf_config
      if (static_cast<std::int64_t>(types.size()) != layers)
        throw Error(at("layer_types") + " has " + std::to_string(types.size()) + " entries but " +
                    at(row.layer_count_key) + " is " + std::to_string(layers) + "; they must agree");
      return types;
    }
    const auto sliding = integer("sliding_window");
    for (std::int64_t i = 0; i < layers; ++i) {
      bool slides = false;
      switch (row.window) {
        case Window::kNone:
        case Window::kChunkedOnRopeLayers: break;
        case Window::kEveryLayer: slides = sliding.has_value(); break;
        case Window::kQwen2:
          slides = flag("use_sliding_window", false) && sliding && i >= integer("max_window_layers").value_or(0);
          break;
        case Window::kLayerTypes: {
          if (row.default_layers != DefaultLayers::kFullEvery) return default_layer_types(layers);
          if (row.full_every == 0) return std::nullopt;
          // Exaone4Config divides by sliding_window_pattern = 0 when sliding_window is null: no default.
          if (row.default_sliding_window && !sliding_window()) return std::nullopt;
          const auto n = integer("sliding_window_pattern").value_or(row.full_every);
          slides = n <= 0 || (i + 1) % n != 0;
          break;
        }
      }
      types.push_back(slides ? "sliding_attention" : "full_attention");
    }
    return types;
  }

  // The sliding window: the config's, else (key absent, not null) the family's HF default.
  std::optional<std::int64_t> sliding_window() const {
    if (!model.contains("sliding_window") && row.default_sliding_window) return row.default_sliding_window;
    return integer("sliding_window");
  }

  // Layer types of the hybrid families when layer_types is absent (their config's __post_init__).
  std::optional<std::vector<std::string>> default_layer_types(std::int64_t layers) const {
    std::vector<std::string> types(static_cast<std::size_t>(layers));
    switch (row.default_layers) {
      case DefaultLayers::kFullEvery: return std::nullopt;
      case DefaultLayers::kLinearButEveryNth: {  // Qwen3NextConfig: full_attention_interval, default 4
        const auto n = integer("full_attention_interval").value_or(4);
        if (n < 1) throw Error(at("full_attention_interval") + " must be >= 1, got " + std::to_string(n));
        for (std::int64_t i = 0; i < layers; ++i) types[i] = (i + 1) % n ? "linear_attention" : "full_attention";
        return types;
      }
      case DefaultLayers::kFullAttnIdxs: {  // Lfm2Config: full_attn_idxs, default every layer
        const auto idxs = jf::integer_list(model, "full_attn_idxs", where);
        for (std::int64_t i = 0; i < layers; ++i)
          types[i] = !idxs || std::find(idxs->begin(), idxs->end(), i) != idxs->end() ? "full_attention" : "conv";
        return types;
      }
      case DefaultLayers::kKimiLinear: {  // KimiLinearConfig: 1-based lists in linear_attn_config
        const json* cfg = jf::object(model, "linear_attn_config", where);
        const std::string sub = at("linear_attn_config");
        if (!cfg || !cfg->contains("full_attn_layers") || !cfg->contains("kda_layers")) return std::nullopt;
        for (const char* key : {"full_attn_layers", "kda_layers"}) {
          for (std::int64_t l : jf::integer_list(*cfg, key, sub).value_or(std::vector<std::int64_t>{})) {
            if (l < 1 || l > layers)
              throw Error(jf::path(sub, key) + " entry " + std::to_string(l) + " is not a layer in [1, " +
                          std::to_string(layers) + "]");
            types[l - 1] = std::string(key) == "kda_layers" ? "linear_attention" : "full_attention";
          }
        }
        for (std::int64_t i = 0; i < layers; ++i)
          if (types[i].empty())
            throw Error(sub + " names neither full_attn_layers nor kda_layers for layer " + std::to_string(i + 1) +
                        " (1-based); KimiLinearConfig needs every layer");
        return types;
      }
    }
    return std::nullopt;
  }

  std::vector<bool> rope_per_layer(const std::vector<std::string>& types) const {
    const std::int64_t n = static_cast<std::int64_t>(types.size());
    std::vector<bool> rope(types.size(), true);
    switch (row.rope_layers) {
      case RopeLayers::kAll: break;
      case RopeLayers::kNoRopeLayersList: {
        auto list = jf::integer_list(model, "no_rope_layers", where).value_or(std::vector<std::int64_t>{});
        if (!list.empty() && static_cast<std::int64_t>(list.size()) != n)
          throw Error(at("no_rope_layers") + " has " + std::to_string(list.size()) + " entries for " +
                      std::to_string(n) + " layers; they must agree");
        const auto interval = integer("no_rope_layer_interval").value_or(4);
        for (std::int64_t i = 0; i < n; ++i)  // 1 means "uses RoPE" despite the key's name
          rope[i] = list.empty() ? interval <= 0 || (i + 1) % interval != 0 : list[i] != 0;
        break;
      }
      case RopeLayers::kSlidingOnly:
        for (std::int64_t i = 0; i < n; ++i) rope[i] = types[i] == "sliding_attention";
        break;
      case RopeLayers::kSlidingOnlyIfHybrid:
        if (sliding_window())
          for (std::int64_t i = 0; i < n; ++i) rope[i] = types[i] == "sliding_attention";
        break;
      case RopeLayers::kNoneIfMlaUseNope:  // KimiLinearConfig: qk_rope_head_dim == 0 implies mla_use_nope
        if (flag("mla_use_nope", false) || integer("qk_rope_head_dim").value_or(64) == 0)
          std::fill(rope.begin(), rope.end(), false);
        break;
      case RopeLayers::kNotCrossAttention:
        for (std::int64_t c : jf::integer_list(model, "cross_attention_layers", where).value_or(std::vector<std::int64_t>{}))
          if (c >= 0 && c < n) rope[c] = false;
        break;
    }
    return rope;
  }

  int schedule_for(const std::string& type) const {
    const auto& layers = out.rope.layers;
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (layers[i].layer_type == type) return static_cast<int>(i);
    if (layers.size() == 1) return 0;  // one schedule for every layer type
    throw Error("no rope parameters for layer type '" + type + "'");
  }

  Pairing pairing() const {
    if (!row.rope_interleave_key) return row.pairing;
    return flag("rope_interleave", true) ? Pairing::kInterleavedReadHalfWrite : Pairing::kHalfSplit;
  }

  std::string qk_norm(bool rope) const {
    switch (row.qk_norm) {
      case QkNorm::kNone: return "";
      case QkNorm::kBeforeRope: return "before_rope";
      case QkNorm::kBeforeRopeIfFlag: return flag("use_qk_norm", false) ? "before_rope" : "";
      case QkNorm::kL2AfterRopeIfFlag: return rope && flag("use_qk_norm", false) ? "l2_after_rope" : "";
    }
    return "";
  }

  QueryScaling query_scale(bool rope, const RopeParams& p) const {
    QueryScaling q;
    if (row.query_scale == QueryScale::kLlama4Temperature && !rope && flag("attn_temperature_tuning", true)) {
      q.rule = row.query_scale;
      q.scale = jf::number(model, "attn_scale", where).value_or(0.1);
      q.floor_scale = jf::number(model, "floor_scale", where).value_or(8192);
      if (q.floor_scale <= 0) throw Error(at("floor_scale") + " must be > 0, got " + format_number(q.floor_scale));
    } else if (row.query_scale == QueryScale::kLlama4ScalingBeta && p.llama_4_scaling_beta.value_or(0) != 0) {
      q.rule = row.query_scale;
      q.scale = *p.llama_4_scaling_beta;
      q.floor_scale = static_cast<double>(resolved_original_max(p));
    }
    return q;
  }

  void run() {
    std::int64_t layers = 0;
    if (auto n = integer(row.layer_count_key)) {
      layers = *n;
    } else if (model.contains("layer_types") && model["layer_types"].is_array()) {
      layers = static_cast<std::int64_t>(model["layer_types"].size());
    } else {
      out.warnings.push_back(at(row.layer_count_key) + " is absent: the number of layers is unknown, so no "
                             "per-layer list");
      return;
    }
    if (layers < 1 || layers > kMaxLayers)
      throw Error(at(row.layer_count_key) + " must be in [1, " + std::to_string(kMaxLayers) + "], got " +
                  std::to_string(layers));
    const auto types = layer_types(layers);
    if (!types) {
      out.warnings.push_back(at("layer_types") + " is absent and posenc does not know this family's default "
                             "pattern: per-layer semantics are unknown");
      return;
    }
    const auto rope = rope_per_layer(*types);
    const auto sliding = sliding_window();
    const auto chunk = integer("attention_chunk_size");
    for (std::int64_t i = 0; i < layers; ++i) {
      LayerSpec l;
      l.index = static_cast<int>(i);
      l.layer_type = (*types)[i];
      const int s = schedule_for(l.layer_type);
      const LayerRope& lr = out.rope.layers[s];
      if (l.layer_type == "kda_attention") l.layer_type = "linear_attention";  // Kimi Linear's name for it
      l.rope = rope[i] && lr.has_rope && l.layer_type != "conv" && l.layer_type != "linear_attention";
      if (l.layer_type == "linear_attention") l.attention = "linear";
      else if (l.layer_type == "conv") l.attention = "none";
      else if (row.rope_layers == RopeLayers::kNotCrossAttention && !rope[i]) l.attention = "cross";
      else if (l.layer_type == "sliding_attention") l.attention = "sliding", l.window = sliding;
      else if (row.window == Window::kChunkedOnRopeLayers && l.rope && chunk) {
        l.attention = "chunked", l.window = chunk, l.layer_type = "chunked_attention";
      } else if (l.layer_type == "full_attention" || l.layer_type == "chunked_attention") l.attention = "full";
      else throw Error(at("layer_types") + " entry " + std::to_string(i) + " '" + l.layer_type +
                       "' is not a layer type posenc knows for this family");
      const RopeParams& p = lr.params;
      l.pairing = pairing();
      l.head_dim = p.head_dim;
      if (row.mla) {
        l.rotary_offset = static_cast<int>(integer("qk_nope_head_dim").value_or(0));
        l.head_dim = l.rotary_offset + p.head_dim;
      }
      if (l.rope) {
        l.schedule = s;
        l.rotary_dim = out.schedules[s].rotary_dim;
      }
      l.query_scale = query_scale(l.rope, p);
      double base = 1.0 / std::sqrt(static_cast<double>(l.head_dim));
      if (row.softmax_scale == SoftmaxScale::kQueryPreAttnScalar)
        if (auto q = jf::number(model, "query_pre_attn_scalar", where)) base = 1.0 / std::sqrt(*q);
      if (row.softmax_scale == SoftmaxScale::kDeepSeekMla && lr.has_rope)
        l.softmax_scale_multiplier = deepseek_softmax_scale_multiplier(p);
      l.softmax_scale = base * l.softmax_scale_multiplier;
      l.qk_norm = qk_norm(l.rope);
      out.layers.push_back(l);
    }
  }
};

}  // namespace

double QueryScaling::at(std::int64_t position) const { return QueryScalingAt(*this, position); }

const char* QueryScaling::name() const {
  switch (rule) {
    case QueryScale::kNone: return "none";
    case QueryScale::kLlama4Temperature: return "llama4_attn_temperature_tuning";
    case QueryScale::kLlama4ScalingBeta: return "llama_4_scaling_beta";
  }
  return "none";
}

ModelSpec parse_model_spec(const std::string& json_text, const ConfigOptions& options) {
  ModelSpec spec;
  spec.rope = parse_hf_config(json_text, options);  // validates the text and every rope dict
  spec.warnings = spec.rope.warnings;
  for (const LayerRope& l : spec.rope.layers) {
    spec.schedules.push_back(l.has_rope ? compute_schedule(l.params) : RopeSchedule{});
    if (l.has_rope && !l.params.mrope_section.empty() && spec.mrope_section.empty()) {
      spec.mrope_section = l.params.mrope_section;
      spec.mrope_style = l.params.mrope_interleaved ? "interleaved" : "contiguous";
    }
  }
  const json top = json::parse(json_text);
  const json* text = jf::object(top, "text_config", "");
  const json& model = text ? *text : top;
  std::string families = "|";
  if (auto mt = jf::string(top, "model_type", "")) families += *mt + "|";
  if (text)
    if (auto mt = jf::string(*text, "model_type", "text_config")) families += *mt + "|";
  spec.family = find_family_of(families);
  if (!spec.family) {
    spec.warnings.push_back("model_type '" + spec.rope.model_type +
                            "' is not in posenc's family table: per-layer semantics (which layers rotate, "
                            "pairing, attention kind, query and softmax scaling) are unknown; only the "
                            "schedule is given");
    return spec;
  }
  if (!spec.mrope_section.empty() && spec.family->mrope_style && !spec.rope.layers[0].params.mrope_interleaved)
    spec.mrope_style = spec.family->mrope_style;
  SpecBuilder{model, text ? "text_config" : "", *spec.family, spec}.run();
  return spec;
}

ModelSpec load_model_spec(const std::string& path, const ConfigOptions& options) {
  return config_text::parse_config_file(path, [&](const std::string& text) { return parse_model_spec(text, options); });
}

}  // namespace posenc
