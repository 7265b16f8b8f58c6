#include "posenc_torch/model_config.h"

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

double get_double(const json& j, const std::string& key) {
  const json& v = at(j, key, "");
  if (!v.is_number()) wrong("", key, "a number", v);
  return v.get<double>();
}

bool get_bool(const json& j, const std::string& key, const std::string& where = "") {
  const json& v = at(j, key, where);
  if (!v.is_boolean()) wrong(where, key, "true or false", v);
  return v.get<bool>();
}

std::string get_string(const json& j, const std::string& key) {
  const json& v = at(j, key, "");
  if (!v.is_string()) wrong("", key, "a string", v);
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

// The fields both versions share, under the same names.
void read_common(const json& j, ModelConfig& c) {
  c.vocab_size = get_int(j, "vocab_size");
  c.d_model = get_int(j, "d_model");
  c.n_layers = get_int(j, "n_layers");
  c.n_heads = get_int(j, "n_heads");
  c.n_kv_heads = get_int(j, "n_kv_heads");
  c.d_ff = get_int(j, "d_ff");
  c.dropout = get_double(j, "dropout");
  c.causal = get_bool(j, "causal");
  c.embed_scale = get_bool(j, "embed_scale");
  c.scheme = named<Scheme>(get_string(j, "scheme"));
  c.fusion = named<Fusion>(get_string(j, "fusion"));
  c.pe_dim = get_int(j, "pe_dim");
  c.learned_positions = get_int(j, "learned_positions");
  c.deberta_buckets = get_int(j, "deberta_buckets");
  c.deberta_max_relative = get_int(j, "deberta_max_relative");
  c.xl_clamp_len = get_int(j, "xl_clamp_len");
}

// Version 1 (no "version" key): five rope fields; T5 buckets bidirectional exactly when the
// model was not causal.
ModelConfig read_v1(const json& j) {
  only_known(j, {"vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "dropout", "causal",
                 "embed_scale", "scheme", "fusion", "pe_dim", "learned_positions", "rope_type", "rope_theta",
                 "rope_factor", "rope_max_position_embeddings", "rope_original_max_position_embeddings",
                 "t5_num_buckets", "t5_max_distance", "deberta_buckets", "deberta_max_relative", "xl_clamp_len"},
             "");
  ModelConfig c;
  read_common(j, c);
  json rope = {{"type", get_string(j, "rope_type")}, {"theta", get_double(j, "rope_theta")}};
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
    throw Error(what + ": '" + name + "' is not a language-model scheme; use: nope, sinusoidal, learned, rope, alibi, t5, xl, deberta");
  return *s;
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
  if (scheme == Scheme::kRope && head_dim() % 2 != 0)
    throw Error("RoPE needs an even head_dim, got " + std::to_string(head_dim()));
  if (xl_clamp_len < 0 || xl_mem_len < 0) throw Error("xl_clamp_len and xl_mem_len must be >= 0");
  if (xl_mem_len > 0 && scheme != Scheme::kXl)
    throw Error("xl_mem_len " + std::to_string(xl_mem_len) + " is for the xl scheme only, got scheme '" +
                to_string(scheme) + "'");
}

std::string config_to_json(const ModelConfig& c) {
  const json j = {{"format", "posenc-model-config"},
                  {"version", kModelConfigVersion},
                  {"vocab_size", c.vocab_size},
                  {"d_model", c.d_model},
                  {"n_layers", c.n_layers},
                  {"n_heads", c.n_heads},
                  {"n_kv_heads", c.n_kv_heads},
                  {"d_ff", c.d_ff},
                  {"dropout", c.dropout},
                  {"causal", c.causal},
                  {"embed_scale", c.embed_scale},
                  {"scheme", to_string(c.scheme)},
                  {"fusion", to_string(c.fusion)},
                  {"pe_dim", c.pe_dim},
                  {"rope", json::parse(rope_params_to_json(c.rope))},
                  {"learned_positions", c.learned_positions},
                  {"t5", {{"num_buckets", c.t5.num_buckets}, {"max_distance", c.t5.max_distance},
                          {"bidirectional", c.t5.bidirectional}}},
                  {"deberta_buckets", c.deberta_buckets},
                  {"deberta_max_relative", c.deberta_max_relative},
                  {"xl_clamp_len", c.xl_clamp_len},
                  {"xl_mem_len", c.xl_mem_len}};
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
  if (version != kModelConfigVersion)
    throw Error("model config version " + std::to_string(version) + " is not one this posenc reads (it reads 1 and " +
                std::to_string(kModelConfigVersion) + "); a newer posenc wrote it");
  if (get_string(j, "format") != "posenc-model-config") throw Error("model config: format must be 'posenc-model-config'");
  only_known(j, {"format", "version", "vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "dropout",
                 "causal", "embed_scale", "scheme", "fusion", "pe_dim", "rope", "learned_positions", "t5",
                 "deberta_buckets", "deberta_max_relative", "xl_clamp_len", "xl_mem_len"},
             "");
  ModelConfig c;
  read_common(j, c);
  c.rope = rope_params_from_json(at(j, "rope", "").dump(), "rope");
  const json& t5 = at(j, "t5", "");
  if (!t5.is_object()) wrong("", "t5", "an object", t5);
  only_known(t5, {"num_buckets", "max_distance", "bidirectional"}, "t5.");
  c.t5 = {get_int(t5, "num_buckets", "t5."), get_int(t5, "max_distance", "t5."), get_bool(t5, "bidirectional", "t5.")};
  c.xl_mem_len = get_int(j, "xl_mem_len");
  return c;
}

}  // namespace posenc::torch_layer
