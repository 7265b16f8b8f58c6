#include "posenc_torch/model_config.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>
#include <set>

#include "posenc/error.h"
#include "posenc/rope_params_json.h"

namespace posenc::torch_layer {
namespace {

using nlohmann::json;

// Strict reads: the key must be there with the right JSON type.
const json& at(const json& j, const std::string& key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) throw Error("model config: " + where + key + " is missing");
  return *it;
}

[[noreturn]] void wrong(const std::string& where, const std::string& key, const char* expected, const json& v) {
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  throw Error("model config: " + where + key + " must be " + expected + ", got " + shown);
}

int get_int(const json& j, const std::string& key, const std::string& where = "") {
  const json& v = at(j, key, where);
  if (!v.is_number_integer() || v.get<std::int64_t>() < -2147483647 || v.get<std::int64_t>() > 2147483647)
    wrong(where, key, "an integer", v);
  return v.get<int>();
}

double get_double(const json& j, const std::string& key, const std::string& where = "") {
  const json& v = at(j, key, where);
  if (!v.is_number()) wrong(where, key, "a number", v);
  return v.get<double>();
}

bool get_bool(const json& j, const std::string& key, const std::string& where = "") {
  const json& v = at(j, key, where);
  if (!v.is_boolean()) wrong(where, key, "true or false", v);
  return v.get<bool>();
}

std::string get_string(const json& j, const std::string& key, const std::string& where = "") {
  const json& v = at(j, key, where);
  if (!v.is_string()) wrong(where, key, "a string", v);
  return v.get<std::string>();
}

void only_known(const json& j, const std::set<std::string>& known, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key())) throw Error("model config: unknown key " + where + it.key());
}

template <typename E>
E named(const std::string& name) {
  try {
    return from_name<E>(name);
  } catch (const Error& e) {
    throw Error(std::string("model config: ") + e.what());
  }
}

// One member from j[key] (required, of the member's JSON type).
void read_member(const json& j, const std::string& key, const std::string& where, int& v) { v = get_int(j, key, where); }
void read_member(const json& j, const std::string& key, const std::string& where, double& v) {
  v = get_double(j, key, where);
}
void read_member(const json& j, const std::string& key, const std::string& where, bool& v) { v = get_bool(j, key, where); }
void read_member(const json& j, const std::string& key, const std::string& where, Scheme& v) {
  v = named<Scheme>(get_string(j, key, where));
}
void read_member(const json& j, const std::string& key, const std::string& where, Fusion& v) {
  v = named<Fusion>(get_string(j, key, where));
}
void read_member(const json& j, const std::string& key, const std::string& where, RopeParams& v) {
  v = rope_params_from_json(at(j, key, where).dump(), where + key);
}
void read_member(const json& j, const std::string& key, const std::string& where, T5BucketParams& v);

// Every row of `c`'s table that `version` has, each key required; any other key is an error.
template <class C>
void read_fields(const json& j, int version, const std::string& where, C& c, std::set<std::string> known = {}) {
  for_each_field(c, [&](const ConfigField& row, auto&) {
    if (row.since_version <= version) known.insert(row.name);
  });
  only_known(j, known, where);
  for_each_field(c, [&](const ConfigField& row, auto& member) {
    if (row.since_version <= version) read_member(j, row.name, where, member);
  });
}

void read_member(const json& j, const std::string& key, const std::string& where, T5BucketParams& v) {
  const json& t5 = at(j, key, where);
  if (!t5.is_object()) wrong(where, key, "an object", t5);
  read_fields(t5, kModelConfigVersion, where + key + ".", v);
}

json member_json(const RopeParams& v) { return json::parse(rope_params_to_json(v)); }
json member_json(const T5BucketParams& v);
json member_json(Scheme v) { return to_string(v); }
json member_json(Fusion v) { return to_string(v); }
template <class T>
json member_json(const T& v) {
  return v;
}

template <class C>
json fields_json(const C& c) {
  json j = json::object();
  for_each_field(c, [&](const ConfigField& row, const auto& member) { j[row.name] = member_json(member); });
  return j;
}
json member_json(const T5BucketParams& v) { return fields_json(v); }

// Version 1 (no "version" key): five rope fields; T5 buckets bidirectional exactly when the
// model was not causal.
ModelConfig read_v1(const json& j) {
  ModelConfig c;
  read_fields(j, 1, "", c,
              {"rope_type", "rope_theta", "rope_factor", "rope_max_position_embeddings",
               "rope_original_max_position_embeddings", "t5_num_buckets", "t5_max_distance"});
  json rope = {{"rope_type", get_string(j, "rope_type")}, {"rope_theta", get_double(j, "rope_theta")}};
  if (j.contains("rope_factor")) rope["factor"] = j["rope_factor"];
  if (j.contains("rope_max_position_embeddings")) rope["max_position_embeddings"] = j["rope_max_position_embeddings"];
  if (j.contains("rope_original_max_position_embeddings"))
    rope["original_max_position_embeddings"] = j["rope_original_max_position_embeddings"];
  c.rope = rope_params_from_json(rope.dump(), "rope");
  c.t5 = {get_int(j, "t5_num_buckets"), get_int(j, "t5_max_distance"), !c.causal};
  return c;
}

}  // namespace

Scheme language_model_scheme(const std::string& name, const std::string& what) {
  const auto s = try_from_name<Scheme>(name);
  if (!s || *s == Scheme::kMrope)
    throw Error(what + ": '" + name + "' is not a language-model scheme; use: " + language_model_scheme_names());
  return *s;
}

std::string language_model_scheme_names(std::initializer_list<Scheme> also_excluded) {
  std::string out;
  for (const std::string& name : enum_names<Scheme>()) {
    const Scheme s = from_name<Scheme>(name);
    if (s == Scheme::kMrope || std::find(also_excluded.begin(), also_excluded.end(), s) != also_excluded.end()) continue;
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

void ModelConfig::validate() const {
  if (vocab_size < 1 || d_model < 1 || n_layers < 0 || n_heads < 1) throw Error("model sizes must be positive");
  if (d_model % n_heads != 0)
    throw Error("d_model " + std::to_string(d_model) + " must be divisible by n_heads " + std::to_string(n_heads));
  if (n_kv_heads < 0 || n_heads % kv_heads() != 0)
    throw Error("n_heads " + std::to_string(n_heads) + " must be a multiple of n_kv_heads " + std::to_string(kv_heads()));
  if (!(dropout >= 0 && dropout < 1)) throw Error("dropout must be in [0, 1)");
  if (fusion == Fusion::kConcat && (pe_dim < 0 || pe_dim >= d_model)) throw Error("pe_dim must be in [0, d_model)");
  if (scheme == Scheme::kMrope)
    throw Error("scheme 'mrope' needs (T, H, W) position ids, which a text-only TransformerLM does not have; "
                "use 'rope' (M-RoPE on text positions is plain RoPE)");
  if ((scheme == Scheme::kRope || scheme == Scheme::kXpos || scheme == Scheme::kRopeLearned) && head_dim() % 2 != 0)
    throw Error("RoPE needs an even head_dim, got " + std::to_string(head_dim()));
  if (!(xpos_scale_base > 0 && std::isfinite(xpos_scale_base)))
    throw Error("xpos_scale_base must be a finite number > 0, got " + format_number(xpos_scale_base) + " (Sun et al.'s is 512)");
  if (scheme == Scheme::kFox && !causal)
    throw Error("scheme 'fox' is causal: its bias sums the forget gates between a key and a later query (Lin et al. 2025)");
  if (cope_max_pos < 1 || cope_max_pos > (1 << 20))
    throw Error("cope_max_pos must be in [1, 2^20], got " + std::to_string(cope_max_pos));
  if (shaw_max_relative < 0 || shaw_max_relative > (1 << 20))
    throw Error("shaw_max_relative must be in [0, 2^20], got " + std::to_string(shaw_max_relative));
  if (scheme == Scheme::kSandwich && head_dim() % 2 != 0)
    throw Error("Sandwich's sinusoids need an even head_dim (its d'), got " + std::to_string(head_dim()));
  if (!(sinusoidal_base > 1 && std::isfinite(sinusoidal_base)))
    throw Error("sinusoidal_base must be a finite number > 1, got " + format_number(sinusoidal_base) + " (Vaswani et al.'s is 10000)");
  if (raw_index && scheme != Scheme::kSinusoidal)
    throw Error(std::string("raw_index replaces the sinusoidal table, got scheme '") + to_string(scheme) + "'");
  if (xl_clamp_len < 0 || xl_mem_len < 0) throw Error("xl_clamp_len and xl_mem_len must be >= 0");
  if (xl_mem_len > 0 && scheme != Scheme::kXl)
    throw Error("xl_mem_len " + std::to_string(xl_mem_len) + " is for the xl scheme only, got scheme '" +
                to_string(scheme) + "'");
}

std::string config_to_json(const ModelConfig& c) {
  json j = fields_json(c);
  j["format"] = "posenc-model-config";
  j["version"] = kModelConfigVersion;
  return j.dump();
}

ModelConfig config_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(std::string("model config is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw Error("model config must be a JSON object");
  if (!j.contains("version")) return read_v1(j);
  const int version = get_int(j, "version");
  if (version < 2 || version > kModelConfigVersion)
    throw Error("model config version " + std::to_string(version) + " is not one this posenc reads (it reads 1 to " +
                std::to_string(kModelConfigVersion) + ")" + (version > kModelConfigVersion ? "; a newer posenc wrote it" : ""));
  if (get_string(j, "format") != "posenc-model-config") throw Error("model config: format must be 'posenc-model-config'");
  ModelConfig c;
  read_fields(j, version, "", c, {"format", "version"});
  return c;
}

}  // namespace posenc::torch_layer
