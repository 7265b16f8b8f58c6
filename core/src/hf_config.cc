#include "posenc/hf_config.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <string_view>

#include "config_doc.h"
#include "config_text.h"
#include "deepseek_v4.h"
#include "json_fields.h"
#include "model_layers.h"
#include "posenc/error.h"
#include "posenc/model_families.h"
#include "rope_dict.h"

namespace posenc {
namespace {

using nlohmann::json;
namespace jf = json_fields;

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
  // The spellings of one field that this family's code does not read (GPT-NeoX reads
  // rotary_emb_base, never rope_theta; Llama reads rope_theta, never rotary_emb_base): present,
  // they are ignored as HF ignores them, with a warning naming the key the family reads.
  void warn_unread_spellings(std::initializer_list<const char*> spellings, const char* read_key) {
    for (const char* key : spellings) {
      if (std::string_view(key) == read_key || !model.contains(key)) continue;
      const std::string who = doc.family() ? "model_type '" + doc.model_type() + "' reads " + at(read_key) +
                                                 " (its row in the family table cites the HF code)"
                                           : "HF's generic config reads " + at(read_key) + " (posenc does not know "
                                             "model_type '" + doc.model_type() + "'; if its own code reads " + key +
                                             ", its schedule differs)";
      out.warnings.push_back(at(key) + " = " + model[key].dump() + " ignored: " + who);
    }
  }

  RopeParams base_params() {
    RopeParams p;
    const std::string w = where();

    // head_dim: DeepSeek's MLA rotates only the qk_rope_head_dim slice.
    if (quirks().deepseek_v4) {
      p.head_dim = deepseek_v4::head_dim(doc);  // the whole head; its rope dicts give the rotated fraction
    } else if (quirks().head_dim_twice_hidden) {
      // Zamba2Config.__post_init__ overwrites attention_head_dim (HF's head_dim) with this.
      const auto hidden = jf::integer(model, quirks().hidden_key, w);
      const auto heads = jf::integer(model, quirks().heads_key, w);
      if (!hidden || !heads || *heads <= 0)
        throw Error("config needs " + at(quirks().hidden_key) + " and " + at(quirks().heads_key) + " > 0: Zamba2's "
                    "heads span 2 * hidden_size / num_attention_heads channels");
      p.head_dim = channels(2 * *hidden / *heads, "2 * " + at(quirks().hidden_key) + " / " + at(quirks().heads_key));
      out.notes.push_back("head_dim = 2 * hidden_size / num_attention_heads = " + std::to_string(p.head_dim) +
                          " (Zamba2Config: the shared attention block attends over [hidden, embedding])");
    } else if (auto rope_head = jf::integer(model, "qk_rope_head_dim", w)) {
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
      if (quirks().own_rotary_dim && *hidden % *heads != 0)  // GPTJAttention raises ValueError
        throw Error(at(hidden_key) + " " + std::to_string(*hidden) + " is not divisible by " + at(heads_key) + " " +
                    std::to_string(*heads) + " (HF's " + doc.model_type() + " attention raises ValueError)");
      p.head_dim = channels(*hidden / *heads, at(hidden_key) + " / " + at(heads_key));
    }

    // rope_theta, and where families keep it.
    const char* theta_key = quirks().theta_key ? quirks().theta_key : "rope_theta";
    const char* fraction_key = quirks().fraction_key ? quirks().fraction_key : "partial_rotary_factor";
    if (!quirks().own_rotary_dim) {  // GPT-J's own keys: below and in read_rotary_channels
      warn_unread_spellings({"rope_theta", "rotary_emb_base"}, theta_key);
      warn_unread_spellings({"partial_rotary_factor", "rotary_pct", "rope_pct"}, fraction_key);
    }
    if (quirks().own_rotary_dim) {
      p.theta = 10000.0;  // a literal in create_sinusoidal_positions
      for (const char* key : {"rope_theta", "rotary_emb_base"})
        if (model.contains(key))
          out.warnings.push_back(at(key) + " ignored: model_type '" + doc.model_type() + "' fixes base 10000");
    } else if (auto theta = jf::number(model, theta_key, w)) {
      p.theta = *theta;
      if (quirks().theta_key)
        out.notes.push_back("rope_theta = " + at(theta_key) + " = " + format_number(*theta) + " (the key model_type '" +
                            doc.model_type() + "' reads)");
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
    } else {
      // HF: the config class's default_theta (model-families-3.md §1), 10000 unless the row says.
      p.theta = quirks().default_theta;
      if (!rope_dict_sets_theta())
        out.notes.push_back("rope_theta absent: HF's default " + format_number(p.theta) +
                            (quirks().default_theta != 10000.0 ? " (this family's default_theta)" : ""));
    }

    read_rotary_channels(doc, options, fraction_key, p, out);

    // Context lengths. Qwen-1's code reads seq_length (QWenAttention.seq_length), never
    // max_position_embeddings.
    const auto qwen_len = quirks().qwen_seq_length ? jf::integer(model, "seq_length", w) : std::nullopt;
    if (qwen_len) {
      p.max_position_embeddings = *qwen_len;
      if (auto mp = jf::integer(model, "max_position_embeddings", w); mp && *mp != *qwen_len)
        out.notes.push_back("max_position_embeddings = seq_length = " + std::to_string(*qwen_len) +
                            " (Qwen-1's code reads seq_length; the config's max_position_embeddings " +
                            std::to_string(*mp) + " is unused)");
    } else if (auto mp = jf::integer(model, "max_position_embeddings", w)) {
      p.max_position_embeddings = *mp;
    } else if (auto msl = quirks().max_pos_key ? jf::integer(model, quirks().max_pos_key, w) : std::nullopt) {
      p.max_position_embeddings = *msl;
    } else if (auto sl = jf::integer(model, "seq_length", w)) {
      p.max_position_embeddings = *sl;
      out.notes.push_back("max_position_embeddings = seq_length = " + std::to_string(*sl));
    }
    return p;
  }

  // ---- the rope dict (rope_dict.h, driven by the field table) -----------------------------
  void apply_rope_dict(const json& dict, const std::string& w, RopeParams& p) {
    // DeepSeek-V4's dicts carry their own fraction and theta (DeepseekV4Config.__post_init__).
    const bool v4 = quirks().deepseek_v4;
    read_rope_dict(dict, w, RopeDictContext{model, where().empty() ? std::string() : where() + ".", quirks().yarn_means_longrope,
                                     quirks().xdrope, !quirks().fraction_key && !v4, options.lenient,
                                     quirks().ignored_rope_keys, out, v4}, p);
    apply_family_dict_rules(dict, w, p);
  }

  // What a family's own modeling code does with its rope dict, beyond RU's shared functions.
  void apply_family_dict_rules(const json& dict, const std::string& w, RopeParams& p) {
    if (p.alpha && !quirks().ntk_alpha) {
      out.warnings.push_back(jf::path(w, "alpha") + " = " + format_number(*p.alpha) +
                             " is HunYuan's NTK-alpha; RU _compute_dynamic_ntk_parameters (this family's dynamic) "
                             "does not read it (ignored)");
      p.alpha.reset();
    }
    if (p.alpha)
      out.notes.push_back("HunYuan NTK-alpha: base = rope_theta * alpha^(d/(d-2)) = " +
                          format_number(p.theta * std::pow(*p.alpha, static_cast<double>(p.head_dim) / (p.head_dim - 2))) +
                          " with d = head_dim " + std::to_string(p.head_dim) +
                          ", attention factor 1, up to max_position_embeddings; beyond it HF's dynamic_rope_update "
                          "recomputes plain dynamic NTK from factor, without alpha");
    // MiniCPM3Attention: yarn_apply_mscale does rope_parameters["factor"] whenever the rope
    // type is not default, so HF v5 cannot build the published MiniCPM3-4B (longrope, no factor).
    if (quirks().mscale_reads_factor && p.type != RopeType::kDefault && !dict.contains("factor")) {
      const std::string why = "HF v5 raises KeyError('factor') on this config: modeling_minicpm3.py's "
                              "yarn_apply_mscale reads " + jf::path(w, "factor") + " for any rope type but "
                              "default, and " + w + " (rope_type '" + to_string(p.type) + "') has none";
      if (!options.lenient) throw Error(why + " (--lenient computes what the model's own hub code does)");
      out.warnings.push_back(why + "; --lenient: computed as the model's own hub code (modeling_minicpm3.py, "
                             "MiniCPMLongRoPE) does, factor max_position_embeddings / original_max_position_embeddings "
                             "and no softmax mscale");
    }
  }

  // ---- layer types (their rules: model_layers.h) -----------------------------------------
  // Llama 4 (model-semantics.md): no_rope_layers[i] == 1 means layer i rotates; absent, every
  // no_rope_layer_interval-th layer is NoPE. The schedule itself is the same for every rotating
  // layer, so this is a note, not a layer type.
  // Returns false when no layer rotates (no_rope_layers all 0).
  bool note_llama4_layers() {
    if (quirks().query_scale != QueryScale::kLlama4Temperature) return true;
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
    return rotating > 0 || layers == 0;
  }

  // Qwen-1's use_dynamic_ntk (absent: not applied; QWenConfig's own default was not read).
  void note_qwen_ntk() {
    if (!quirks().qwen_seq_length || !jf::boolean(model, "use_dynamic_ntk", where()).value_or(false)) return;
    for (LayerRope& layer : out.layers) {
      if (!layer.has_rope) continue;
      if (!layer.params.max_position_embeddings)
        throw Error(at("use_dynamic_ntk") + " is true but " + at("seq_length") +
                    " is absent: Qwen-1's NTK-alpha needs the training length");
      layer.ntk_prefill_length = layer.params.max_position_embeddings;
    }
    out.notes.push_back("Qwen-1 use_dynamic_ntk: the schedule shown is a prefill of at most seq_length = " +
                        std::to_string(out.layers[0].params.max_position_embeddings.value_or(0)) +
                        " tokens; a prefill of L tokens beyond it fixes base = rope_theta * alpha^(d/(d-2)), alpha = "
                        "2^ceil(log2(L / seq_length) + 1) - 1, for the whole generation (--seq-len L shows it; "
                        "RopeRuntime does not model the prefill/decode split)");
  }

  void run() {
    const bool any_layer_rotates = note_llama4_layers() && model_layers::some_layer_rotates(doc);
    if (!any_layer_rotates && quirks().query_scale != QueryScale::kLlama4Temperature)
      out.notes.push_back("no layer of this model rotates (its layer types and NoPE rules): the RoPE keys are checked "
                          "but no layer applies them");
    RopeParams base = base_params();
    const std::string w = where();
    const json* params_v5 = jf::object(model, "rope_parameters", w);
    const json* legacy = jf::object(model, "rope_scaling", w);
    if (params_v5 && legacy && *params_v5 != *legacy)
      throw Error(at("rope_parameters") + " and " + at("rope_scaling") + " are both set and differ; keep one");
    const json* dict = params_v5 ? params_v5 : legacy;
    if (dict && quirks().own_rotary_dim) {  // GPTJConfig / CodeGenConfig have no rope dict: HF never reads one
      out.warnings.push_back(at(params_v5 ? "rope_parameters" : "rope_scaling") + " ignored: model_type '" +
                             doc.model_type() + "' builds its own unscaled sinusoids (" + quirks().hf_source + ")");
      dict = nullptr;
    }
    std::string dict_where = at(params_v5 ? "rope_parameters" : "rope_scaling");
    // A family whose config class fills rope_parameters when absent (Gemma4TextConfig).
    const json defaults = quirks().default_rope_parameters && !dict && !jf::number(model, "rope_theta", w)
                              ? json::parse(quirks().default_rope_parameters)
                              : json();
    if (!defaults.is_null()) {
      dict = &defaults;
      dict_where = at("rope_parameters") + " (the family's default)";
      out.notes.push_back("rope_parameters absent: the family's defaults " + defaults.dump());
    }

    const bool per_layer = !quirks().deepseek_v4 && dict && !dict->empty() &&
                           std::all_of(dict->begin(), dict->end(), [](const json& v) { return v.is_object(); });
    if (quirks().deepseek_v4) {
      // DeepseekV4Config: one rope per label, each layer type taking its label's (deepseek_v4.h).
      const deepseek_v4::RopeDicts d = deepseek_v4::rope_dicts(doc, dict, dict_where, out);
      RopeParams main = base, compress = base;
      apply_rope_dict(d.main, d.main_where, main);
      apply_rope_dict(d.compress, d.compress_where, compress);
      for (const auto& [p, at_] : {std::pair{&main, d.main_where}, std::pair{&compress, d.compress_where}}) try {
          validate(*p);
        } catch (const Error& e) {
          throw Error(at_ + ": " + e.what());
        }
      for (const std::string& t : deepseek_v4::rope_layer_types(doc))
        out.layers.push_back(model_layers::layer_rope(doc, t, deepseek_v4::is_compressed(t) ? compress : main, true, out.notes));
    } else if (per_layer) {
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
    note_qwen_ntk();
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
    // Validated above, but used by no layer: freqs, explain and golden must not show a RoPE
    // the model never applies (explain said "rotates 128 of 128 channels" for an all-NoPE Llama 4).
    if (!any_layer_rotates)
      for (auto& layer : out.layers) layer.has_rope = false;
  }
};

}  // namespace

double qwen_ntk_alpha(std::int64_t L, std::int64_t S) {
  if (L < 1 || S < 1) throw Error("Qwen NTK-alpha needs lengths >= 1, got L " + std::to_string(L) + ", seq_length " + std::to_string(S));
  // math.log(x, 2) is log(x) / log(2), not log2(x): the same double, even where they differ.
  const double context_value = std::log(static_cast<double>(L) / static_cast<double>(S)) / std::log(2.0) + 1;
  return std::max(std::pow(2.0, std::ceil(context_value)) - 1, 1.0);
}

RopeParams prefill_params(const LayerRope& layer, std::optional<std::int64_t> L) {
  RopeParams p = layer.params;
  if (!layer.ntk_prefill_length || !L) return p;
  const double alpha = qwen_ntk_alpha(*L, *layer.ntk_prefill_length);
  const int d = p.rotated_dim();
  p.theta = p.theta * std::pow(alpha, static_cast<double>(d) / (d - 2));  // RotaryEmbedding.update_rotary_pos_emb_cache
  return p;
}

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
  // A learned-table, ALiBi or T5 model has no schedule to read: say what it has instead of
  // inventing a RoPE from HF's generic defaults (issue 32).
  if (const ModelPositions positions = read_model_positions(doc); !positions.is_rope())
    throw Error(not_rope_message(positions));
  return read_model_rope(doc, options);
}

ModelRope load_hf_config(const std::string& path, const ConfigOptions& options) {
  return config_text::parse_config_file(path, [&](const std::string& text) { return parse_hf_config(text, options); });
}

}  // namespace posenc
