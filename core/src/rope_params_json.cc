#include "posenc/rope_params_json.h"

#include <algorithm>

#include "json_fields.h"
#include "posenc/error.h"
#include "rope_field_json.h"

namespace posenc {

using json_fields::json;

std::string rope_params_to_json(const RopeParams& p) {
  json j = json::object();
  for_each_field(p, [&](const RopeField& row, const auto& member) {
    json v = rope_field_json::value(member);
    if (!v.is_null()) j[row.name] = std::move(v);  // unset optional fields are left out
  });
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
  RopeParams p;
  std::vector<std::string> names;  // the record's keys, current and legacy
  for_each_field(p, [&](const RopeField& row, const auto&) {
    names.push_back(row.name);
    if (row.record_legacy) names.push_back(row.record_legacy);
  });
  // Unknown keys first: a file from a newer posenc must not load with a field dropped.
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(names.begin(), names.end(), it.key()) == names.end())
      throw Error("unknown key " + json_fields::path(where, it.key()) + json_fields::did_you_mean(it.key(), names));
  for_each_field(p, [&](const RopeField& row, auto& member) {
    // A record written before the table names rope_type "type" and rope_theta "theta".
    const bool current = j.contains(row.name), legacy = row.record_legacy && j.contains(row.record_legacy);
    if (current && legacy)
      throw Error(json_fields::path(where, row.name) + " and " + json_fields::path(where, row.record_legacy) +
                  " are one field; give one");
    if (current || legacy) rope_field_json::read(j, current ? row.name : row.record_legacy, where, row, member);
  });
  // The type has no silent default: a record that does not name it is refused (Python's
  // keywords and HF's configs supply "default" where they mean it).
  const RopeField type = rope_field_json::row_of(p, p.type);
  if (!j.contains(type.name) && !(type.record_legacy && j.contains(type.record_legacy)))
    throw Error(json_fields::path(where, type.name) + " is required");
  return p;
}

}  // namespace posenc
