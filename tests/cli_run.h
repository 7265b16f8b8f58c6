// Running the posenc binary from tests: exit code, stdout and stderr.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace posenc::testing {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

std::string temp_path(const std::string& suffix);
CliRun run(const std::string& args);                 // posenc ARGS
nlohmann::json run_json(const std::string& args);    // posenc ARGS --json; expects exit 0
std::string write_config(const nlohmann::json& config);  // a temp file holding config

}  // namespace posenc::testing
