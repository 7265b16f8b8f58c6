// `posenc bench attention` end to end: one JSON object with the fields the README and tools read,
// an answer that agrees with the reference, and bad arguments as one-line errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"

namespace posenc::testing {
namespace {

TEST(BenchCli, AttentionPrintsOneJsonObject) {
  for (const char* scheme : {"none", "rope", "alibi", "t5"}) {
    const CliRun r = run(std::string("bench attention --seq 96 --heads 4 --kv-heads 2 --head-dim 32 --repeats 1 --json --scheme ") + scheme);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    for (const char* key : {"posenc_seconds", "torch_seconds", "speedup", "gemm_gflops", "fraction_of_gemm", "extra_bytes",
                            "max_rel_error", "target", "threads"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_LT(j["max_rel_error"].get<double>(), 1e-4) << scheme;
    EXPECT_GT(j["extra_bytes"].get<long>(), 0);
  }
}

// --backward adds forward + backward through posenc's kernel and through libtorch autograd, and
// the gradients' difference, measured in the same run.
TEST(BenchCli, AttentionBackwardReportsBothPathsAndTheGradientError) {
  const CliRun r = run("bench attention --seq 96 --heads 4 --kv-heads 2 --head-dim 32 --repeats 1 --json --scheme rope --backward");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("backward")) << r.out;
  const auto& b = j["backward"];
  for (const char* key : {"posenc_seconds", "torch_seconds", "speedup"}) EXPECT_GT(b.at(key).get<double>(), 0) << key;
  EXPECT_LT(b.at("max_rel_error").get<double>(), 1e-4);
}

// The training step through the fused kernel beside libtorch's, for schemes it covers only; a
// shape whose libtorch scores would not fit is refused with the sizes named.
TEST(BenchCli, TrainTimesTheFusedAttentionStepBeside) {
  const CliRun r = run_bounded("bench train --schemes rope,xl --steps 1 --tokens 32 --batch 2 --json", 120);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["schemes"].size(), 2u);
  EXPECT_GT(j["schemes"][0]["fused_step_seconds"].get<double>(), 0);  // rope
  EXPECT_GT(j["schemes"][0]["fused_speedup"].get<double>(), 0);
  EXPECT_EQ(j["schemes"][1]["fused_step_seconds"].get<double>(), 0);  // xl: not covered
  const CliRun big = run("bench train --schemes rope --tokens 65536 --batch 4");
  EXPECT_EQ(big.code, 2) << big.err;
  EXPECT_NE(big.err.find("65536 tokens"), std::string::npos) << big.err;
}

// Two local ranks against one process with two threads, in one run; bounded so a hang fails.
TEST(BenchCli, TrainOverTwoRanksReportsBothThroughputsAndTheAllReduce) {
  const CliRun r = run_bounded("bench train --nproc 2 --steps 2 --schemes rope --dist-timeout 20 --json", 90);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // one object: rank 1 prints nothing
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["threads_per_rank"], 1);
  EXPECT_EQ(j["single_process_threads"], 2);
  ASSERT_EQ(j["schemes"].size(), 1u);
  const auto& s = j["schemes"][0];
  EXPECT_EQ(s["scheme"], "rope");
  EXPECT_GT(s["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(s["single_process_tokens_per_second"].get<double>(), 0);
  EXPECT_NEAR(s["ratio"].get<double>(), s["tokens_per_second"].get<double>() / s["single_process_tokens_per_second"].get<double>(), 1e-9);
  EXPECT_GT(s["allreduce_seconds_per_step"].get<double>(), 0);
  EXPECT_LT(s["allreduce_seconds_per_step"].get<double>(), s["step_seconds"].get<double>());
}

TEST(BenchCli, TrainRefusesWholeModelsPerRank) {
  const CliRun r = run_bounded("bench train --nproc 2 --steps 1 --schemes rope --distribute models --dist-timeout 10", 60);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--distribute models"), std::string::npos) << r.err;
}

// Work that would take minutes or hours is refused with the sizes and the fix, and more torch
// threads than the machine has are refused (under a memory limit libtorch's pool waited forever).
TEST(BenchCli, WorkPastTheBoundIsRefusedNamingTheSizes) {
  const CliRun seq = run("bench attention --seq 65536 --repeats 5");
  EXPECT_EQ(seq.code, 2) << seq.err;
  EXPECT_NE(seq.err.find("use at most 1 repeats, or a shorter --seq"), std::string::npos) << seq.err;
  const CliRun steps = run("bench train --schemes rope --steps 1000000000");
  EXPECT_EQ(steps.code, 2) << steps.err;
  EXPECT_NE(steps.err.find("use fewer steps or a smaller model"), std::string::npos) << steps.err;
  for (const char* args : {"bench attention --threads 1024", "bench train --threads 1024 --steps 1"}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("this machine's hardware threads"), std::string::npos) << r.err;
  }
}

TEST(BenchCli, AttentionBadArgumentsAreErrors) {
  for (const char* args : {"bench attention --scheme xl", "bench attention --seq 4", "bench attention --heads 6 --kv-heads 4",
                           "bench attention --head-dim 7", "bench attention --threads 100000"}) {
    const CliRun r = run(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_FALSE(r.err.empty()) << args;
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
  }
}

}  // namespace
}  // namespace posenc::testing
