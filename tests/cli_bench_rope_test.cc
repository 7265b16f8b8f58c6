// `posenc bench rope --xpos`: xPos timed beside plain RoPE in the same run, and its refusal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace {

using namespace posenc::testing;

TEST(CliBenchRope, XPosPrintsItsTimeOverPlainRopesFromTheSameRun) {
  const auto j = run_json("bench rope --xpos --tokens 256 --heads 2 --kv-heads 1 --head-dim 64 --threads 1 --repeats 7");
  EXPECT_GT(j.at("xpos_seconds").get<double>(), 0);
  EXPECT_NEAR(j.at("xpos_over_rope").get<double>(), j.at("xpos_seconds").get<double>() / j.at("seconds").get<double>(), 1e-9);
  EXPECT_FALSE(run_json("bench rope --tokens 256 --heads 2 --kv-heads 1 --head-dim 64 --threads 1 --repeats 7")
                   .contains("xpos_over_rope"));
  const CliRun no_keys = run("bench rope --xpos --tokens 256 --heads 2 --kv-heads 0 --head-dim 64 --repeats 7");
  EXPECT_NE(no_keys.code, 0);
  EXPECT_NE(no_keys.err.find("bench --xpos needs --kv-heads >= 1, got 0"), std::string::npos) << no_keys.err;
}

}  // namespace
