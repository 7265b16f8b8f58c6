// Access to the reference data carried in tests/data (README there: provenance): hf-golden.json (values from running Hugging Face's own rope
// functions) and real-configs/. A missing reference folder fails the test loudly; it is never
// skipped. POSENC_REFERENCE_DIR (environment) overrides the folder CMake found.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace posenc::testing {

std::string reference_dir();
const nlohmann::json& golden();                 // hf-golden.json, parsed once
const nlohmann::json& golden_case(const std::string& section, const std::string& name);
std::string read_file(const std::string& path);
// The path of a config carried in tests/data: real-configs/<name>.json, configs-extra/<name>.json.
std::string real_config(const std::string& name);
std::string extra_config(const std::string& name);

// |a - b| / max(|b|, tiny) over two equal-length vectors; the largest.
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace posenc::testing

namespace posenc::testing {
// Every number of a nested JSON array, in row-major order.
std::vector<double> flatten(const nlohmann::json& nested);
std::vector<float> flatten_f(const nlohmann::json& nested);
// max |a - b|
double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b);
}  // namespace posenc::testing
