#include "distributed_plan.h"

#include <nlohmann/json.hpp>

#include "json_difference.h"

namespace posenc::lab {

std::string plan_difference(const std::string& mine_text, int me, const std::string& theirs_text, int them) {
  const nlohmann::json mine = nlohmann::json::parse(mine_text, nullptr, false),
                       theirs = nlohmann::json::parse(theirs_text, nullptr, false);
  if (mine.is_discarded() || theirs.is_discarded() || !mine.is_object() || !theirs.is_object())
    return "the run's plan is not readable (different posenc builds?)";
  const std::vector<JsonDifference> first = json_differences(mine, theirs, 1);
  if (first.empty()) return "";
  const auto value = [](const std::string& v) { return v.empty() ? std::string("nothing") : v; };
  std::string text = first[0].path + " differs between the ranks: rank " + std::to_string(me) + " has " + value(first[0].a) +
                     ", rank " + std::to_string(them) + " has " + value(first[0].b);
  if (text.size() > 800) text = text.substr(0, 800) + "...";
  return text + "; start every rank with the same command and settings";
}

}  // namespace posenc::lab
