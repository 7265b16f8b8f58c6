#include "rope_dict.h"

#include <algorithm>

#include "posenc/error.h"
#include "posenc/rope_fields.h"
#include "rope_field_json.h"

namespace posenc {
namespace {

using json_fields::json;
namespace jf = json_fields;

// The dict keys that name `row`'s field: HF's key and its legacy spelling.
template <class F>
void for_each_dict_key(const RopeField& row, F&& f) {
  if (row.home != FieldHome::kRopeDict) return;
  f(std::string(row.name));
  if (row.hf_legacy) f(std::string(row.hf_legacy));
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The rope type: the table's key (rope_type) or HF's legacy one (type); both given, they must
// name the same type. The names HF maps onto another type (Qwen2-VL's "mrope", early Phi-3's
// "su") are alias rows of RopeType's names; a family whose "yarn" means longrope says so.
RopeType resolve_type(const json& dict, const std::string& w, const RopeDictContext& c, const RopeField& row) {
  auto type_at = [&](const char* key) -> std::optional<RopeType> {
    const auto name = jf::string(dict, key, w);
    if (!name) return std::nullopt;
    if (c.xdrope && *name == "xdrope") return RopeType::kDynamic;  // HunYuanVLTextConfig.convert_rope_params_to_dict
    const auto type = try_from_name<RopeType>(*name);
    if (!type)
      throw Error(jf::path(w, key) + " " + jf::describe(json(*name)) +
                  " is not a rope type posenc knows; allowed: " + enum_names_joined<RopeType>(", "));
    return *type == RopeType::kYarn && c.yarn_means_longrope ? RopeType::kLongRope : *type;
  };
  const auto current = type_at(row.name);
  const auto legacy = row.hf_legacy ? type_at(row.hf_legacy) : std::nullopt;
  if (current && legacy && *current != *legacy)
    throw Error(jf::path(w, row.name) + " " + jf::describe(dict[row.name]) + " and " + jf::path(w, row.hf_legacy) +
                " " + jf::describe(dict[row.hf_legacy]) + " disagree; keep one");
  return current ? *current : legacy ? *legacy : RopeType::kDefault;  // HF: no type is "default"
}

// The rules beyond one key each: HF's requirements and the model-level keys that override
// the dict.
void apply_hf_rules(const json& dict, const std::string& w, const RopeDictContext& c, RopeParams& p) {
  const std::string model_where = c.prefix.empty() ? "" : c.prefix.substr(0, c.prefix.size() - 1);
  if (p.type == RopeType::kYarn && !dict.contains("factor"))
    throw Error("rope_type 'yarn' requires " + jf::path(w, "factor") +
                " (null derives it from max_position_embeddings / original_max_position_embeddings)");
  if (p.type == RopeType::kLongRope && !p.factor)
    c.out.notes.push_back("longrope without factor: max_position_embeddings / original_max_position_embeddings, as HF");
  if (p.type == RopeType::kYarn && p.mscale.value_or(0) != 0 && p.mscale_all_dim.value_or(0) == 0 && !p.attention_factor)
    c.out.warnings.push_back(jf::path(w, "mscale") +
                             " without mscale_all_dim is ignored (HF rule): attention factor is 0.1 ln(factor) + 1");
  // RU standardize_rope_params (:788; every layer type's dict, :806): a top-level
  // partial_rotary_factor overwrites the dict's.
  if (auto top = c.top_level_fraction_overrides ? jf::number(c.model, "partial_rotary_factor", model_where)
                                                : std::nullopt) {
    if (p.partial_rotary_factor != *top)
      c.out.warnings.push_back(c.prefix + "partial_rotary_factor = " + format_number(*top) + " overrides " +
                               jf::path(w, "partial_rotary_factor") + " = " + format_number(p.partial_rotary_factor) +
                               " (HF rule)");
    p.partial_rotary_factor = *top;
  }
  // Phi-3 style: a top-level original_max_position_embeddings overrides the dict (HF v5).
  if (rope_type_traits(p.type).needs_original_max) {
    if (auto top = jf::integer(c.model, "original_max_position_embeddings", model_where)) {
      if (p.original_max_position_embeddings && *p.original_max_position_embeddings != *top)
        c.out.warnings.push_back(c.prefix + "original_max_position_embeddings = " + std::to_string(*top) +
                                 " overrides " + jf::path(w, "original_max_position_embeddings") + " = " +
                                 std::to_string(*p.original_max_position_embeddings) + " (HF rule)");
      p.original_max_position_embeddings = *top;
    } else if (!p.original_max_position_embeddings && p.max_position_embeddings) {
      c.out.notes.push_back("original_max_position_embeddings absent: max_position_embeddings = " +
                            std::to_string(*p.max_position_embeddings) + " (HF's default)");
    }
  }
}

// HunYuanVLTextConfig._normalize_mrope_section_alias: the legacy xdrope_section is mrope_section;
// with both, HF raises ValueError unless they hold the same values. Either way the sections are
// XD-RoPE's (_validate_mrope_section then checks integers summing to head_dim // 2).
void read_xdrope_section(const json& dict, const std::string& w, const RopeDictContext& c, RopeParams& p) {
  if (dict.contains("xdrope_section") && !dict["xdrope_section"].is_null()) {
    std::vector<int> legacy;
    rope_field_json::read(dict, "xdrope_section", w, rope_field_json::row_of(p, p.mrope_section), legacy);
    if (dict.contains("mrope_section") && !dict["mrope_section"].is_null() && legacy != p.mrope_section)
      throw Error(jf::path(w, "mrope_section") + " " + jf::describe(dict["mrope_section"]) + " and legacy " +
                  jf::path(w, "xdrope_section") + " " + jf::describe(dict["xdrope_section"]) +
                  " differ (HF raises ValueError: 'contains both mrope_section and legacy xdrope_section, but they "
                  "differ'); keep one");
    p.mrope_section = legacy;
  }
  p.mrope_xdrope = !p.mrope_section.empty();
  if (!p.mrope_xdrope)
    c.out.warnings.push_back(jf::path(w, "xdrope_section") + " (or mrope_section) is absent or empty: HF's get_rope_index "
                             "raises for fewer than 3 axes; posenc reads the model as 1-D RoPE (text positions only)");
}

}  // namespace

const std::vector<std::string>& rope_dict_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    RopeParams p;
    for_each_field(p, [&](const RopeField& row, const auto&) {
      for_each_dict_key(row, [&](const std::string& key) { out.push_back(key); });
    });
    return out;
  }();
  return keys;
}

void read_rope_dict(const json& dict, const std::string& w, const RopeDictContext& c, RopeParams& p) {
  const auto& known = rope_dict_keys();
  for (auto it = dict.begin(); it != dict.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    if (c.xdrope && it.key() == "xdrope_section") continue;  // read below as mrope_section
    if (c.ignored_keys && std::string(c.ignored_keys).find("|" + it.key() + "|") != std::string::npos) {
      c.out.notes.push_back(jf::path(w, it.key()) + " ignored: HF's config skips it (ignore_keys_at_rope_validation) "
                            "and its model never reads it");
      continue;
    }
    const std::string msg = jf::path(w, it.key()) + " is not a key any rope type knows (value " +
                            jf::describe(it.value()) + ")" + jf::did_you_mean(it.key(), known) +
                            "; known keys: " + joined(known);
    if (!c.lenient) throw Error(msg + " (--lenient turns unknown keys into warnings)");
    c.out.warnings.push_back(msg + "; ignored (--lenient)");
  }
  p.type = resolve_type(dict, w, c, rope_field_json::row_of(p, p.type));

  for (auto it = dict.begin(); it != dict.end(); ++it) {  // in the dict's order, as the warnings were
    if (it.value().is_null()) continue;
    for_each_field(p, [&](const RopeField& row, const auto&) {
      for_each_dict_key(row, [&](const std::string& key) {
        if (key == it.key() && !row.read_by.has(p.type))
          c.out.warnings.push_back(jf::path(w, key) + " is not used by rope_type '" + to_string(p.type) + "' (ignored)");
      });
    });
  }

  const char* theta_key = rope_field_json::row_of(p, p.theta).name;  // also a top-level key
  if (auto theta = c.own_theta ? std::nullopt : jf::number(dict, theta_key, w)) {
    const std::string model_where = c.prefix.empty() ? "" : c.prefix.substr(0, c.prefix.size() - 1);
    if (auto top = jf::number(c.model, theta_key, model_where); top && *top != *theta)
      c.out.warnings.push_back(jf::path(w, theta_key) + " = " + format_number(*theta) + " overrides " + c.prefix +
                               theta_key + " = " + format_number(*top));
  }
  for_each_field(p, [&](const RopeField& row, auto& member) {
    using T = std::decay_t<decltype(member)>;
    if constexpr (!std::is_same_v<T, RopeType>) {  // the type: resolve_type above
      if (row.home == FieldHome::kRopeDict && row.read_by.has(p.type) && dict.contains(row.name))
        rope_field_json::read(dict, row.name, w, row, member);
    }
  });
  if (c.xdrope) read_xdrope_section(dict, w, c, p);
  apply_hf_rules(dict, w, c, p);
}

}  // namespace posenc
