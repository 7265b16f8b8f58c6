// `posenc bench attention` end to end: one JSON object with the fields the README and tools read,
// an answer that agrees with the reference, and bad arguments as one-line errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <thread>

#include "cli_run.h"

namespace posenc::testing {
namespace {

TEST(BenchCli, AttentionPrintsOneJsonObject) {
  for (const char* scheme : {"none", "rope", "alibi", "t5"}) {
    const CliRun r = run(std::string("bench attention --seq 96 --heads 4 --kv-heads 2 --head-dim 32 --repeats 1 --json --scheme ") + scheme);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    for (const char* key : {"posenc_seconds", "torch_seconds", "speedup", "gemm_gflops", "fraction_of_gemm", "extra_bytes",
                            "max_rel_error", "target", "threads", "square_gemm_gflops", "fraction_of_square_gemm", "blas_threads"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j["square_gemm_gflops"].get<double>(), 0);
    EXPECT_NEAR(j["fraction_of_square_gemm"].get<double>(), j["posenc_gflops"].get<double>() / j["square_gemm_gflops"].get<double>(), 1e-9);
    EXPECT_FALSE(j.contains("rate_vs_f32"));  // f32: nothing to compare with
    EXPECT_LT(j["max_rel_error"].get<double>(), 1e-4) << scheme;
    EXPECT_GT(j["extra_bytes"].get<long>(), 0);
  }
}

// The learned biases of issue 24 (prefill): the kernel agrees with the reference and is timed
// beside ALiBi's kernel on the same tensors in the same run, forward and --backward (where the
// bias's own gradient, the table's or FoX's c, is compared with libtorch autograd's too); what is
// not timed says so.
TEST(BenchCli, AttentionLearnedBiasesReportTheRateVsAlibi) {
  for (const char* scheme : {"kerple", "sandwich", "dpb", "fire", "fox"}) {
    const CliRun r = run(std::string("bench attention --seq 96 --heads 4 --kv-heads 2 --head-dim 32 --repeats 1 --json --causal --scheme ") + scheme);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GT(j["alibi_seconds"].get<double>(), 0) << scheme;
    EXPECT_NEAR(j["rate_vs_alibi"].get<double>(), j["alibi_seconds"].get<double>() / j["posenc_seconds"].get<double>(), 1e-9);
    EXPECT_LT(j["max_rel_error"].get<double>(), 1e-4) << scheme;
    EXPECT_GT(j["torch_seconds"].get<double>(), 0) << scheme;
  }
  EXPECT_FALSE(nlohmann::json::parse(run("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --json --scheme alibi").out)
                   .contains("rate_vs_alibi"));
  const CliRun fox = run("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --scheme fox");
  EXPECT_EQ(fox.code, 2);
  EXPECT_NE(fox.err.find("add --causal"), std::string::npos) << fox.err;
  const CliRun decode = run("bench attention --decode --keys 64 --heads 2 --head-dim 16 --repeats 1 --scheme kerple");
  EXPECT_EQ(decode.code, 2);
  EXPECT_NE(decode.err.find("prefill benchmark"), std::string::npos) << decode.err;
  for (const char* scheme : {"dpb", "fire", "fox"}) {
    const CliRun r = run(std::string("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --json --causal --backward --scheme ") + scheme);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto b = nlohmann::json::parse(r.out).at("backward");
    for (const char* key : {"posenc_seconds", "torch_seconds", "alibi_seconds"}) EXPECT_GT(b.at(key).get<double>(), 0) << key;
    EXPECT_NEAR(b.at("rate_vs_alibi").get<double>(), b.at("alibi_seconds").get<double>() / b.at("posenc_seconds").get<double>(), 1e-9);
    EXPECT_LT(b.at("max_rel_error").get<double>(), 1e-4) << scheme;  // dq, dk, dv and the bias's gradient
  }
  const CliRun text = run("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --causal --backward --scheme kerple");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("(dq, dk, dv, the distance table)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ALiBi's forward + backward, same tensors, same run"), std::string::npos) << text.out;
  const CliRun unknown = run("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --scheme fir");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("'fir'"), std::string::npos) << unknown.err;
}

// The BLAS ceilings run on the benchmark's threads: OpenBLAS keeps its own pool, which libtorch's
// set_num_threads does not reach (posenc_torch/blas_threads.h).
TEST(BenchCli, AttentionGemmCeilingsUseTheBenchmarksThreads) {
  for (int threads : {1, 2}) {
    const CliRun r = run("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --json --threads " + std::to_string(threads));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["threads"], threads);
    EXPECT_EQ(j["blas_threads"], threads);  // Debian's libtorch calls OpenBLAS
  }
}

// --causal is a flag (as in every command): absent, the mask is bidirectional; it takes no value.
TEST(BenchCli, AttentionCausalIsAFlag) {
  const CliRun plain = run("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --json");
  const CliRun causal = run("bench attention --seq 64 --heads 2 --head-dim 16 --repeats 1 --json --causal");
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(causal.code, 0) << causal.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["causal"], false);
  EXPECT_EQ(nlohmann::json::parse(causal.out)["causal"], true);
  EXPECT_NE(run("bench attention --seq 64 --causal true").code, 0);
}

// --dtype bf16 / f16 runs posenc's kernel on q, k, v in that dtype and the f32 kernel on the same
// shape in the same run; the error is the reference's on the same bf16/f16 inputs, so only the
// output's rounding to its dtype remains.
TEST(BenchCli, AttentionDtypeReportsTheRateVsF32) {
  for (const char* dtype : {"bf16", "f16"}) {
    const CliRun r = run(std::string("bench attention --seq 96 --heads 4 --kv-heads 2 --head-dim 32 --repeats 1 --json --causal --dtype ") + dtype);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["dtype"], dtype);
    EXPECT_GT(j["f32_seconds"].get<double>(), 0);
    EXPECT_NEAR(j["rate_vs_f32"].get<double>(), j["f32_seconds"].get<double>() / j["posenc_seconds"].get<double>(), 1e-9);
    EXPECT_LT(j["max_rel_error"].get<double>(), std::string(dtype) == "bf16" ? 8e-3 : 1e-3) << dtype;
  }
}

// --decode: one query over a cache of --keys, its K and V bytes/s as a fraction of a streaming
// read of the same bytes with the same threads, the kernel's answer against the reference.
TEST(BenchCli, AttentionDecodeReportsTheFractionOfTheMemoryCeiling) {
  for (const char* dtype : {"f32", "bf16"}) {
    const CliRun r = run(std::string("bench attention --decode --keys 1000 --heads 8 --kv-heads 2 --head-dim 64 --threads 2 --repeats 2 --json --dtype ") +
                         dtype);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["keys"], 1000);
    EXPECT_EQ(j["threads"], 2);
    EXPECT_DOUBLE_EQ(j["kv_bytes"].get<double>(), 2.0 * 1000 * 2 * 64 * (std::string(dtype) == "f32" ? 4 : 2));
    EXPECT_GT(j["read_gbps"].get<double>(), 0);
    EXPECT_NEAR(j["fraction_of_memory_ceiling"].get<double>(), j["kv_gbps"].get<double>() / j["read_gbps"].get<double>(), 1e-9);
    // bf16 K and V on a CPU with AVX512-BF16 take its dot products: q and P rounded to bf16
    // (unit roundoff u = 2^-9), within posenc/attention_bf16.h's bound; f32 stays exact to f32.
    EXPECT_LT(j["max_rel_error"].get<double>(), std::string(dtype) == "f32" ? 1e-5 : 4.0 / 512) << dtype;
    EXPECT_GE(j["cache_flush_bytes"].get<double>(), 64.0 * (1 << 20)) << "each timed call starts cold";
    EXPECT_EQ(j.contains("rate_vs_f32"), std::string(dtype) != "f32");
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
  const CliRun seq = run("bench attention --seq 65536 --repeats 5 --causal");
  EXPECT_EQ(seq.code, 2) << seq.err;
  EXPECT_NE(seq.err.find("use at most 1 repeats, or a shorter --seq"), std::string::npos) << seq.err;
  const CliRun steps = run("bench train --schemes rope --steps 1000000000 --tokens 8 --batch 1");
  EXPECT_EQ(steps.code, 2) << steps.err;
  EXPECT_NE(steps.err.find(" at most for this shape"), std::string::npos) << steps.err;
  EXPECT_EQ(steps.err.find(" x 0 GFLOP per step"), std::string::npos) << "rounded to 0: " << steps.err;
  // One repeat too many already: the advice is a --seq that fits, not "at most 0 repeats".
  const CliRun one = run("bench attention --seq 65536");
  EXPECT_EQ(one.code, 2) << one.err;
  // At the default --repeats 3: 65536 / 2 (the work grows as S^2), and the --seq of one repeat beside it.
  EXPECT_NE(one.err.find("--seq 32768 at most with these --repeats, --heads and --head-dim (--seq 46336 with --repeats 1)"),
            std::string::npos) << one.err;
  for (const char* args : {"bench attention --threads 1024", "bench train --threads 1024 --steps 1"}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("this machine's hardware threads"), std::string::npos) << r.err;
  }
}

// Each refusal names its flag and value; --nproc is checked before any rank starts.
TEST(BenchCli, TrainNamesTheFlagItRefuses) {
  const std::pair<const char*, const char*> cases[] = {
      {"bench train --schemes rope --steps -5", "--steps must be >= 1, got -5"},
      {"bench train --schemes rope --steps 1 --tokens -1", "--tokens must be >= 2, got -1"},
      {"bench train --schemes rope --steps 1 --batch 2 --nproc 3", "--nproc 3 ranks cannot share --batch 2 rows"},
      {"bench rope --tokens 9223372036854775807", "--tokens must be an integer in [-2147483648, 2147483647] (INT32"},
      {"bench rope --tokens 1e3", "--tokens must be an integer in [-2147483648, 2147483647] (INT32"},
  };
  for (const auto& [args, part] : cases) {
    const CliRun r = run_bounded(args, 20);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << args << "\n" << r.err;
  }
  // --threads' help: the range, and this machine's hardware threads beside it.
  const CliRun help = run_bounded("bench rope --help", 20);
  EXPECT_NE(help.out.find("in [0, 1024] (this machine has " + std::to_string(std::thread::hardware_concurrency())), std::string::npos)
      << help.out;
}

TEST(BenchCli, AttentionBadArgumentsAreErrors) {
  for (const char* args : {"bench attention --scheme xl", "bench attention --seq 4", "bench attention --heads 6 --kv-heads 4",
                           "bench attention --head-dim 7", "bench attention --threads 100000", "bench attention --dtype f64",
                           "bench attention --decode --keys 0", "bench attention --decode --kv-heads 3"}) {
    const CliRun r = run(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_FALSE(r.err.empty()) << args;
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
  }
}

}  // namespace
}  // namespace posenc::testing
