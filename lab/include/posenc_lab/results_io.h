// One result row to and from JSON (the <model>.result.json files and results.json), and the
// world a run had.
#pragma once

#include <nlohmann/json.hpp>

#include "posenc_lab/extrapolate.h"

namespace posenc::lab {

nlohmann::json row_json(const ResultRow& row);
// Throws Error naming path when j is not a row (or a NaN score is marked available).
ResultRow row_from_json(const nlohmann::json& j, const std::string& path);

// The ranks a run's results came from: "world_size" (1 for one process) and "distribute" ("data"
// or "models"), set on a results object (results.json and the JSON on stdout of every lab command).
void add_world_fields(nlohmann::json* results, const LaunchConfig& launch);

}  // namespace posenc::lab
