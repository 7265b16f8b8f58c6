// Hostile inputs end to end (issue 12): every one ends with exit code 2 (or 1 for a failed
// write) and a message naming the value or file -- never a signal, a hang or a runaway
// allocation. Each runs under run_bounded (20 s, 2 GB), so the old behaviour shows as exit code
// 137 (killed), 139 (SIGSEGV) or 1 (std::bad_alloc) rather than as a stalled test.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <string>

#include "cli_run.h"

namespace {

using posenc::testing::CliRun;
using posenc::testing::run_bounded;
using posenc::testing::temp_path;

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }


bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string write_text(const std::string& suffix, const std::string& text) {
  const std::string path = temp_path(suffix);
  std::ofstream(path) << text;
  return path;
}

// rope_theta = 100 000 nested arrays: a SIGSEGV in the recursive dump() of the error message.
TEST(CliHardening, DeeplyNestedJsonIsRefusedByEveryConfigCommand) {
  const std::string deep = write_text(".json", "{\"head_dim\": 64, \"rope_theta\": " + std::string(100000, '[') +
                                                   std::string(100000, ']') + "}");
  const std::string out = temp_path(".svg");
  for (const std::string& command : {"freqs --config " + deep, "explain --config " + deep,
                                     "table --scheme rope --config " + deep, "plot wavelengths -o " + out + " --config " + deep}) {
    SCOPED_TRACE(command);
    const CliRun r = run_bounded(command);
    EXPECT_CLEAN_ERROR(r, "nest deeper than 64", deep.c_str());
  }
  // Just inside the limit the bad value is echoed, bounded in depth and length.
  const std::string nested = write_text(".json", "{\"head_dim\": 64, \"rope_theta\": " + std::string(60, '[') + "1" +
                                                     std::string(60, ']') + "}");
  const CliRun r = run_bounded("freqs --config " + nested);
  EXPECT_CLEAN_ERROR(r, "rope_theta must be a number", "array [[[");
  EXPECT_LT(r.err.size(), 400u) << r.err;
}

TEST(CliHardening, ThreadsAreBoundedAndNotNegative) {
  for (const char* value : {"100000", "-1", "1025"}) {
    const CliRun r = run_bounded(std::string("bench rope --tokens 16 --repeats 7 --threads ") + value);
    EXPECT_CLEAN_ERROR(r, "--threads", value, "1024");
  }
  EXPECT_EQ(run_bounded("bench rope --tokens 16 --repeats 7 --threads 2").code, 0);
}

// Tick generation looped (4 GB+) on a constant series and on non-finite data.
TEST(CliHardening, ChartsOfDegenerateDataAreBoundedAndQuick) {
  const std::string out = temp_path(".svg");
  const CliRun flat = run_bounded("plot decay --scheme rope --dim 2 -o " + out, 20, 1024);
  EXPECT_EQ(flat.code, 0) << flat.err;
  std::ifstream svg(out);
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_LT(text.size(), 200000u);
  EXPECT_FALSE(mentions(text, "nan")) << "every coordinate is a number";
  const CliRun tiny = run_bounded("plot decay --scheme rope --base 1e-300 -o " + out, 20, 1024);
  EXPECT_CLEAN_ERROR(tiny, "inv_freq", "not a finite frequency", "1e-300");
}

TEST(CliHardening, CheckIsCappedAndStreamed) {
  const CliRun huge = run_bounded("check --dim 8192 --positions 10000000");
  EXPECT_CLEAN_ERROR(huge, "positions x dim", "268435456");
  // At the cap's edge the rows are fingerprinted, not kept: well under 2 GB.
  const CliRun edge = run_bounded("check --dim 64 --positions 4000000", 60, 1024);
  EXPECT_EQ(edge.code, 0) << edge.err;
}

TEST(CliHardening, ConfigFilesAreRegularAndBounded) {
  const CliRun zero = run_bounded("freqs --config /dev/zero", 20, 1024);
  EXPECT_CLEAN_ERROR(zero, "/dev/zero", "not a regular file");
  const std::string dir = temp_path(".d");
  ::mkdir(dir.c_str(), 0700);
  const CliRun directory = run_bounded("explain --config " + dir);
  EXPECT_CLEAN_ERROR(directory, dir.c_str(), "is a directory");
  const std::string big = temp_path(".json");
  { std::ofstream(big) << " "; }
  ASSERT_EQ(::truncate(big.c_str(), (16 << 20) + 1), 0);  // sparse: 16 MiB + 1 byte
  const CliRun large = run_bounded("freqs --config " + big);
  EXPECT_CLEAN_ERROR(large, big.c_str(), "16777216");
  const CliRun missing = run_bounded("freqs --config /nonexistent/config.json");
  EXPECT_CLEAN_ERROR(missing, "/nonexistent/config.json", "No such file");
}

// rope_theta < 1 (or a factor < 1) made accepted schedules whose angles rope_sincos cannot
// reduce: cos = 1.8e14 and NaN were printed with exit 0.
TEST(CliHardening, AnglesBeyondAccurateRangeAreRefused) {
  const CliRun nan = run_bounded("table --scheme rope --dim 4 --base 1e-300 --positions 0:3");
  EXPECT_CLEAN_ERROR(nan, "inv_freq[1]", "not a finite frequency");
  EXPECT_TRUE(nan.out.empty()) << nan.out;
  const CliRun far = run_bounded("table --scheme rope --dim 8 --base 0.01 --positions 2000000000");
  EXPECT_CLEAN_ERROR(far, "position 2000000000", "accurate up to position");
  const CliRun heat = run_bounded("plot heatmap --scheme rope --dim 64 --base 0.001 --positions 100000000:100000004 -o " +
                                  temp_path(".svg"));
  EXPECT_CLEAN_ERROR(heat, "accurate up to position");
  // Inside the accurate range the same schedule works, and cos stays in [-1, 1].
  const CliRun near = run_bounded("table --scheme rope --dim 8 --base 0.5 --positions 1000000000 --json");
  ASSERT_EQ(near.code, 0) << near.err;
  const nlohmann::json table = nlohmann::json::parse(near.out);
  for (const auto& v : table.at("cos")[0]) EXPECT_LE(std::abs(v.get<double>()), 1.0);
}

TEST(CliHardening, StdoutThatCannotBeWrittenIsAFailure) {
  const CliRun r = run_bounded("freqs --head-dim 64 >/dev/full");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(mentions(r.err, "cannot write to standard output")) << r.err;
  EXPECT_EQ(run_bounded("freqs --head-dim 64 >/dev/null").code, 0);
}

TEST(CliHardening, TablesValidateBeforePrinting) {
  const CliRun alibi = run_bounded("table --scheme alibi --heads 2 --positions 0:100000");
  EXPECT_CLEAN_ERROR(alibi, "alibi bias");
  EXPECT_TRUE(alibi.out.empty()) << "slopes printed before the error:\n" << alibi.out.substr(0, 200);
  const CliRun mrope = run_bounded("table --scheme mrope --mrope-section 1,1,2 --grid 1,4000,4000");
  EXPECT_CLEAN_ERROR(mrope, "--grid");
  EXPECT_TRUE(mrope.out.empty()) << mrope.out.substr(0, 200);
}

TEST(CliHardening, HeatmapPairIsWrittenWholeOrNotAtAll) {
  const std::string base = temp_path("");
  ASSERT_EQ(::mkdir((base + ".svg").c_str(), 0700), 0);  // the SVG half cannot be written
  const CliRun r = run_bounded("plot heatmap --scheme rope --positions 0:16 --dim 16 -o " + base + ".png");
  EXPECT_CLEAN_ERROR(r, (base + ".svg").c_str(), "directory");
  EXPECT_FALSE(exists(base + ".png")) << "half the pair written";
  EXPECT_FALSE(exists(base + ".png.tmp"));
  EXPECT_FALSE(exists(base + ".svg.tmp"));
}

TEST(CliHardening, YarnWithInvertedBetasIsComputedWithAWarning) {
  const CliRun r = run_bounded("freqs --rope-type yarn --head-dim 64 --factor 4 --original-max 4096 --beta-fast 1 --beta-slow 32");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(mentions(r.err, "warning: beta_fast 1 < beta_slow 32")) << r.err;
}

TEST(CliHardening, ExplainSaysWhenFrequenciesDoNotRotate) {
  // rope_theta 1e300: theta^(-2i/128) underflows float32 for i >= 10, 54 of 64 frequencies.
  const std::string huge_theta = write_text(".json", R"({"head_dim": 128, "rope_theta": 1e300, "max_position_embeddings": 4096})");
  const CliRun r = run_bounded("explain --config " + huge_theta);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(mentions(r.out, "rotates 20 of 128 channels")) << r.out;
  EXPECT_TRUE(mentions(r.out, "54 of the 64 frequencies are 0")) << r.out;
  // long_factor 1e308: every scaled frequency is 0; no angle "stays inside the trained range".
  std::string ones, huge;
  for (int i = 0; i < 48; ++i) ones += (i ? ", 1" : "1"), huge += (i ? ", 1e308" : "1e308");
  const std::string longrope = write_text(
      ".json", R"({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
                  "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope", "short_factor": [)" +
                   ones + R"(], "long_factor": [)" + huge + "]}}");
  const CliRun l = run_bounded("explain --context 100000 --config " + longrope);
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_FALSE(mentions(l.out, "every angle stays inside the trained range")) << l.out;
  EXPECT_TRUE(mentions(l.out, "48 frequencies are 0 and do not rotate")) << l.out;
}

// Found by the same pass over plot, bench and config arguments: an internal error, a bad_alloc
// (beyond 2 GB), or a run of hours.
TEST(CliHardening, PlotBenchAndConfigArgumentsAreBounded) {
  const std::string out = temp_path(".svg");
  EXPECT_CLEAN_ERROR(run_bounded("plot decay --scheme sinusoidal --dim -2 -o " + out), "dim", "-2");
  EXPECT_CLEAN_ERROR(run_bounded("plot heatmap --scheme xl --dim 4096 --positions 2000000000:2000004000 -o " + out),
                     "2000003999", "67108864");
  EXPECT_CLEAN_ERROR(run_bounded("plot heatmap --scheme learned --positions 30000000:30000010 -o " + out), "30000009");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --repeats 100000000 --tokens 1"), "repeats 100000000", "use at most");
  EXPECT_CLEAN_ERROR(run_bounded("bench rope --tokens 500000 --heads 32 --head-dim 128"), "2560000000", "134217728");
  // A 1 MB rope_type name is echoed in a few dozen characters.
  const std::string name = write_text(".json", R"({"head_dim": 64, "rope_scaling": {"rope_type": ")" + std::string(1 << 20, 'x') +
                                                   R"("}})");
  const CliRun r = run_bounded("freqs --config " + name);
  EXPECT_CLEAN_ERROR(r, "is not a rope type");
  EXPECT_LT(r.err.size(), 1000u);
  // The same for a key of a megabyte, inside the rope dict and as a layer type.
  const std::string key = std::string(1 << 20, 'k');
  for (const std::string& config :
       {R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2, ")" + key + R"(": 1}})",
        R"({"head_dim": 64, "rope_parameters": {")" + key + R"(": {"rope_type": "linear", "factor": -1}}})"}) {
    const CliRun k = run_bounded("freqs --config " + write_text(".json", config));
    EXPECT_CLEAN_ERROR(k, "kkk...");
    EXPECT_LT(k.err.size(), 1000u);
  }
}

#ifdef POSENC_WITH_TORCH
// 100k characters asked for a 100k x 100k attention map (160 GB).
TEST(CliHardening, AttentionTextIsCapped) {
  const CliRun r = run_bounded("plot attention --model /nonexistent/model.pt --text " + std::string(100000, 'a') + " -o " +
                               temp_path(".svg"));
  EXPECT_CLEAN_ERROR(r, "--text", "100000", "4096");
}
#endif

}  // namespace
