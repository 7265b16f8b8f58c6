// `posenc freqs` end to end: the binary, its JSON, its exit codes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_run.h"
#include "posenc/rope_fields.h"
#include "golden.h"

namespace {

using namespace posenc::testing;

void expect_schedule(const nlohmann::json& got, const nlohmann::json& golden_case, const std::string& inv_key,
                     const std::string& att_key) {
  EXPECT_LE(max_rel_diff(got.at("inv_freq").get<std::vector<double>>(),
                         golden_case.at(inv_key).get<std::vector<double>>()),
            2e-6);
  EXPECT_NEAR(got.at("attention_factor").get<double>(), golden_case.at(att_key).get<double>(), 1e-12);
}

TEST(CliFreqs, EveryGoldenCaseThroughConfigFiles) {
  const std::regex seq_key("inv_freq_seq_len_([0-9]+)");
  for (const auto& c : golden().at("rope_inv_freq")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const std::string path = write_config(c.at("config_input"));
    const auto j = run_json("freqs --config " + path);
    expect_schedule(j, c, "inv_freq", "attention_factor");
    EXPECT_EQ(j.at("rope_type"), c.at("rope_parameters_after_standardize").at("rope_type"));
    EXPECT_EQ(j.at("head_dim"), c.at("head_dim"));
    EXPECT_EQ(j.at(j.at("rope_type") == "proportional" ? "rotated_dim" : "rotary_dim"), c.at("rotary_dim"));
    if (c.contains("correction_range_low_high")) {
      EXPECT_LE(max_rel_diff(j.at("correction_range").get<std::vector<double>>(),
                             c.at("correction_range_low_high").get<std::vector<double>>()),
                1e-12);
    }
    for (auto it = c.begin(); it != c.end(); ++it) {
      std::smatch m;
      if (!std::regex_match(it.key(), m, seq_key)) continue;
      SCOPED_TRACE("--seq-len " + m[1].str());
      const auto at_len = run_json("freqs --config " + path + " --seq-len " + m[1].str());
      const std::string att = "attention_factor_seq_len_" + m[1].str();
      expect_schedule(at_len, c, it.key(), c.contains(att) ? att : "attention_factor");
      EXPECT_EQ(at_len.at("seq_len"), std::stoll(m[1]));
    }
    std::remove(path.c_str());
  }
}

TEST(CliFreqs, FromFlagsEqualsFromConfig) {
  const auto& qwen = posenc::testing::golden_case("rope_inv_freq", "yarn_qwen2.5_7b");
  expect_schedule(run_json("freqs --rope-type yarn --theta 1e6 --head-dim 128 --factor 4 --original-max 32768"), qwen,
                  "inv_freq", "attention_factor");
  const auto& oss = posenc::testing::golden_case("rope_inv_freq", "yarn_gpt_oss_truncate_false");
  const auto j = run_json("freqs --rope-type yarn --theta 150000 --head-dim 64 --factor 32 --original-max 4096 "
                          "--no-truncate");
  expect_schedule(j, oss, "inv_freq", "attention_factor");
  EXPECT_NEAR(j.at("correction_range")[0].get<double>(), 8.092779115512402, 1e-12);
}

TEST(CliFreqs, HfCompatibleGivesHfBits) {
  const auto& c = posenc::testing::golden_case("rope_inv_freq", "llama3_llama3.1_8b");
  const std::string path = write_config(c.at("config_input"));
  const auto j = run_json("freqs --hf-compatible --config " + path);
  EXPECT_EQ(j.at("precision"), "hf_float32");
  EXPECT_EQ(j.at("inv_freq").get<std::vector<double>>(), c.at("inv_freq").get<std::vector<double>>());
  std::remove(path.c_str());
}

TEST(CliFreqs, ReadableTable) {
  const CliRun r = run("freqs --rope-type llama3 --theta 500000 --head-dim 128 --factor 8 --low-freq-factor 1 "
                    "--high-freq-factor 4 --original-max 8192");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wavelength"), std::string::npos);
  EXPECT_NE(r.out.find("interpolated"), std::string::npos);
  // 64 rows, the last one divided by 8 (interpolated).
  EXPECT_NE(r.out.find("\n   63  "), std::string::npos);
  const std::string last = r.out.substr(r.out.find("\n   63  "));
  EXPECT_NE(last.find("yes"), std::string::npos);
}

TEST(CliFreqs, BadInputExitsWithTwoAndNamesTheProblem) {
  const std::string bad_factor = write_config(
      nlohmann::json::parse(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": -2}})"));
  const std::string unknown_key = write_config(
      nlohmann::json::parse(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2, "fator": 2}})"));
  const std::string not_json = temp_path(".json");
  std::ofstream(not_json) << "{\"head_dim\": 64,";
  expect_usage_errors(
      {
          {"freqs --config " + bad_factor, "-2"},
          {"freqs --config " + unknown_key, "fator"},
          {"freqs --config " + not_json, "not valid JSON"},
          {"freqs --config /nonexistent/config.json", "/nonexistent/config.json"},
          {"freqs --config " + bad_factor + " --head-dim 64", "exclude"},
          {"freqs", "--config"},
          {"freqs --rope-type yarn", "--head-dim"},
          {"freqs --rope-type bogus --head-dim 64", "bogus"},
          {"freqs --head-dim 64 --seq-len 0", "seq_len"},
          {"freqs --head-dim abc", "abc"},
          {"freqs --bogus-flag", "bogus-flag"},
          {"nosuchcommand", "nosuchcommand"},
      },
      /*nothing_on_stdout=*/true);
  // --lenient: the unknown key becomes a warning on stderr; the schedule still prints.
  const CliRun lenient = run("freqs --lenient --json --config " + unknown_key);
  EXPECT_EQ(lenient.code, 0);
  EXPECT_NE(lenient.err.find("warning"), std::string::npos);
  EXPECT_NE(lenient.err.find("fator"), std::string::npos);
  for (const auto& p : {bad_factor, unknown_key, not_json}) std::remove(p.c_str());
}

TEST(CliFreqs, LayerTypeSelection) {
  const std::string gemma = posenc::testing::reference_dir() + "/real-configs/gemma-3-1b-it.json";
  EXPECT_EQ(run_json("freqs --config " + gemma).at("rope_theta"), 1e6);
  EXPECT_EQ(run_json("freqs --config " + gemma + " --layer-type sliding_attention").at("rope_theta"), 1e4);
  const auto all = run_json("freqs --config " + gemma + " --layer-type all");
  ASSERT_EQ(all.at("layers").size(), 2u);
  EXPECT_NE(all.at("layers")[0].at("rope_theta"), all.at("layers")[1].at("rope_theta"));
  const CliRun r = run("freqs --config " + gemma + " --layer-type chunked_attention");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("sliding_attention"), std::string::npos) << "lists what the config has";
}

}  // namespace

namespace {

TEST(CliFreqs, HelpOffersEveryRopeParamsFieldUnderItsHfName) {
  const CliRun r = run("freqs --help");
  ASSERT_EQ(r.code, 0) << r.err;
  int rows = 0;
  const posenc::RopeParams defaults;
  posenc::for_each_field(defaults, [&](const posenc::RopeField& row, const auto&) {
    ++rows;
    const std::string flag = posenc::flag_of(row.name);
    const bool listed = r.out.find("  " + flag + " ") != std::string::npos || r.out.find("  " + flag + ",") != std::string::npos;
    EXPECT_TRUE(listed) << flag << " missing from\n" << r.out;
  });
  EXPECT_GT(rows, 20);
}

TEST(CliFreqs, PRopeIsTheProportionalTypeAndHelpSaysSo) {
  const std::string tail = " --head-dim 64 --partial-rotary-factor 0.25";
  const auto p_rope = run_json("freqs --rope-type p-rope" + tail);
  EXPECT_EQ(p_rope, run_json("freqs --rope-type proportional" + tail));
  EXPECT_EQ(p_rope.at("rope_type"), "proportional");
  const CliRun help = run("freqs --help");
  ASSERT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("p-rope = proportional"), std::string::npos) << help.out;
}

TEST(CliFreqs, ClipLowFlagsClipTheLowestFrequencies) {
  const auto j = run_json("freqs --head-dim 64 --clip-low 4 --clip-hard");
  const auto inv = j.at("inv_freq").get<std::vector<double>>();
  ASSERT_EQ(inv.size(), 32u);
  for (std::size_t i = 0; i < inv.size(); ++i) EXPECT_EQ(inv[i] == 0, i >= 28) << i;
  EXPECT_EQ(j.at("clip_low"), 4);
  EXPECT_EQ(j.at("rotated_dim"), 56);
  const CliRun too_many = run("freqs --head-dim 64 --clip-low 33");
  EXPECT_NE(too_many.code, 0);
  EXPECT_NE(too_many.err.find("clip_low must be in [0, 32]"), std::string::npos) << too_many.err;
}

TEST(CliFreqs, OldFlagSpellingsEqualTheHfNames) {
  const std::string tail = " --head-dim 64 --rope-type yarn --factor 8";
  EXPECT_EQ(run_json("freqs --theta 5e5 --original-max 4096 --max-pos 32768 --no-truncate" + tail),
            run_json("freqs --rope-theta 5e5 --original-max-position-embeddings 4096 --max-position-embeddings 32768 "
                     "--no-truncate" + tail));
  const auto beta = run_json("freqs --head-dim 64 --llama-4-scaling-beta 0.1 --mrope-section 8,12,12 --mrope-interleaved");
  EXPECT_EQ(beta.at("llama_4_scaling_beta"), 0.1);
  EXPECT_EQ(beta.at("mrope_interleaved"), true);
  EXPECT_NE(run_json("freqs --head-dim 64 --rope-theta 500000").at("inv_freq"),
            run_json("freqs --head-dim 64").at("inv_freq"));
}

}  // namespace
