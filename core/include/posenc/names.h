// The names users type and read for posenc's enums: one table per enum, declared beside the enum
// (a specialisation of EnumNames, at namespace posenc scope), read by the CLI's flags, the torch
// layer's saved configs, the lab and the Python module alike, so a value is spelled the same
// everywhere:
//
//   POSENC_ENUM_NAMES(DType, "dtype", {DType::kF32, "f32"}, {DType::kBF16, "bf16"}, ...);
//
// The first row of a value is its name (to_string); later rows of the same value are aliases
// that from_name also accepts (older spellings that saved files and scripts still use).
//
// Each table also registers its enum in named_enums() when its header is part of a program, so
// a test can check every named enum without a hand-kept list.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/error.h"

namespace posenc {

template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

template <typename E>
struct EnumNames;  // specialised beside each named enum

// One named enum of the program: its type as written in POSENC_ENUM_NAMES, its `what`, and a
// check of its table (check_enum_names below).
struct NamedEnum {
  const char* type;  // "RopeType", "torch_layer::Fusion"
  const char* what;
  std::string (*check)();
};

inline std::vector<NamedEnum>& named_enums() {
  static std::vector<NamedEnum> all;
  return all;
}

template <typename E>
std::string check_enum_names();

template <typename E>
bool register_named_enum(const char* type) {
  named_enums().push_back({type, EnumNames<E>::what, &check_enum_names<E>});
  return true;
}

// `what` names the value in errors ("dtype must be one of ..."); the rest are NamedValue rows.
#define POSENC_ENUM_NAMES(E, WHAT, ...)                                      \
  template <>                                                                \
  struct EnumNames<E> {                                                      \
    static constexpr const char* what = WHAT;                                \
    static constexpr NamedValue<E> table[] = {__VA_ARGS__};                  \
    static inline const bool registered = register_named_enum<E>(#E);        \
  }

// Words that name the same layout in two enums (RoPE's channel pairs, the sinusoidal table's
// sin/cos columns), spelled once.
namespace layout_names {
inline constexpr char kHalfSplit[] = "half_split";
inline constexpr char kInterleaved[] = "interleaved";
}  // namespace layout_names

template <typename E, typename = void>
struct has_enum_names : std::false_type {};
template <typename E>
struct has_enum_names<E, std::void_t<decltype(EnumNames<E>::table)>> : std::true_type {};

// The canonical name of v ("?" for a value outside the table, which a valid enum never is).
template <typename E, typename = std::enable_if_t<has_enum_names<E>::value>>
const char* to_string(E v) {
  for (const auto& row : EnumNames<E>::table)
    if (row.value == v) return row.name;
  return "?";
}

// The value named `name` (a canonical name or an alias), or nullopt.
template <typename E>
std::optional<E> try_from_name(std::string_view name) {
  for (const auto& row : EnumNames<E>::table)
    if (name == row.name) return row.value;
  return std::nullopt;
}

// Canonical names in table order, without aliases.
template <typename E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (const auto& row : EnumNames<E>::table)
    if (std::string_view(to_string(row.value)) == row.name) out.emplace_back(row.name);
  return out;
}

// The aliases of E's table, each with the name it stands for: "mrope = default, su = longrope"
// (empty when E has none). Help text shows them, since enum_names_joined lists canonical names.
template <typename E>
std::string enum_aliases_joined() {
  std::string out;
  for (const auto& row : EnumNames<E>::table)
    if (std::string_view(to_string(row.value)) != row.name)
      out += (out.empty() ? "" : ", ") + std::string(row.name) + " = " + to_string(row.value);
  return out;
}

// "f32|bf16|f16"
template <typename E>
std::string enum_names_joined(const char* separator = "|") {
  std::string out;
  for (const auto& n : enum_names<E>()) out += (out.empty() ? "" : separator) + n;
  return out;
}

// The value named `name`; anything else is an Error naming the value and the names allowed:
// "layout must be one of half_split|interleaved|deepseek_v3, got 'neo'".
template <typename E>
E from_name(std::string_view name) {
  if (auto v = try_from_name<E>(name)) return *v;
  throw Error(std::string(EnumNames<E>::what) + " must be one of " + enum_names_joined<E>() + ", got '" +
              std::string(name) + "'");
}

// Empty when the table of E is sound, else what is wrong: every name (canonical or alias) must
// read back to its own value, so no name serves two values; and the values must run 0, 1, ...
// without a gap (a gap is a value without a name).
template <typename E>
std::string check_enum_names() {
  std::string problems;
  long long highest = -1;
  std::vector<long long> seen;
  for (const auto& row : EnumNames<E>::table) {
    const auto v = try_from_name<E>(row.name);
    if (!v || *v != row.value)
      problems += std::string("'") + row.name + "' reads back to another value; ";
    const long long u = static_cast<long long>(row.value);
    if (u > highest) highest = u;
    bool known = false;
    for (long long s : seen) known = known || s == u;
    if (!known) seen.push_back(u);
  }
  if (static_cast<long long>(seen.size()) != highest + 1)
    problems += "values 0.." + std::to_string(highest) + " have " + std::to_string(seen.size()) + " names, a gap; ";
  return problems;
}

}  // namespace posenc
