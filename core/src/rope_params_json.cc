#include "posenc/rope_params_json.h"

#include <set>

#include "json_fields.h"
#include "posenc/error.h"

namespace posenc {
namespace {

using json_fields::json;

template <typename T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
void take(std::optional<T> v, T& field) {
  if (v) field = *v;
}

int to_int(std::int64_t x, const std::string& where) {
  if (x < -2147483647 || x > 2147483647) throw Error(where + " = " + std::to_string(x) + " is out of int range");
  return static_cast<int>(x);
}

std::vector<int> to_ints(const std::vector<std::int64_t>& v, const std::string& where) {
  std::vector<int> out;
  for (std::int64_t x : v) {
    out.push_back(to_int(x, where));
  }
  return out;
}

}  // namespace

std::string rope_params_to_json(const RopeParams& p) {
  json j = {{"type", to_string(p.type)},
            {"head_dim", p.head_dim},
            {"partial_rotary_factor", p.partial_rotary_factor},
            {"theta", p.theta},
            {"beta_fast", p.beta_fast},
            {"beta_slow", p.beta_slow},
            {"truncate", p.truncate},
            {"short_factor", p.short_factor},
            {"long_factor", p.long_factor},
            {"mrope_section", p.mrope_section},
            {"mrope_interleaved", p.mrope_interleaved}};
  put(j, "rotary_dim", p.rotary_dim);
  put(j, "factor", p.factor);
  put(j, "max_position_embeddings", p.max_position_embeddings);
  put(j, "original_max_position_embeddings", p.original_max_position_embeddings);
  put(j, "attention_factor", p.attention_factor);
  put(j, "mscale", p.mscale);
  put(j, "mscale_all_dim", p.mscale_all_dim);
  put(j, "low_freq_factor", p.low_freq_factor);
  put(j, "high_freq_factor", p.high_freq_factor);
  put(j, "llama_4_scaling_beta", p.llama_4_scaling_beta);
  return j.dump();
}

RopeParams rope_params_from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(where + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(where + " must be an object, got " + json_fields::describe(j));
  static const std::set<std::string> known = {
      "type", "head_dim", "partial_rotary_factor", "rotary_dim", "theta", "factor", "max_position_embeddings",
      "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
      "truncate", "low_freq_factor", "high_freq_factor", "short_factor", "long_factor", "mrope_section",
      "mrope_interleaved", "llama_4_scaling_beta"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key())) throw Error("unknown key " + json_fields::path(where, it.key()));
  using namespace json_fields;
  RopeParams p;
  const auto type = string(j, "type", where);
  if (!type) throw Error(path(where, "type") + " is required");
  const auto parsed = try_from_name<RopeType>(*type);
  if (!parsed)
    throw Error(path(where, "type") + ": unknown rope type '" + *type + "' (known: " + enum_names_joined<RopeType>(", ") + ")");
  p.type = *parsed;
  if (const auto v = integer(j, "head_dim", where)) p.head_dim = to_int(*v, path(where, "head_dim"));
  take(number(j, "partial_rotary_factor", where), p.partial_rotary_factor);
  if (const auto v = integer(j, "rotary_dim", where)) p.rotary_dim = to_int(*v, path(where, "rotary_dim"));
  take(number(j, "theta", where), p.theta);
  p.factor = number(j, "factor", where);
  p.max_position_embeddings = integer(j, "max_position_embeddings", where);
  p.original_max_position_embeddings = integer(j, "original_max_position_embeddings", where);
  p.attention_factor = number(j, "attention_factor", where);
  take(number(j, "beta_fast", where), p.beta_fast);
  take(number(j, "beta_slow", where), p.beta_slow);
  p.mscale = number(j, "mscale", where);
  p.mscale_all_dim = number(j, "mscale_all_dim", where);
  take(boolean(j, "truncate", where), p.truncate);
  p.low_freq_factor = number(j, "low_freq_factor", where);
  p.high_freq_factor = number(j, "high_freq_factor", where);
  take(number_list(j, "short_factor", where), p.short_factor);
  take(number_list(j, "long_factor", where), p.long_factor);
  if (const auto v = integer_list(j, "mrope_section", where)) p.mrope_section = to_ints(*v, path(where, "mrope_section"));
  take(boolean(j, "mrope_interleaved", where), p.mrope_interleaved);
  p.llama_4_scaling_beta = number(j, "llama_4_scaling_beta", where);
  return p;
}

}  // namespace posenc
