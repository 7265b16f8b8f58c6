// Where two JSON values differ, leaf by leaf: what a rank's plan and rank 0's disagree on
// (distributed_plan.cc), what a saved training key and today's settings disagree on
// (result_cache.cc's check_training_key).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::lab {

struct JsonDifference {
  std::string path;  // "settings.rope.training.steps"; "" for the values themselves
  std::string a, b;  // each side's value as JSON text; "" where that side has no such key
};

// The differences between a and b in key order, recursing into objects both sides have, at most
// `limit` of them (none when equal).
std::vector<JsonDifference> json_differences(const nlohmann::json& a, const nlohmann::json& b, std::size_t limit);

}  // namespace posenc::lab
