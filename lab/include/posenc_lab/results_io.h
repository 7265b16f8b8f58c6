// One result row to and from JSON (the <model>.result.json files and results.json).
#pragma once

#include <nlohmann/json.hpp>

#include "posenc_lab/extrapolate.h"

namespace posenc::lab {

nlohmann::json row_json(const ResultRow& row);
// Throws Error naming path when j is not a row (or a NaN score is marked available).
ResultRow row_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace posenc::lab
