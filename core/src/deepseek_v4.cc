#include "deepseek_v4.h"

#include <algorithm>
#include <cmath>

#include "json_fields.h"
#include "model_layers.h"
#include "posenc/error.h"

namespace posenc::deepseek_v4 {
namespace {

using nlohmann::json;
namespace jf = json_fields;

// configuration_deepseek_v4.py DEEPSEEK_V4_LAYER_TYPES and _COMPRESS_RATIO_TO_LAYER_TYPE.
constexpr const char* kTypes[] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"};
const char* type_of_ratio(std::int64_t ratio) {
  return ratio == 0 ? kTypes[0] : ratio == 4 ? kTypes[1] : ratio == 128 ? kTypes[2] : nullptr;
}

// DeepseekV4Config.__post_init__: the partial_rotary_factor key when given, else the legacy
// qk_rope_head_dim / head_dim, else default_partial_rotary_factor (64 / 512). The rotary then
// reads dim = int(head_dim * partial_rotary_factor) (compute_default_rope_parameters,
// _compute_yarn_parameters).
double rotary_fraction(const ConfigDoc& doc, int hd) {
  const json& m = doc.model();
  if (const auto f = jf::number_in(m, "partial_rotary_factor", doc.where(), 1e-9, 1.0)) return *f;
  if (const auto r = jf::integer_in(m, "qk_rope_head_dim", doc.where(), 2, hd)) return static_cast<double>(*r) / hd;
  return kDefaultRotaryFraction;
}

// DeepseekV4Config.compress_rates (default {CSA: 4, HCA: 128}), the legacy compress_rate_csa /
// compress_rate_hca folded in: the stride of the compressed entries, whose positions are
// w * rate (DeepseekV4CSACompressor / DeepseekV4HCACompressor.forward). Said in a note only.
std::int64_t compress_rate(const ConfigDoc& doc, const char* type, const char* legacy_key, std::int64_t fallback) {
  if (const auto r = jf::integer_in(doc.model(), legacy_key, doc.where(), 1, kMaxPosition)) return *r;
  if (const json* rates = jf::object(doc.model(), "compress_rates", doc.where()))
    if (const auto r = jf::integer_in(*rates, type, doc.at("compress_rates"), 1, kMaxPosition)) return *r;
  return fallback;
}

}  // namespace

bool is_compressed(const std::string& type) { return type == kTypes[1] || type == kTypes[2]; }

int head_dim(const ConfigDoc& doc) {
  return static_cast<int>(jf::integer_in(doc.model(), "head_dim", doc.where(), 2, kMaxHeadDim).value_or(kDefaultHeadDim));
}

std::vector<std::string> default_layer_types(const ConfigDoc& doc, std::int64_t layers) {
  std::vector<std::string> types;
  const auto ratios = jf::integer_list(doc.model(), "compress_ratios", doc.where());
  if (!ratios) {  // HF's default: 2 HCA, then (i - 2) % 2 ? CSA : HCA
    for (std::int64_t i = 0; i < layers; ++i) types.push_back(i < 2 || i % 2 == 0 ? kTypes[2] : kTypes[1]);
    return types;
  }
  for (std::size_t i = 0; i < ratios->size(); ++i) {  // every entry is mapped before the cut, as HF does
    const char* t = type_of_ratio((*ratios)[i]);
    if (!t)
      throw Error(doc.at("compress_ratios") + " entry " + std::to_string(i) + " is " + std::to_string((*ratios)[i]) +
                  "; DeepSeek-V4 knows 0 (sliding_attention), 4 (compressed_sparse_attention) and 128 "
                  "(heavily_compressed_attention): HF's _COMPRESS_RATIO_TO_LAYER_TYPE raises KeyError");
    types.push_back(t);
  }
  if (static_cast<std::int64_t>(types.size()) < layers)
    throw Error(doc.at("compress_ratios") + " has " + std::to_string(types.size()) + " entries for " +
                doc.at("num_hidden_layers") + " " + std::to_string(layers) + "; it needs one per layer (extra "
                "entries, the MTP / DSpark stages, are cut; HF's validate_layer_type raises ValueError)");
  types.resize(static_cast<std::size_t>(layers));
  return types;
}

std::vector<std::string> rope_layer_types(const ConfigDoc& doc) {
  std::vector<std::string> types;
  const auto n = model_layers::layer_count(doc);
  if (auto given = model_layers::config_layer_types(doc)) {
    types = *given;
  } else if (n && *n >= 1 && *n <= model_layers::kMaxLayers) {
    types = default_layer_types(doc, *n);
  } else {
    return {kTypes[0], kTypes[1], kTypes[2]};
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] != kTypes[0] && !is_compressed(types[i]))
      throw Error(doc.at("layer_types") + " entry " + std::to_string(i) + " '" + types[i] + "' is not a DeepSeek-V4 "
                  "layer type (sliding_attention, compressed_sparse_attention, heavily_compressed_attention): HF's "
                  "validate_layer_type raises ValueError");
    if (std::find(out.begin(), out.end(), types[i]) == out.end()) out.push_back(types[i]);
  }
  return out;
}

RopeDicts rope_dicts(const ConfigDoc& doc, const json* dict, const std::string& dict_where, ModelRope& out) {
  RopeDicts r;
  const int hd = head_dim(doc);
  const bool nested = dict && dict->contains("main") && (*dict)["main"].is_object() && dict->contains("compress") &&
                      (*dict)["compress"].is_object();
  if (nested) {
    // __post_init__: "Already nested — drop any leftover top-level keys"; the two dicts as given.
    for (auto it = dict->begin(); it != dict->end(); ++it)
      if (it.key() != "main" && it.key() != "compress")
        out.warnings.push_back(jf::path(dict_where, it.key()) + " ignored: with nested main / compress dicts, "
                               "DeepseekV4Config.__post_init__ drops the other keys");
    r.main = (*dict)["main"], r.compress = (*dict)["compress"];
    r.main_where = jf::path(dict_where, "main"), r.compress_where = jf::path(dict_where, "compress");
    // Both are saved by HF v5 (__post_init__ writes them into each dict); without them HF's
    // reading differs across v5 releases (KeyError on rope_theta; the rotary's .get default 1.0
    // against the config's fraction), so posenc asks for them rather than guess.
    for (const auto& [d, w] : {std::pair{&r.main, r.main_where}, std::pair{&r.compress, r.compress_where}})
      for (const char* key : {"rope_theta", "partial_rotary_factor"})
        if (!d->contains(key))
          throw Error(w + " has no " + key + ": DeepseekV4Config.__post_init__ writes it into both nested dicts, "
                      "and HF v5 releases read a dict without it differently; give it");
  } else {
    json flat = json::object();  // the yarn dict: every key but main / compress (__post_init__)
    if (dict)
      for (auto it = dict->begin(); it != dict->end(); ++it) {
        if (it.key() == "main" || it.key() == "compress")
          out.warnings.push_back(jf::path(dict_where, it.key()) + " ignored: HF uses the nested form only when "
                                 "both main and compress are dicts");
        else flat[it.key()] = it.value();
      }
    const double fraction = rotary_fraction(doc, hd);
    const double theta = jf::positive_number(doc.model(), "rope_theta", doc.where()).value_or(10000.0);
    const double compress_theta = jf::positive_number(doc.model(), "compress_rope_theta", doc.where()).value_or(160000.0);
    r.main = {{"rope_type", "default"}, {"rope_theta", theta}, {"partial_rotary_factor", fraction}};
    r.compress = flat;
    r.compress["rope_theta"] = compress_theta;
    r.compress["partial_rotary_factor"] = fraction;
    // compress.setdefault("rope_type", "default") after standardize_rope_params copied "type".
    std::string type = "default";
    for (const char* key : {"type", "rope_type"})
      if (const auto t = jf::string(flat, key, dict_where)) type = *t;
    if (type == "yarn" && !r.compress.contains("attention_factor")) {
      r.compress["attention_factor"] = 1.0;  // not YaRN's 0.1 ln(factor) + 1: the V4 reference has no mscale
      out.notes.push_back("DeepSeek-V4: the compress rope's YaRN attention_factor is 1.0 (DeepseekV4Config.__post_init__ "
                          "sets it when rope_type is yarn), so cos and sin are not scaled");
    }
    r.main_where = doc.at("rope_theta");
    r.compress_where = dict ? dict_where : doc.at("compress_rope_theta");
    out.notes.push_back("DeepSeek-V4 rope 'main' = {rope_type default, rope_theta " + format_number(theta) +
                        "}, rope 'compress' = " + (dict ? dict_where + " with" : "{rope_type default,") +
                        " rope_theta = compress_rope_theta " + format_number(compress_theta) + ", both with "
                        "partial_rotary_factor " + format_number(fraction) + " (DeepseekV4Config.__post_init__)");
  }
  // _compute_yarn_parameters reads truncate from config.rope_parameters, the {main, compress}
  // dict, which never has it: V4's YaRN always truncates (floor / ceil the correction range).
  if (r.compress.contains("truncate")) {
    out.warnings.push_back(jf::path(r.compress_where, "truncate") + " = " + r.compress["truncate"].dump() +
                           " ignored: HF's _compute_yarn_parameters reads truncate from the nested rope_parameters' "
                           "top level, so DeepSeek-V4 always truncates");
    r.compress.erase("truncate");
  }
  const auto csa = compress_rate(doc, kTypes[1], "compress_rate_csa", 4);
  const auto hca = compress_rate(doc, kTypes[2], "compress_rate_hca", 128);
  out.notes.push_back("DeepSeek-V4 (modeling_deepseek_v4.py): sliding_attention layers use rope 'main', "
                      "compressed_sparse_attention and heavily_compressed_attention layers rope 'compress', on the "
                      "trailing rotary channels of head_dim " + std::to_string(hd) + " in interleaved pairs "
                      "(apply_rotary_pos_emb: x[..., -rope_dim:]); every layer attends to a sliding window, the "
                      "compressed layers also to one entry per " + std::to_string(csa) + " (CSA) or " +
                      std::to_string(hca) + " (HCA) tokens, rotated at its window's first position w * rate; the "
                      "attention output's rope channels are rotated back by -position (cos, -sin)");
  return r;
}

IndexerSpec indexer(const ConfigDoc& doc, int rotary_dim) {
  IndexerSpec x;
  x.heads = static_cast<int>(jf::integer_in(doc.model(), "index_n_heads", doc.where(), 1, kMaxHeadDim).value_or(64));
  x.head_dim = static_cast<int>(jf::integer_in(doc.model(), "index_head_dim", doc.where(), 1, kMaxHeadDim).value_or(128));
  if (x.head_dim < rotary_dim)  // apply_rotary_pos_emb slices x[..., -rope_dim:]
    throw Error(doc.at("index_head_dim") + " " + std::to_string(x.head_dim) + " must be >= the " +
                std::to_string(rotary_dim) + " rotated channels (head_dim * partial_rotary_factor): the indexer "
                "rotates its trailing channels with the compress rope");
  x.rotary_dim = rotary_dim;
  x.rotary_offset = x.head_dim - rotary_dim;
  x.layout = RopeLayout::kInterleaved;
  x.softmax_scale = 1.0 / std::sqrt(static_cast<double>(x.head_dim));
  x.rotated_channels = {{x.rotary_offset, x.head_dim}};
  return x;
}

}  // namespace posenc::deepseek_v4
