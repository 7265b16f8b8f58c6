// One result row to and from JSON (the <model>.result.json files and results.json).
#pragma once

#include <nlohmann/json.hpp>

#include "posenc_lab/extrapolate.h"

namespace posenc::lab {

nlohmann::json row_json(const ResultRow& row);
ResultRow row_from_json(const nlohmann::json& j);

}  // namespace posenc::lab
