// `posenc check`: the property checks, live, with their measured deviations.
#pragma once

#include <stdexcept>

namespace CLI {
class App;
}

namespace posenc::cli {

// Thrown after the report when a check fails: main() exits with status 1.
struct ChecksFailed : std::runtime_error {
  ChecksFailed() : std::runtime_error("property checks failed") {}
};

void add_check_command(CLI::App& app);

}  // namespace posenc::cli
