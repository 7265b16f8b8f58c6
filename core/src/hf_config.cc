#include "posenc/hf_config.h"

#include <algorithm>
#include <set>

#include "config_doc.h"
#include "config_text.h"
#include "json_fields.h"
#include "model_layers.h"
#include "posenc/error.h"
#include "posenc/model_families.h"

namespace posenc {
namespace {

using nlohmann::json;
namespace jf = json_fields;

// Every key a rope dict may hold, over all types (HF's plus posenc's ntk / ntk_by_parts).
const std::vector<std::string> kRopeKeys = {
    "rope_type", "type", "rope_theta", "partial_rotary_factor", "factor",
    "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
    "mscale_all_dim", "truncate", "low_freq_factor", "high_freq_factor", "short_factor",
    "long_factor", "mrope_section", "mrope_interleaved", "llama_4_scaling_beta"};

// Keys every type accepts: the type itself, the base, the rotary fraction, the M-RoPE layout
// (applied by the kernels, not the schedule) and Ministral-3's attention-side beta.
const std::set<std::string> kCommonKeys = {"rope_type", "type", "rope_theta", "partial_rotary_factor",
                                           "mrope_section", "mrope_interleaved",
                                           "llama_4_scaling_beta"};

std::set<std::string> keys_used_by(RopeType t) {
  const auto& keys = rope_type_traits(t).keys;
  return {keys.begin(), keys.end()};
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A channel count read from the config: in [1, kMaxHeadDim] or an error naming key and value.
int channels(std::int64_t value, const std::string& key) {
  if (value < 1 || value > kMaxHeadDim)
    throw Error(key + " must be in [1, " + std::to_string(kMaxHeadDim) + "], got " + std::to_string(value));
  return static_cast<int>(value);
}

struct Parser {
  const ConfigDoc& doc;
  const json& model;    // the text model's config: text_config, or the top level
  const ConfigOptions& options;
  ModelRope& out;

  std::string at(const std::string& key) const { return doc.at(key); }
  const std::string& where() const { return doc.where(); }

  // How this family's config departs from HF's generic keys (model_families.h), each rule
  // with its HF source; a family without a row reads the generic keys only. Found once, by ConfigDoc.
  const FamilyQuirks& quirks() const { return doc.quirks(); }

  // Whether the rope dict run() reads gives every layer type its own rope_theta (v5 configs
  // keep it there: Devstral 2, EXAONE 4.5), so that a missing top-level key is no default.
  bool rope_dict_sets_theta() const {
    for (const char* key : {"rope_parameters", "rope_scaling"}) {
      const auto it = model.find(key);
      if (it == model.end() || !it->is_object()) continue;
      const auto sets = [](const json& d) { return d.is_object() && d.contains("rope_theta") && !d["rope_theta"].is_null(); };
      if (sets(*it)) return true;
      return !it->empty() && std::all_of(it->begin(), it->end(), sets);
    }
    return false;
  }

  // ---- the fields outside the rope dict -------------------------------------------------
  RopeParams base_params() {
    RopeParams p;
    const std::string w = where();

    // head_dim: DeepSeek's MLA rotates only the qk_rope_head_dim slice.
    if (auto rope_head = jf::integer(model, "qk_rope_head_dim", w)) {
      p.head_dim = channels(*rope_head, at("qk_rope_head_dim"));
      out.notes.push_back("head_dim = qk_rope_head_dim = " + std::to_string(*rope_head) +
                          " (DeepSeek MLA: only that slice of q/k rotates)");
    } else if (auto hd = jf::integer(model, "head_dim", w); hd && *hd != 0) {
      p.head_dim = channels(*hd, at("head_dim"));
    } else if (auto kv = quirks().head_dim_key ? jf::integer(model, quirks().head_dim_key, w) : std::nullopt) {
      p.head_dim = channels(*kv, at(quirks().head_dim_key));
    } else {
      const char* hidden_key = quirks().hidden_key;
      const char* heads_key = quirks().heads_key;
      auto hidden = jf::integer(model, hidden_key, w);
      auto heads = jf::integer(model, heads_key, w);
      if (!hidden || !heads)
        throw Error("config needs head_dim, or " + at(hidden_key) + " and " + at(heads_key) +
                    ", to know the head size");
      if (*heads <= 0) throw Error(at(heads_key) + " must be > 0, got " + std::to_string(*heads));
      p.head_dim = channels(*hidden / *heads, at(hidden_key) + " / " + at(heads_key));
    }

    // rope_theta, and where families keep it.
    if (auto theta = jf::number(model, "rope_theta", w)) {
      p.theta = *theta;
    } else if (auto base = jf::number(model, "rotary_emb_base", w)) {
      p.theta = *base;
      out.notes.push_back("rope_theta = rotary_emb_base = " + format_number(*base) + " (GPT-NeoX-style key)");
    } else if (const json* attn = jf::object(model, "attn_config", w);
               attn && quirks().theta_in_attn_config && attn->contains("rope_theta")) {
      auto theta = jf::number(*attn, "rope_theta", at("attn_config"));
      if (options.hf_compatible) {
        out.notes.push_back("attn_config.rope_theta = " + format_number(*theta) +
                            " ignored as HF does (--hf-compatible); using the default 10000");
      } else {
        p.theta = *theta;
        out.notes.push_back("rope_theta = attn_config.rope_theta = " + format_number(*theta) +
                            ": HF's generic rope code ignores this DBRX key and would use 10000 (a "
                            "known HF bug); posenc honours it (--hf-compatible restores HF)");
      }
    } else if (quirks().theta_from_rope_ratio) {
      const double ratio = jf::number(model, "rope_ratio", w).value_or(1.0);
      p.theta = 10000.0 * ratio;
      out.notes.push_back("ChatGLM: base = 10000 * rope_ratio = " + format_number(p.theta) +
                          "; pairs are interleaved (2i, 2i+1) in its own code");
    } else if (!rope_dict_sets_theta()) {
      out.notes.push_back("rope_theta absent: HF's default 10000");
    }

    // The rotary fraction.
    bool fraction_given = true;
    if (auto prf = jf::number(model, "partial_rotary_factor", w)) {
      p.partial_rotary_factor = *prf;
    } else if (auto pct = jf::number(model, "rotary_pct", w)) {
      p.partial_rotary_factor = *pct;
    } else if (quirks().default_partial_rotary > 0) {
      p.partial_rotary_factor = quirks().default_partial_rotary;
      out.notes.push_back("no partial_rotary_factor or rotary_pct: the family's default " +
                          format_number(p.partial_rotary_factor) + " (" + quirks().hf_source + ")");
    } else {
      fraction_given = false;
    }
    if (auto rd = jf::integer(model, "rotary_dim", w)) {
      const int derived = static_cast<int>(p.head_dim * p.partial_rotary_factor);
      if (fraction_given) {
        if (*rd != derived)
          out.warnings.push_back(at("rotary_dim") + " = " + std::to_string(*rd) +
                                 " disagrees with int(head_dim * partial_rotary_factor) = " +
                                 std::to_string(derived) + "; using the latter, as HF does");
      } else if (options.hf_compatible) {
        out.notes.push_back(at("rotary_dim") + " = " + std::to_string(*rd) +
                            " ignored as HF does (--hf-compatible): all head_dim channels rotate");
      } else if (*rd != p.head_dim) {
        p.rotary_dim = channels(*rd, at("rotary_dim"));
        out.notes.push_back(at("rotary_dim") + " = " + std::to_string(*rd) +
                            " honoured: HF ignores this key and would rotate all " +
                            std::to_string(p.head_dim) +
                            " channels (a known HF bug); --hf-compatible restores HF");
      }
    }

    // Context lengths.
    if (auto mp = jf::integer(model, "max_position_embeddings", w)) {
      p.max_position_embeddings = *mp;
    } else if (auto msl = quirks().max_pos_key ? jf::integer(model, quirks().max_pos_key, w) : std::nullopt) {
      p.max_position_embeddings = *msl;
    } else if (auto sl = jf::integer(model, "seq_length", w)) {
      p.max_position_embeddings = *sl;
      out.notes.push_back("max_position_embeddings = seq_length = " + std::to_string(*sl));
    }
    return p;
  }

  // ---- the rope dict ---------------------------------------------------------------------
  RopeType resolve_type(const json& dict, const std::string& w) {
    auto name_of = [&](const char* key) -> std::optional<std::string> {
      auto s = jf::string(dict, key, w);
      if (!s) return s;
      if (*s == "mrope") return std::string("default");  // Qwen2-VL: M-RoPE over default freqs
      if (*s == "su") return std::string("longrope");    // early Phi-3 name
      if (*s == "yarn" && quirks().yarn_means_longrope) return std::string("longrope");
      return s;
    };
    auto rope_type = name_of("rope_type");
    auto legacy = name_of("type");
    if (rope_type && legacy && *rope_type != *legacy)
      throw Error(jf::path(w, "rope_type") + " " + jf::describe(dict["rope_type"]) + " and " + jf::path(w, "type") + " " +
                  jf::describe(dict["type"]) + " disagree; keep one");
    const std::string name = rope_type ? *rope_type : legacy ? *legacy : "default";
    auto type = try_from_name<RopeType>(name);
    if (!type)
      throw Error(jf::path(w, rope_type ? "rope_type" : "type") + " " + jf::describe(json(name)) +
                  " is not a rope type posenc knows; allowed: " + enum_names_joined<RopeType>(", "));
    return *type;
  }

  void apply_rope_dict(const json& dict, const std::string& w, RopeParams& p) {
    for (auto it = dict.begin(); it != dict.end(); ++it) {
      if (std::find(kRopeKeys.begin(), kRopeKeys.end(), it.key()) != kRopeKeys.end()) continue;
      const std::string msg = jf::path(w, it.key()) + " is not a key any rope type knows (value " +
                              jf::describe(it.value()) + "); known keys: " + joined(kRopeKeys);
      if (!options.lenient) throw Error(msg + " (--lenient turns unknown keys into warnings)");
      out.warnings.push_back(msg + "; ignored (--lenient)");
    }
    p.type = resolve_type(dict, w);

    const auto used = keys_used_by(p.type);
    for (auto it = dict.begin(); it != dict.end(); ++it) {
      const std::string& key = it.key();
      if (it.value().is_null() || kCommonKeys.count(key) || used.count(key)) continue;
      if (std::find(kRopeKeys.begin(), kRopeKeys.end(), key) == kRopeKeys.end()) continue;
      out.warnings.push_back(jf::path(w, key) + " is not used by rope_type '" + to_string(p.type) +
                             "' (ignored)");
    }

    if (auto theta = jf::number(dict, "rope_theta", w)) {
      if (auto top = jf::number(model, "rope_theta", where()); top && *top != *theta)
        out.warnings.push_back(jf::path(w, "rope_theta") + " = " + format_number(*theta) +
                               " overrides " + at("rope_theta") + " = " + format_number(*top));
      p.theta = *theta;
    }
    if (auto prf = jf::number(dict, "partial_rotary_factor", w)) p.partial_rotary_factor = *prf;
    if (used.count("factor")) p.factor = jf::number(dict, "factor", w);
    if (p.type == RopeType::kYarn && !dict.contains("factor"))
      throw Error("rope_type 'yarn' requires " + jf::path(w, "factor") +
                  " (null derives it from max_position_embeddings / original_max_position_embeddings)");
    if (p.type == RopeType::kLongRope && !p.factor)
      out.notes.push_back("longrope without factor: max_position_embeddings / original_max_position_embeddings, as HF");
    if (used.count("original_max_position_embeddings"))
      p.original_max_position_embeddings = jf::integer(dict, "original_max_position_embeddings", w);
    if (used.count("attention_factor")) p.attention_factor = jf::number(dict, "attention_factor", w);
    if (used.count("beta_fast")) p.beta_fast = jf::number(dict, "beta_fast", w).value_or(32.0);
    if (used.count("beta_slow")) p.beta_slow = jf::number(dict, "beta_slow", w).value_or(1.0);
    if (used.count("mscale")) {
      p.mscale = jf::number(dict, "mscale", w);
      p.mscale_all_dim = jf::number(dict, "mscale_all_dim", w);
      if (p.mscale.value_or(0) != 0 && p.mscale_all_dim.value_or(0) == 0 && !p.attention_factor)
        out.warnings.push_back(jf::path(w, "mscale") +
                               " without mscale_all_dim is ignored (HF rule): attention factor is 0.1 ln(factor) + 1");
    }
    if (used.count("truncate")) p.truncate = jf::boolean(dict, "truncate", w).value_or(true);
    if (used.count("low_freq_factor")) {
      p.low_freq_factor = jf::number(dict, "low_freq_factor", w);
      p.high_freq_factor = jf::number(dict, "high_freq_factor", w);
    }
    if (used.count("short_factor")) {
      p.short_factor = jf::number_list(dict, "short_factor", w).value_or(std::vector<double>{});
      p.long_factor = jf::number_list(dict, "long_factor", w).value_or(std::vector<double>{});
    }
    if (auto sections = jf::integer_list(dict, "mrope_section", w)) {
      for (auto s : *sections) {
        if (s < 0 || s > kMaxHeadDim)
          throw Error(jf::path(w, "mrope_section") + " entries must be in [0, " + std::to_string(kMaxHeadDim) +
                      "], got " + std::to_string(s));
        p.mrope_section.push_back(static_cast<int>(s));
      }
    }
    p.mrope_interleaved = jf::boolean(dict, "mrope_interleaved", w).value_or(false);
    p.llama_4_scaling_beta = jf::number(dict, "llama_4_scaling_beta", w);

    // Phi-3 style: a top-level original_max_position_embeddings overrides the dict (HF v5).
    if (rope_type_traits(p.type).needs_original_max) {
      if (auto top = jf::integer(model, "original_max_position_embeddings", where())) {
        if (p.original_max_position_embeddings && *p.original_max_position_embeddings != *top)
          out.warnings.push_back(at("original_max_position_embeddings") + " = " + std::to_string(*top) +
                                 " overrides " + jf::path(w, "original_max_position_embeddings") + " = " +
                                 std::to_string(*p.original_max_position_embeddings) + " (HF rule)");
        p.original_max_position_embeddings = *top;
      } else if (!p.original_max_position_embeddings && p.max_position_embeddings) {
        out.notes.push_back("original_max_position_embeddings absent: max_position_embeddings = " +
                            std::to_string(*p.max_position_embeddings) + " (HF's default)");
      }
    }
  }

  // ---- layer types (their rules: model_layers.h) -----------------------------------------
  // Llama 4 (model-semantics.md): no_rope_layers[i] == 1 means layer i rotates; absent, every
  // no_rope_layer_interval-th layer is NoPE. The schedule itself is the same for every rotating
  // layer, so this is a note, not a layer type.
  void note_llama4_layers() {
    if (quirks().query_scale != QueryScale::kLlama4Temperature) return;
    const auto listed = model_layers::no_rope_layers(doc);
    const std::int64_t layers =
        !listed.empty() ? static_cast<std::int64_t>(listed.size())
                        : std::min<std::int64_t>(model_layers::layer_count(doc).value_or(model_layers::kLlama4DefaultLayers),
                                                 1 << 20);
    const auto rotates = model_layers::index_rotates(doc, std::max<std::int64_t>(layers, 0));
    const auto rotating = std::count(rotates.begin(), rotates.end(), true);
    out.notes.push_back("Llama 4: " + std::to_string(rotating) + " of " + std::to_string(layers) +
                        " layers use RoPE (no_rope_layers), the others no positional encoding (NoPE, global "
                        "attention); RoPE pairs are interleaved (2i, 2i+1), as complex numbers");
  }

  void run() {
    note_llama4_layers();
    RopeParams base = base_params();
    const std::string w = where();
    const json* params_v5 = jf::object(model, "rope_parameters", w);
    const json* legacy = jf::object(model, "rope_scaling", w);
    if (params_v5 && legacy && *params_v5 != *legacy)
      throw Error(at("rope_parameters") + " and " + at("rope_scaling") + " are both set and differ; keep one");
    const json* dict = params_v5 ? params_v5 : legacy;
    const std::string dict_where = at(params_v5 ? "rope_parameters" : "rope_scaling");

    const bool per_layer = dict && !dict->empty() &&
                           std::all_of(dict->begin(), dict->end(), [](const json& v) { return v.is_object(); });
    if (per_layer) {
      // v5 layout: {"full_attention": {...}, "sliding_attention": {...}}
      for (auto it = dict->begin(); it != dict->end(); ++it) {
        RopeParams p = base;
        apply_rope_dict(it.value(), jf::path(dict_where, it.key()), p);
        out.layers.push_back(model_layers::layer_rope(doc, it.key(), p, true, out.notes));
      }
    } else {
      RopeParams p = base;
      if (dict) apply_rope_dict(*dict, dict_where, p);
      const auto types = model_layers::rope_layer_types(doc);
      if (types.empty()) out.layers.push_back(model_layers::layer_rope(doc, "", p, false, out.notes));
      for (const auto& t : types) out.layers.push_back(model_layers::layer_rope(doc, t, p, false, out.notes));
    }
    for (const auto& layer : out.layers) {
      if (!layer.has_rope) continue;
      std::string scope = dict ? dict_where : (w.empty() ? "config" : w);
      if (per_layer) scope = jf::path(scope, layer.layer_type);
      else if (!layer.layer_type.empty()) scope += " (" + jf::path("", layer.layer_type) + " layers)";
      try {
        validate(layer.params);
      } catch (const Error& e) {
        throw Error(scope + ": " + e.what());
      }
      std::vector<std::string> warnings, notes;
      advise(layer.params, warnings, notes);
      for (const auto& m : warnings) out.warnings.push_back(scope + ": " + m);
      for (const auto& m : notes) out.notes.push_back(scope + ": " + m);
    }
  }
};

}  // namespace

const LayerRope& ModelRope::select(const std::string& layer_type) const {
  std::vector<std::string> names;
  for (const auto& l : layers) names.push_back(l.layer_type.empty() ? "(uniform)" : l.layer_type);
  if (layer_type.empty()) {
    for (const auto& l : layers)
      if (l.layer_type == "full_attention" && l.has_rope) return l;
    for (const auto& l : layers)
      if (l.has_rope) return l;
    throw Error("no layer type of this model uses RoPE (layer types: " + joined(names) + ")");
  }
  for (const auto& l : layers) {
    if (l.layer_type != layer_type) continue;
    if (!l.has_rope) throw Error("layers of type '" + layer_type + "' have no rotary embedding");
    return l;
  }
  throw Error("layer type '" + layer_type + "' is not in this config; it has: " + joined(names));
}

ModelRope read_model_rope(const ConfigDoc& doc, const ConfigOptions& options) {
  ModelRope out;
  out.model_type = doc.model_type();
  Parser{doc, doc.model(), options, out}.run();
  return out;
}

ModelRope parse_hf_config(const std::string& json_text, const ConfigOptions& options) {
  const ConfigDoc doc(json_text);
  return read_model_rope(doc, options);
}

ModelRope load_hf_config(const std::string& path, const ConfigOptions& options) {
  return config_text::parse_config_file(path, [&](const std::string& text) { return parse_hf_config(text, options); });
}

}  // namespace posenc
