// `posenc gguf` end to end (text and --json): GGUF files written with the test writer (core/src/gguf_write.cc) and
// read by the binary, alone and against a config; malformed files refused naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "golden.h"
#include "gguf_values.h"
#include "posenc/gguf.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"

namespace {

using posenc::GgufFile;
using posenc::GgufValue;
using posenc::testing::reference_dir;
using posenc::testing::run;
using posenc::testing::run_json;
using posenc::testing::temp_path;

const auto num = posenc::testing::gguf_num;
const auto str = posenc::testing::gguf_str;

const std::string kLlama31 = "/real-configs/Llama-3.1-8B-Instruct.json";

// What conversion/llama.py writes for Llama 3.1's positions: base 500000, 128 rotated channels,
// rope_freqs.weight = default inv_freq / HF's llama3 inv_freq (LlamaModel.generate_extra_tensors).
GgufFile llama31(bool with_freqs) {
  GgufFile f;
  f.metadata = {{"general.architecture", str("llama")},
                {"llama.context_length", num(4, 131072)},
                {"llama.attention.head_count", num(4, 32)},
                {"llama.rope.dimension_count", num(4, 128)},
                {"llama.rope.freq_base", num(6, 500000)}};
  if (with_freqs) {
    const auto s = posenc::compute_schedule(posenc::load_hf_config(reference_dir() + kLlama31).select().params);
    std::vector<float> ff;
    for (std::size_t i = 0; i < s.inv_freq.size(); ++i)
      ff.push_back(static_cast<float>(double(s.base_inv_freq[i]) / s.inv_freq[i]));
    f.positional_tensors["rope_freqs.weight"] = ff;
  }
  return f;
}

std::string write(const std::string& bytes, const std::string& suffix) {
  const std::string path = temp_path(suffix);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CliGguf, PrintsTheKeysAndLlamaCppsSchedule) {
  const auto r = run("gguf " + write(posenc::gguf_bytes(llama31(true)), "_l31.gguf"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "architecture llama (GGUF v3, 5 keys, 1 tensors)")) << r.out;
  EXPECT_TRUE(has(r.out, "llama.rope.freq_base = 5e+05")) << r.out;
  EXPECT_TRUE(has(r.out, "rope_freqs.weight: per-frequency divisors")) << r.out;
  EXPECT_TRUE(has(r.out, "llama.cpp schedule: n_rot 128, base 5e+05, scaling linear, factor 1")) << r.out;
  // The inverse frequencies, one line each: theta_i = 500000^(-2i/128) / rope_freqs[i] (i = 1: divisor 1).
  const std::size_t at = r.out.find("\n    1  ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NEAR(std::stod(r.out.substr(at + 8)), std::pow(500000.0, -2.0 / 128), 2e-7);  // llama.cpp: float32
  EXPECT_TRUE(has(r.out, "\n    0  1\n")) << r.out;
  EXPECT_FALSE(has(r.out, "HF")) << "no comparison without --config";
}

TEST(CliGguf, WithConfigAgreesExitZeroOrDiffersExitOneNamingTheTensor) {
  const std::string config = reference_dir() + kLlama31;
  const auto ok = run("gguf " + write(posenc::gguf_bytes(llama31(true)), "_l31a.gguf") + " --config " + config);
  ASSERT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_TRUE(has(ok.out, "agrees with HF's schedule for " + config)) << ok.out;
  // Without rope_freqs.weight llama.cpp computes plain RoPE at base 500000: not Llama 3.1's.
  const auto bad = run("gguf " + write(posenc::gguf_bytes(llama31(false)), "_l31b.gguf") + " --config " + config);
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  EXPECT_TRUE(has(bad.out, "DIFFERS from HF's schedule")) << bad.out;
  EXPECT_TRUE(has(bad.out, "rope_freqs.weight:")) << bad.out;
}

TEST(CliGguf, MalformedFilesExitTwoNamingTheProblem) {
  const std::string good = posenc::gguf_bytes(llama31(true));
  const auto magic = run("gguf " + write("GGML" + good.substr(4), "_magic.gguf"));
  EXPECT_EQ(magic.code, 2);
  EXPECT_TRUE(has(magic.err, "GGUF")) << magic.err;
  EXPECT_TRUE(magic.out.empty()) << magic.out;

  const auto cut = run("gguf " + write(good.substr(0, 30), "_cut.gguf"));
  EXPECT_EQ(cut.code, 2);
  EXPECT_FALSE(cut.err.empty());
  EXPECT_TRUE(cut.out.empty()) << cut.out;

  std::string bad_type = good;
  bad_type[24 + 8 + 20] = 99;  // the first value's type, after the key "general.architecture"
  const auto type = run("gguf " + write(bad_type, "_type.gguf"));
  EXPECT_EQ(type.code, 2);
  EXPECT_TRUE(has(type.err, "value type 99")) << type.err;

  const auto absent = run("gguf " + temp_path("_absent.gguf"));
  EXPECT_EQ(absent.code, 2);
  EXPECT_TRUE(has(absent.err, "_absent.gguf")) << absent.err;
  EXPECT_EQ(run("gguf").code, 2);  // the file is required
}

// --json: the report Python's posenc.gguf() returns, with the same exit codes.
TEST(CliGgufJson, ReportsTheScheduleAndAgreementWithAConfig) {
  const std::string file = write(posenc::gguf_bytes(llama31(true)), ".gguf");
  const auto alone = run_json("gguf " + file);
  EXPECT_EQ(alone.at("architecture"), "llama");
  EXPECT_EQ(alone.at("n_rot"), 128);
  EXPECT_EQ(alone.at("freq_factors_tensor"), "rope_freqs.weight");
  EXPECT_FALSE(alone.contains("agrees_with_hf"));  // no config, no verdict
  ASSERT_EQ(alone.at("inv_freq").size(), 64u);

  const auto agreed = run_json("gguf " + file + " --config " + reference_dir() + kLlama31);
  EXPECT_EQ(agreed.at("agrees_with_hf"), true);
  EXPECT_TRUE(agreed.at("mismatches").empty());
  const posenc::RopeSchedule s =
      posenc::compute_schedule(posenc::load_hf_config(reference_dir() + kLlama31).select().params);
  for (std::size_t i = 0; i < 64; ++i)
    EXPECT_NEAR(agreed.at("inv_freq")[i].get<double>(), s.inv_freq[i], 1e-6 * s.inv_freq[i]) << i;
}

TEST(CliGgufJson, ADisagreementIsExitOneWithTheKeyNamed) {
  auto config = nlohmann::json::parse(std::ifstream(reference_dir() + kLlama31));
  config["rope_theta"] = 10000.0;
  const auto r = run("gguf " + write(posenc::gguf_bytes(llama31(true)), ".gguf") + " --json --config " + posenc::testing::write_config(config));
  EXPECT_EQ(r.code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("agrees_with_hf"), false);
  ASSERT_FALSE(j.at("mismatches").empty());
  EXPECT_EQ(j.at("mismatches")[0].at("key"), "llama.rope.freq_base");
}

}  // namespace
