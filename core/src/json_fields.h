// Typed, strict reads of config.json fields (private to the core library).
//
// Each getter returns nullopt for a missing key or a JSON null (HF treats both as "not set"),
// the value for the right JSON type, and throws posenc::Error naming `where.key`, the value it
// found and the type it expected otherwise. Integers are accepted where floats are expected
// (`"rope_theta": 500000`), integral floats where integers are (`4096.0`), never booleans for
// numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::json_fields {

using nlohmann::json;

// A short description of a JSON value for error messages: `string "abc"`, `number 1.5`, ...
std::string describe(const json& value);

// "rope_scaling" + "factor" -> "rope_scaling.factor"; "" + "factor" -> "factor".
std::string path(const std::string& where, const std::string& key);

// " (did you mean 'head_dim'?)" for a key that is a misspelling of one of names (edit distance
// at most a third of its length, at least 1) or one of its '_'-separated tails ("dim" for
// "head_dim"); "" when none is close.
std::string did_you_mean(const std::string& key, const std::vector<std::string>& names);

std::optional<double> number(const json& obj, const std::string& key, const std::string& where);
std::optional<std::int64_t> integer(const json& obj, const std::string& key, const std::string& where);
// The same reads with a range: a value outside [lo, hi] is a posenc::Error naming where.key, the
// range and the value (issue 33: per-layer keys such as qk_nope_head_dim or sliding_window made
// golden write out of bounds or spec print nonsense). number_in also refuses NaN and infinities.
std::optional<std::int64_t> integer_in(const json& obj, const std::string& key, const std::string& where,
                                       std::int64_t lo, std::int64_t hi);
// A finite number > 0 (a divisor, a scale): zero, negatives, subnormals, NaN and infinities are errors.
std::optional<double> positive_number(const json& obj, const std::string& key, const std::string& where);
std::optional<double> number_in(const json& obj, const std::string& key, const std::string& where, double lo, double hi);
// Every entry of an integer list in [lo, hi] (layer indices), the same error per entry.
std::optional<std::vector<std::int64_t>> integer_list_in(const json& obj, const std::string& key, const std::string& where,
                                                         std::int64_t lo, std::int64_t hi);
std::optional<bool> boolean(const json& obj, const std::string& key, const std::string& where);
std::optional<std::string> string(const json& obj, const std::string& key, const std::string& where);
std::optional<std::vector<double>> number_list(const json& obj, const std::string& key,
                                               const std::string& where);
std::optional<std::vector<std::int64_t>> integer_list(const json& obj, const std::string& key,
                                                      const std::string& where);
// The object at key, or nullopt for missing/null; throws for any other type.
const json* object(const json& obj, const std::string& key, const std::string& where);

}  // namespace posenc::json_fields
