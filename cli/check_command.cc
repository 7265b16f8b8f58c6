#include "commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "options.h"
#include "posenc/properties.h"

namespace posenc::cli {

void add_check_command(CLI::App& app) {
  struct Args {
    CheckOptions options;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("check", "measure the properties each scheme claims (PASS/FAIL, exit 1 on a failure)");
  add_dim_option(cmd, args->options.dim, "model / head dimension of the checks");
  add_positions_option(cmd, args->options.positions, "positions for sinusoidal uniqueness and bounds")->capture_default_str();
  add_seed_option(cmd, args->options.seed, "seed of the random q, k");
  add_json_flag(cmd, args->json);
  cmd->callback([args] {
    const auto checks = run_property_checks(args->options);
    bool all = true;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : checks) {
      all = all && c.pass();
      if (args->json) {
        list.push_back({{"name", c.name}, {"claim", c.claim}, {"measured", c.measured}, {"tolerance", c.tolerance},
                        {"pass", c.pass()}});
      } else {
        std::printf("%s  %-21s %-10.3g <= %-8.3g %s\n", c.pass() ? "PASS" : "FAIL", c.name.c_str(), c.measured,
                    c.tolerance, c.claim.c_str());
      }
    }
    if (args->json) std::cout << nlohmann::json{{"checks", list}, {"pass", all}}.dump(1) << "\n";
    std::fflush(stdout);
    if (!all) throw ChecksFailed();
  });
}

}  // namespace posenc::cli
