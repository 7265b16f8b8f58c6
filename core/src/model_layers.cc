#include "model_layers.h"

#include <algorithm>

#include "deepseek_v4.h"
#include "json_fields.h"
#include "posenc/error.h"

namespace posenc::model_layers {
namespace {

using nlohmann::json;
namespace jf = json_fields;

std::optional<std::int64_t> integer(const ConfigDoc& doc, const char* key) {
  return jf::integer(doc.model(), key, doc.where());
}
// sliding_window as the config gives it, range-checked: a window is a token count >= 1 (a
// negative one was printed as "sliding attention (-4096)").
std::optional<std::int64_t> given_window(const ConfigDoc& doc) {
  return jf::integer_in(doc.model(), "sliding_window", doc.where(), 1, kMaxPosition);
}
// Layer indices of a list key, each in [0, layers).
std::optional<std::vector<std::int64_t>> layer_indices(const ConfigDoc& doc, const char* key, std::int64_t layers) {
  return jf::integer_list_in(doc.model(), key, doc.where(), 0, layers - 1);
}
bool flag(const ConfigDoc& doc, const char* key, bool absent) {
  return jf::boolean(doc.model(), key, doc.where()).value_or(absent);
}

std::vector<std::string> distinct(const std::vector<std::string>& types) {
  std::vector<std::string> out;
  for (const auto& t : types)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

// The hybrid families' default layer types (their config's __post_init__).
std::optional<std::vector<std::string>> hybrid_layer_types(const ConfigDoc& doc, std::int64_t layers) {
  std::vector<std::string> types(static_cast<std::size_t>(layers));
  switch (doc.quirks().default_layers) {
    case DefaultLayers::kFullEvery: return std::nullopt;
    case DefaultLayers::kLinearButEveryNth: {  // Qwen3NextConfig: full_attention_interval, default 4
      const auto n = integer(doc, "full_attention_interval").value_or(4);
      if (n < 1) throw Error(doc.at("full_attention_interval") + " must be >= 1, got " + std::to_string(n));
      for (std::int64_t i = 0; i < layers; ++i) types[i] = (i + 1) % n ? "linear_attention" : "full_attention";
      return types;
    }
    case DefaultLayers::kFullAttnIdxs: {  // Lfm2Config: full_attn_idxs, default every layer
      const auto idxs = layer_indices(doc, "full_attn_idxs", layers);
      for (std::int64_t i = 0; i < layers; ++i)
        types[i] = !idxs || std::find(idxs->begin(), idxs->end(), i) != idxs->end() ? "full_attention" : "conv";
      return types;
    }
    case DefaultLayers::kKimiLinear: {  // KimiLinearConfig: 1-based lists in linear_attn_config
      const json* cfg = jf::object(doc.model(), "linear_attn_config", doc.where());
      const std::string sub = doc.at("linear_attn_config");
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
    case DefaultLayers::kJamba: {  // JambaConfig.layers_block_type
      const auto period = integer(doc, "attn_layer_period").value_or(8);
      const auto offset = integer(doc, "attn_layer_offset").value_or(4);
      if (period < 1) throw Error(doc.at("attn_layer_period") + " must be >= 1, got " + std::to_string(period));
      for (std::int64_t i = 0; i < layers; ++i) types[i] = i % period == offset ? "attention" : "mamba";
      return types;
    }
    case DefaultLayers::kNemotronH: {  // NemotronHConfig.layers_block_type
      const auto pattern = jf::string(doc.model(), "hybrid_override_pattern", doc.where());
      if (!pattern) return std::nullopt;
      if (static_cast<std::int64_t>(pattern->size()) != layers)
        throw Error(doc.at("hybrid_override_pattern") + " has " + std::to_string(pattern->size()) +
                    " characters for " + std::to_string(layers) + " layers; they must agree");
      for (std::int64_t i = 0; i < layers; ++i) {
        const char c = (*pattern)[static_cast<std::size_t>(i)];
        types[i] = c == 'M' ? "mamba" : c == '*' ? "attention" : c == '-' ? "mlp" : c == 'E' ? "moe" : "";
        if (types[i].empty())
          throw Error(doc.at("hybrid_override_pattern") + " character " + std::to_string(i) + " '" + c +
                      "' is not one of M (mamba), * (attention), - (mlp), E (moe)");
      }
      return types;
    }
    case DefaultLayers::kBamba: {  // BambaConfig.layers_block_type
      const auto idxs = layer_indices(doc, "attn_layer_indices", layers);
      for (std::int64_t i = 0; i < layers; ++i)
        types[i] = idxs && std::find(idxs->begin(), idxs->end(), i) != idxs->end() ? "attention" : "mamba";
      return types;
    }
    case DefaultLayers::kDeepSeekV4: return deepseek_v4::default_layer_types(doc, layers);
    case DefaultLayers::kZamba2: {  // Zamba2Config.__post_init__: a fixed list of 54 entries
      // HF writes the Mamba2 layers "linear_attention" (its legacy "mamba", the name the published
      // configs use and posenc keeps for the hybrids' state-space layers).
      std::vector<std::string> hf = {"mamba"};
      for (int k = 0; k < 7; ++k) {
        hf.insert(hf.end(), 5, "mamba");
        hf.push_back("hybrid");
      }
      for (int tail : {4, 3, 2}) {
        hf.insert(hf.end(), tail, "mamba");
        if (tail != 2) hf.push_back("hybrid");
      }
      if (static_cast<std::int64_t>(hf.size()) != layers)
        throw Error(doc.at(doc.quirks().layer_count_key) + " is " + std::to_string(layers) + " without " +
                    doc.at(doc.quirks().layer_types_key) + ": Zamba2Config's default list has " +
                    std::to_string(hf.size()) + " entries; expected layers_block_type for another count");
      return hf;
    }
  }
  return std::nullopt;
}

}  // namespace

bool is_attention(const std::string& type) { return !(type == "mamba" || type == "mlp" || type == "moe" || type == "conv"); }

std::optional<std::vector<std::string>> config_layer_types(const ConfigDoc& doc) {
  const json& model = doc.model();
  const char* key = doc.quirks().layer_types_key;  // Zamba2: layers_block_type
  if (!model.contains(key) || model[key].is_null()) return std::nullopt;
  const json& lt = model[key];
  if (!lt.is_array()) throw Error(doc.at(key) + " must be an array of strings, got " + jf::describe(lt));
  std::vector<std::string> types;
  for (const json& t : lt) {
    if (!t.is_string()) throw Error(doc.at(key) + " entries must be strings, got " + jf::describe(t));
    types.push_back(t.get<std::string>());
  }
  // Gemma4TextConfig.__post_init__ forces the last layer to full_attention (with a warning).
  if (doc.quirks().last_layer_full && !types.empty()) types.back() = "full_attention";
  return types;
}

std::optional<std::int64_t> layer_count(const ConfigDoc& doc) {
  if (auto n = integer(doc, doc.quirks().layer_count_key)) return n;
  const json& model = doc.model();
  const char* key = doc.quirks().layer_types_key;
  if (model.contains(key) && model[key].is_array()) return static_cast<std::int64_t>(model[key].size());
  return std::nullopt;
}

std::optional<std::int64_t> sliding_window(const ConfigDoc& doc) {
  const FamilyQuirks& row = doc.quirks();
  if (!doc.model().contains("sliding_window") && row.default_sliding_window) return row.default_sliding_window;
  return given_window(doc);
}

std::optional<std::vector<std::string>> default_layer_types(const ConfigDoc& doc, std::int64_t layers) {
  const FamilyQuirks& row = doc.quirks();
  if (row.window == Window::kLayerTypes && row.default_layers != DefaultLayers::kFullEvery)
    return hybrid_layer_types(doc, layers);
  std::vector<std::string> types;
  for (std::int64_t i = 0; i < layers; ++i) {
    bool slides = false;
    switch (row.window) {
      case Window::kNone:
      case Window::kChunkedOnRopeLayers: break;
      case Window::kEveryLayer: slides = given_window(doc).has_value(); break;
      case Window::kQwen2:  // Qwen2Config ignores sliding_window unless use_sliding_window
        slides = flag(doc, "use_sliding_window", false) && given_window(doc) &&
                 i >= integer(doc, "max_window_layers").value_or(0);
        break;
      case Window::kLayerTypes: {
        // HF Gemma2Config / Gemma3TextConfig / ...: every n-th layer is global, the rest slide.
        if (row.full_every == 0) return std::nullopt;
        // Exaone4Config divides by sliding_window_pattern = 0 when sliding_window is null: no default.
        if (row.default_sliding_window && !sliding_window(doc)) return std::nullopt;
        const auto n = integer(doc, "sliding_window_pattern").value_or(row.full_every);
        slides = n <= 0 || (i + 1) % n != 0;
        break;
      }
    }
    types.push_back(slides ? "sliding_attention" : "full_attention");
  }
  if (row.last_layer_full && !types.empty()) types.back() = "full_attention";  // Gemma4TextConfig
  return types;
}

bool type_rotates(const ConfigDoc& doc, const std::string& type) {
  if (type == "linear_attention" || type == "kda_attention" || !is_attention(type)) return false;
  switch (doc.quirks().rope_layers) {
    case RopeLayers::kSlidingOnly: return type != "full_attention";
    // HF Exaone4Attention: "We use global NoPE for hybrid attention model"; hybrid unless
    // sliding_window is null (Exaone4Config's default is 4096, so a config without the key is hybrid).
    case RopeLayers::kSlidingOnlyIfHybrid: return !(type == "full_attention" && sliding_window(doc));
    // KimiLinearConfig: qk_rope_head_dim == 0 implies mla_use_nope.
    case RopeLayers::kNoneIfMlaUseNope:
      return !(flag(doc, "mla_use_nope", false) || integer(doc, "qk_rope_head_dim").value_or(64) == 0);
    case RopeLayers::kNone: return false;
    // GraniteMoeHybridModel: rotary_emb only when position_embedding_type == "rope" (the
    // shipped "nope" and null mean none).
    case RopeLayers::kIfPositionEmbeddingRope:
      return jf::string(doc.model(), "position_embedding_type", doc.where()).value_or("") == "rope";
    // Zamba2Attention.forward: apply_rotary_pos_emb only if config.use_mem_rope (default False).
    case RopeLayers::kIfUseMemRope: return flag(doc, "use_mem_rope", false);
    case RopeLayers::kAll:
    case RopeLayers::kNoRopeLayersList:
    case RopeLayers::kNotCrossAttention: return true;
  }
  return true;
}

bool some_layer_rotates(const ConfigDoc& doc) {
  std::optional<std::vector<std::string>> types = config_layer_types(doc);
  std::optional<std::int64_t> layers = types ? std::optional<std::int64_t>(static_cast<std::int64_t>(types->size())) : layer_count(doc);
  const auto listed = no_rope_layers(doc);  // Llama 4, SmolLM3: the list's length is the layer count
  if (doc.quirks().rope_layers == RopeLayers::kNoRopeLayersList && !listed.empty()) layers = static_cast<std::int64_t>(listed.size());
  if (!layers || *layers < 1 || *layers > kMaxLayers) return true;
  if (!types) types = default_layer_types(doc, *layers);
  const std::vector<bool> by_index = index_rotates(doc, *layers);
  for (std::int64_t i = 0; i < *layers; ++i) {
    const std::string type = types && i < static_cast<std::int64_t>(types->size()) ? (*types)[static_cast<std::size_t>(i)] : "";
    if (by_index[static_cast<std::size_t>(i)] && type_rotates(doc, type)) return true;
  }
  return false;
}

std::vector<std::int64_t> no_rope_layers(const ConfigDoc& doc) {
  return jf::integer_list(doc.model(), "no_rope_layers", doc.where()).value_or(std::vector<std::int64_t>{});
}

std::vector<bool> index_rotates(const ConfigDoc& doc, std::int64_t layers) {
  std::vector<bool> rope(static_cast<std::size_t>(layers), true);
  switch (doc.quirks().rope_layers) {
    case RopeLayers::kNoRopeLayersList: {
      const auto list = no_rope_layers(doc);
      if (!list.empty() && static_cast<std::int64_t>(list.size()) != layers)
        throw Error(doc.at("no_rope_layers") + " has " + std::to_string(list.size()) + " entries for " +
                    std::to_string(layers) + " layers; they must agree");
      const auto interval = integer(doc, "no_rope_layer_interval").value_or(kDefaultNoRopeLayerInterval);
      for (std::int64_t i = 0; i < layers; ++i)  // 1 means "uses RoPE" despite the key's name
        rope[i] = list.empty() ? interval <= 0 || (i + 1) % interval != 0 : list[i] != 0;
      break;
    }
    case RopeLayers::kNotCrossAttention:
      for (std::int64_t c : layer_indices(doc, "cross_attention_layers", layers).value_or(std::vector<std::int64_t>{}))
        rope[c] = false;
      break;
    default: break;
  }
  return rope;
}

std::vector<std::string> rope_layer_types(const ConfigDoc& doc) {
  if (auto given = config_layer_types(doc)) return distinct(*given);
  // Without layer_types the family's default pattern matters only where it changes the rope;
  // elsewhere every layer type shares the one schedule and the model stays uniform.
  const auto n = layer_count(doc);
  if (!n || *n < 1 || *n > kMaxLayers) return {};
  const auto derived = default_layer_types(doc, *n);
  if (!derived) return {};
  const std::vector<std::string> types = distinct(*derived);
  bool changes_rope = false;
  for (const auto& t : types)
    changes_rope = changes_rope || !type_rotates(doc, t) ||
                   (t == "sliding_attention" && doc.quirks().sliding_layers_unscaled);
  return types.size() > 1 && changes_rope ? types : std::vector<std::string>{};
}

LayerRope layer_rope(const ConfigDoc& doc, const std::string& type, const RopeParams& params, bool own_params,
                     std::vector<std::string>& notes) {
  const FamilyQuirks& row = doc.quirks();
  LayerRope layer{type, type_rotates(doc, type), params, std::nullopt};
  if (row.default_global_head_dim && type == "full_attention") {
    // Gemma4TextConfig: per_layer_config gives full-attention layers head_dim = global_head_dim,
    // which every rope init function reads (RU: config = config.per_layer_config[layer_type]).
    const auto global = integer(doc, "global_head_dim").value_or(row.default_global_head_dim);
    if (global < 1 || global > kMaxHeadDim)
      throw Error(doc.at("global_head_dim") + " must be in [1, " + std::to_string(kMaxHeadDim) + "], got " +
                  std::to_string(global));
    if (global != layer.params.head_dim)
      notes.push_back("full_attention layers: head_dim = " + doc.at("global_head_dim") + " = " +
                      std::to_string(global) + " (Gemma 4 per_layer_config), not head_dim " +
                      std::to_string(layer.params.head_dim));
    layer.params.head_dim = static_cast<int>(global);
  }
  if (!layer.has_rope && type == "full_attention" && row.rope_layers == RopeLayers::kSlidingOnlyIfHybrid) {
    notes.push_back("EXAONE-4 hybrid attention: full_attention layers use no positional encoding (NoPE); "
                    "the schedule shown is the sliding_attention layers'");
  } else if (layer.has_rope && !own_params && type == "sliding_attention" && row.sliding_layers_unscaled) {
    // Gemma 3 and OLMo-3 extend only the full-attention layers; sliding layers keep plain
    // RoPE, at their own base (Gemma 3's rope_local_base_freq) or at rope_theta (OLMo-3).
    RopeParams p;
    p.head_dim = params.head_dim;
    p.partial_rotary_factor = params.partial_rotary_factor;
    p.max_position_embeddings = params.max_position_embeddings;
    p.theta = row.local_theta_key ? jf::number(doc.model(), row.local_theta_key, doc.where()).value_or(10000.0)
                                  : params.theta;
    layer.params = p;
  }
  return layer;
}

}  // namespace posenc::model_layers
