// `posenc gguf --json`: the report Python's posenc.gguf() returns, and its exit codes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "golden.h"
#include "posenc/gguf.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"

namespace {

using posenc::testing::reference_dir;
using posenc::testing::run;
using posenc::testing::run_json;

const std::string kLlama31 = "/real-configs/Llama-3.1-8B-Instruct.json";

// What convert_hf_to_gguf.py writes for Llama 3.1's positions: base, dims and rope_freqs.weight.
std::string llama31_gguf_file() {
  posenc::GgufFile f;
  auto num = [](std::uint32_t type, double v) { posenc::GgufValue x; x.type = type, x.number = v; return x; };
  posenc::GgufValue arch;
  arch.type = 8, arch.text = "llama";
  f.metadata = {{"general.architecture", arch},
                {"llama.context_length", num(4, 131072)},
                {"llama.rope.dimension_count", num(4, 128)},
                {"llama.rope.freq_base", num(6, 500000)}};
  const posenc::RopeSchedule s =
      posenc::compute_schedule(posenc::load_hf_config(reference_dir() + kLlama31).select().params);
  std::vector<float> divisors;
  for (std::size_t i = 0; i < s.inv_freq.size(); ++i)
    divisors.push_back(static_cast<float>(double(s.base_inv_freq[i]) / s.inv_freq[i]));
  f.positional_tensors["rope_freqs.weight"] = divisors;
  const std::string path = posenc::testing::temp_path(".gguf");
  std::ofstream(path, std::ios::binary) << posenc::gguf_bytes(f);
  return path;
}

TEST(CliGgufJson, ReportsTheScheduleAndAgreementWithAConfig) {
  const std::string file = llama31_gguf_file();
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
  const auto r = run("gguf " + llama31_gguf_file() + " --json --config " + posenc::testing::write_config(config));
  EXPECT_EQ(r.code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("agrees_with_hf"), false);
  ASSERT_FALSE(j.at("mismatches").empty());
  EXPECT_EQ(j.at("mismatches")[0].at("key"), "llama.rope.freq_base");
}

}  // namespace
