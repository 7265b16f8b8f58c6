#include "posenc/rope_type.h"

#include <array>
#include <utility>

namespace posenc {
namespace {

constexpr std::array<std::pair<RopeType, const char*>, 9> kNames = {{
    {RopeType::kDefault, "default"},
    {RopeType::kLinear, "linear"},
    {RopeType::kNtk, "ntk"},
    {RopeType::kDynamic, "dynamic"},
    {RopeType::kYarn, "yarn"},
    {RopeType::kNtkByParts, "ntk_by_parts"},
    {RopeType::kLlama3, "llama3"},
    {RopeType::kLongRope, "longrope"},
    {RopeType::kProportional, "proportional"},
}};

}  // namespace

const char* to_string(RopeType type) {
  for (const auto& [t, name] : kNames)
    if (t == type) return name;
  return "?";
}

std::optional<RopeType> rope_type_from_name(std::string_view name) {
  for (const auto& [t, n] : kNames)
    if (name == n) return t;
  return std::nullopt;
}

std::string rope_type_names() {
  std::string out;
  for (const auto& entry : kNames) {
    if (!out.empty()) out += ", ";
    out += entry.second;
  }
  return out;
}

}  // namespace posenc
