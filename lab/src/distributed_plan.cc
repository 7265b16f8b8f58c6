#include "distributed_plan.h"

#include <nlohmann/json.hpp>

namespace posenc::lab {
namespace {

// The first value that differs between two plans: its path ("settings.rope.training.steps": a
// setting inside each model's keys) in *where, each side's value (or "nothing"); false when equal.
bool first_difference(const nlohmann::json& mine, const nlohmann::json& theirs, const std::string& path, std::string* where,
                      std::string* a, std::string* b) {
  if (mine == theirs) return false;
  if (mine.is_object() && theirs.is_object()) {
    nlohmann::json keys = mine;
    keys.update(theirs);
    for (const auto& [key, unused] : keys.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (mine.contains(key) && theirs.contains(key)) {
        if (first_difference(mine[key], theirs[key], at, where, a, b)) return true;
        continue;
      }
      *where = at;
      *a = mine.contains(key) ? mine[key].dump() : "nothing";
      *b = theirs.contains(key) ? theirs[key].dump() : "nothing";
      return true;
    }
  }
  *where = path;
  *a = mine.dump();
  *b = theirs.dump();
  return true;
}

}  // namespace

// "" when the plans agree, else the first setting that differs, with both ranks' values.
std::string plan_difference(const std::string& mine_text, int me, const std::string& theirs_text, int them) {
  const nlohmann::json mine = nlohmann::json::parse(mine_text, nullptr, false),
                       theirs = nlohmann::json::parse(theirs_text, nullptr, false);
  if (mine.is_discarded() || theirs.is_discarded() || !mine.is_object() || !theirs.is_object())
    return "the run's plan is not readable (different posenc builds?)";
  std::string where, a, b;
  if (!first_difference(mine, theirs, "", &where, &a, &b)) return "";
  std::string text = where + " differs between the ranks: rank " + std::to_string(me) + " has " + a + ", rank " +
                     std::to_string(them) + " has " + b;
  if (text.size() > 800) text = text.substr(0, 800) + "...";
  return text + "; start every rank with the same command and settings";
}


}  // namespace posenc::lab
