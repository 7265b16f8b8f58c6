#include "json_difference.h"

namespace posenc::lab {
namespace {

void collect(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, std::size_t limit,
             std::vector<JsonDifference>* out) {
  if (out->size() >= limit || a == b) return;
  if (!a.is_object() || !b.is_object()) {
    out->push_back({path, a.dump(), b.dump()});
    return;
  }
  nlohmann::json keys = a;
  keys.update(b);
  for (const auto& [key, unused] : keys.items()) {
    const std::string at = path.empty() ? key : path + "." + key;
    if (a.contains(key) && b.contains(key)) collect(a[key], b[key], at, limit, out);
    else if (out->size() < limit) out->push_back({at, a.contains(key) ? a[key].dump() : "", b.contains(key) ? b[key].dump() : ""});
  }
}

}  // namespace

std::vector<JsonDifference> json_differences(const nlohmann::json& a, const nlohmann::json& b, std::size_t limit) {
  std::vector<JsonDifference> out;
  collect(a, b, "", limit, &out);
  return out;
}

}  // namespace posenc::lab
