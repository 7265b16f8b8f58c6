#include "json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "posenc/error.h"

namespace posenc::json_fields {
namespace {

const json* find(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void wrong_type(const std::string& where, const std::string& key, const json& v,
                             const char* expected) {
  throw Error(path(where, key) + " must be " + expected + ", got " + describe(v));
}

// 2^53: every integer up to here is exact in a double; anything larger in a config is an error.
constexpr double kMaxExactInteger = 9007199254740992.0;

std::optional<std::int64_t> as_integer(const json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxExactInteger))
      return std::nullopt;
    return v.get<std::int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) <= kMaxExactInteger)
      return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

}  // namespace

namespace {

constexpr std::size_t kDescribeChars = 60;  // what an error message echoes of a bad value
constexpr int kDescribeDepth = 3;           // nesting shown before "..."

// A compact, bounded rendering: stops at kDescribeChars and at kDescribeDepth levels, so a bad
// value of any size or depth costs a few dozen characters (json::dump() would render it all,
// recursing once per level).
void render(const json& v, int depth, std::string& out) {
  if (out.size() > kDescribeChars) return;
  if (!v.is_array() && !v.is_object()) {
    out += v.dump();
    return;
  }
  const bool array = v.is_array();
  out += array ? '[' : '{';
  if (depth >= kDescribeDepth && !v.empty()) {
    out += "...";
  } else {
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= kDescribeChars; ++it) {
      if (!first) out += ',';
      first = false;
      if (!array) out += json(it.key()).dump() + ':';
      render(it.value(), depth + 1, out);
    }
  }
  out += array ? ']' : '}';
}

}  // namespace

std::string describe(const json& v) {
  std::string text;
  render(v, 0, text);
  if (text.size() > kDescribeChars) text = text.substr(0, kDescribeChars - 3) + "...";
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean " + text;
    case json::value_t::string: return "string " + text;
    case json::value_t::array: return "array " + text;
    case json::value_t::object: return "object " + text;
    default: return "number " + text;
  }
}

std::string path(const std::string& where, const std::string& key) {
  // Keys come from the file too: an unknown key of a megabyte is named in a few dozen characters.
  const std::string shown = key.size() > kDescribeChars ? key.substr(0, kDescribeChars - 3) + "..." : key;
  return where.empty() ? shown : where + "." + shown;
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

bool is_tail(const std::string& key, const std::string& name) {
  return name.size() > key.size() && name.compare(name.size() - key.size(), key.size(), key) == 0 &&
         name[name.size() - key.size() - 1] == '_';
}

}  // namespace

std::string did_you_mean(const std::string& key, const std::vector<std::string>& names) {
  if (key.size() > 64) return "";  // a key from a file: no quadratic work on a megabyte
  const std::size_t most = std::max<std::size_t>(1, key.size() / 3);
  const std::string* best = nullptr;
  std::size_t best_distance = most + 1;
  for (const auto& name : names) {
    const std::size_t d = is_tail(key, name) ? 0 : edit_distance(key, name);
    if (d < best_distance) best = &name, best_distance = d;
  }
  return best ? " (did you mean '" + *best + "'?)" : "";
}

namespace {

// The value at obj[key] as T when `is` accepts it, nullopt when absent, wrong_type naming `expected`
// otherwise.
template <class T, class Is>
std::optional<T> typed(const json& obj, const std::string& key, const std::string& where, Is is, const char* expected) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!is(*v)) wrong_type(where, key, *v, expected);
  return v->get<T>();
}

}  // namespace

std::optional<double> number(const json& obj, const std::string& key, const std::string& where) {
  return typed<double>(obj, key, where, [](const json& v) { return v.is_number(); }, "a number");
}

std::optional<std::int64_t> integer(const json& obj, const std::string& key, const std::string& where) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  auto i = v->is_number() ? as_integer(*v) : std::nullopt;
  if (!i) wrong_type(where, key, *v, "an integer (at most 2^53)");
  return i;
}

std::optional<std::int64_t> integer_in(const json& obj, const std::string& key, const std::string& where,
                                       std::int64_t lo, std::int64_t hi) {
  const auto v = integer(obj, key, where);
  if (v && (*v < lo || *v > hi))
    throw Error(path(where, key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                std::to_string(*v));
  return v;
}

std::optional<double> number_in(const json& obj, const std::string& key, const std::string& where, double lo, double hi) {
  const auto v = number(obj, key, where);
  if (v && !(*v >= lo && *v <= hi))
    throw Error(path(where, key) + " must be a finite number " +
                (hi == std::numeric_limits<double>::max() ? ">= " + format_number(lo)
                                                          : "in [" + format_number(lo) + ", " + format_number(hi) + "]") +
                ", got " + format_number(*v));
  return v;
}

std::optional<double> positive_number(const json& obj, const std::string& key, const std::string& where) {
  const auto v = number(obj, key, where);
  // std::isnormal: a subnormal (1e-320) is > 0 but its reciprocal or square root's reciprocal
  // is inf or far past float32 (issue 33, spec-023).
  if (v && !(*v > 0 && std::isnormal(*v)))
    throw Error(path(where, key) + " must be a finite number > 0 (and not subnormal), got " + format_number(*v));
  return v;
}

std::optional<std::vector<std::int64_t>> integer_list_in(const json& obj, const std::string& key, const std::string& where,
                                                         std::int64_t lo, std::int64_t hi) {
  const auto list = integer_list(obj, key, where);
  for (std::size_t i = 0; list && i < list->size(); ++i)
    if ((*list)[i] < lo || (*list)[i] > hi)
      throw Error(path(where, key) + " entry " + std::to_string(i) + " is " + std::to_string((*list)[i]) +
                  "; expected a layer index in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return list;
}

std::optional<bool> boolean(const json& obj, const std::string& key, const std::string& where) {
  return typed<bool>(obj, key, where, [](const json& v) { return v.is_boolean(); }, "true or false");
}

std::optional<std::string> string(const json& obj, const std::string& key, const std::string& where) {
  return typed<std::string>(obj, key, where, [](const json& v) { return v.is_string(); }, "a string");
}

std::optional<std::vector<double>> number_list(const json& obj, const std::string& key,
                                               const std::string& where) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_array()) wrong_type(where, key, *v, "an array of numbers");
  std::vector<double> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_number()) wrong_type(where, key + "[" + std::to_string(i) + "]", e, "a number");
    out.push_back(e.get<double>());
  }
  return out;
}

std::optional<std::vector<std::int64_t>> integer_list(const json& obj, const std::string& key,
                                                      const std::string& where) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_array()) wrong_type(where, key, *v, "an array of integers");
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    auto n = e.is_number() ? as_integer(e) : std::nullopt;
    if (!n) wrong_type(where, key + "[" + std::to_string(i) + "]", e, "an integer");
    out.push_back(*n);
  }
  return out;
}

const json* object(const json& obj, const std::string& key, const std::string& where) {
  const json* v = find(obj, key);
  if (!v) return nullptr;
  if (!v->is_object()) wrong_type(where, key, *v, "an object or null");
  return v;
}

}  // namespace posenc::json_fields
