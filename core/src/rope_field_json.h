// One RopeParams field to and from JSON, by the member's C++ type (private to the core library).
// Used by the posenc record (rope_params_json.cc) and the config reader's rope dict
// (rope_dict.cc), both iterating for_each_field (rope_fields.h), so a field's JSON form is
// written once per C++ type, never once per field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "json_fields.h"
#include "posenc/error.h"
#include "posenc/rope_fields.h"

namespace posenc::rope_field_json {

using json_fields::json;

// An integer read for `row`, checked against its range: "rope.head_dim must be in [0, 65536], got -1".
inline int checked_int(std::int64_t v, const RopeField& row, const std::string& what) {
  if (v < row.min || v > row.max)
    throw Error(what + " must be in [" + std::to_string(row.min) + ", " + std::to_string(row.max) + "], got " +
                std::to_string(v));
  return static_cast<int>(v);
}

// Reads obj[key] into the member. Absent or null: a plain member keeps its value, an optional
// one is reset (HF: null means "not set"). A wrong JSON type is an Error naming where.key.
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField&, double& v) {
  if (auto x = json_fields::number(obj, key, where)) v = *x;
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField&,
                 std::optional<double>& v) {
  v = json_fields::number(obj, key, where);
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField& row, int& v) {
  if (auto x = json_fields::integer(obj, key, where)) v = checked_int(*x, row, json_fields::path(where, key));
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField& row,
                 std::optional<int>& v) {
  const auto x = json_fields::integer(obj, key, where);
  v = x ? std::optional<int>(checked_int(*x, row, json_fields::path(where, key))) : std::nullopt;
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField&,
                 std::optional<std::int64_t>& v) {
  v = json_fields::integer(obj, key, where);
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField&, bool& v) {
  if (auto x = json_fields::boolean(obj, key, where)) v = *x;
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField&,
                 std::vector<double>& v) {
  if (auto x = json_fields::number_list(obj, key, where)) v = std::move(*x);
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField& row,
                 std::vector<int>& v) {
  const auto x = json_fields::integer_list(obj, key, where);
  if (!x) return;
  v.clear();
  for (std::int64_t e : *x) v.push_back(checked_int(e, row, json_fields::path(where, key) + " entries"));
}
inline void read(const json& obj, const std::string& key, const std::string& where, const RopeField&, RopeType& v) {
  const auto name = json_fields::string(obj, key, where);
  if (!name) return;
  const auto parsed = try_from_name<RopeType>(*name);
  if (!parsed)
    throw Error(json_fields::path(where, key) + ": unknown rope type '" + *name +
                "' (known: " + enum_names_joined<RopeType>(", ") + ")");
  v = *parsed;
}

// The member as JSON; an unset optional is null (the record leaves those out).
template <class T>
json value(const T& v) {
  return json(v);
}
template <class T>
json value(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
inline json value(const RopeType& v) { return json(to_string(v)); }

// The table's row of one member of RopeParams (found by address), so code that must treat a
// field specially (the type, the base) still takes its keys from the table, not by hand.
template <class M>
RopeField row_of(const RopeParams& p, const M& target) {
  std::optional<RopeField> found;
  for_each_field(p, [&](const RopeField& row, const auto& member) {
    if constexpr (std::is_same_v<std::decay_t<decltype(member)>, M>)
      if (&member == &target) found = row;
  });
  if (!found) throw Error("internal: a RopeParams member without a row in the field table");
  return *found;
}

}  // namespace posenc::rope_field_json
