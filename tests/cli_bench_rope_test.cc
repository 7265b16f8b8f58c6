// `posenc bench rope`: both ratios in every dtype and memory order, the ceiling on the kernel's
// threads; `--xpos`: xPos timed beside plain RoPE in the same run, and its refusal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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

// Issue 29 reads fraction_of_ceiling and rate_vs_f32 from every run: float32 is its own
// reference (rate 1), and the ceiling pass runs on as many threads as the kernel.
TEST(CliBenchRope, EveryDtypeAndMemoryOrderPrintsBothRatiosWithTheCeilingOnTheKernelsThreads) {
  for (const char* dtype : {"f32", "bf16", "f16"})
    for (const char* memory : {"bshd", "bhsd"}) {
      const auto j = run_json(std::string("bench rope --tokens 64 --heads 4 --kv-heads 2 --head-dim 64 --threads 2 --repeats 7 --dtype ") +
                              dtype + " --memory " + memory);
      SCOPED_TRACE(std::string(dtype) + " " + memory);
      EXPECT_EQ(j.at("memory"), memory);
      EXPECT_GT(j.at("fraction_of_ceiling").get<double>(), 0);
      EXPECT_GT(j.at("rate_vs_f32").get<double>(), 0);
      if (std::string(dtype) == "f32") EXPECT_EQ(j.at("rate_vs_f32").get<double>(), 1.0);
      EXPECT_EQ(j.at("threads").get<int>(), 2);
      EXPECT_EQ(j.at("ceiling_threads").get<int>(), 2);
    }
}

// The walks' prefetch policy (rope_kernels.h, rope_prefetch_choice) is printed: fixed by
// POSENC_ROPE_PREFETCH, measured on large calls, the default on small ones; another value of the
// variable is a clean error naming it.
TEST(CliBenchRope, PrintsThePrefetchPolicyAndRefusesAnUnknownOne) {
  const std::string shape = "bench rope --tokens 64 --heads 4 --kv-heads 2 --head-dim 64 --threads 1 --repeats 7 --json";
  const auto unset = [&](const std::string& args) {  // the default, whatever the test's environment holds
    const CliRun r = run_limited("unset POSENC_ROPE_PREFETCH; ", args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto small = unset(shape + " --memory bhsd");
  EXPECT_EQ(small.at("prefetch"), "l1");
  EXPECT_FALSE(small.at("prefetch_settled").get<bool>()) << "64 tokens are under the bytes measured";
  EXPECT_GE(small.at("prefetch_measured_from_bytes").get<double>(), 16 << 20);
  EXPECT_EQ(unset(shape).at("prefetch"), "none");
  const CliRun fixed = run_limited("POSENC_ROPE_PREFETCH=l2; export POSENC_ROPE_PREFETCH; ", shape + " --memory bhsd");
  ASSERT_EQ(fixed.code, 0) << fixed.err;
  const auto j = nlohmann::json::parse(fixed.out);
  EXPECT_EQ(j.at("prefetch"), "l2");
  EXPECT_TRUE(j.at("prefetch_settled").get<bool>());
  const CliRun bad = run_limited("POSENC_ROPE_PREFETCH=L2; export POSENC_ROPE_PREFETCH; ", shape);
  EXPECT_CLEAN_ERROR(bad, "POSENC_ROPE_PREFETCH must be auto, none, l1 or l2, got 'L2'");
  EXPECT_TRUE(bad.out.empty()) << bad.out;
}

}  // namespace
