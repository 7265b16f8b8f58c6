// `posenc spec` end to end: the fixed JSON keys engines read, warnings, exit codes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "golden.h"

namespace {

using posenc::testing::reference_dir;
using posenc::testing::run;
using posenc::testing::run_json;
using posenc::testing::write_config;

TEST(CliSpec, JsonHasOneEntryPerLayerWithTheFixedKeys) {
  const auto j = run_json("spec --config " + reference_dir() + "/real-configs/gpt-oss-20b.json");
  const auto& layers = j.at("layers");
  ASSERT_EQ(layers.size(), 24u);
  for (const char* key : {"index", "layer_type", "rope", "pairing", "rotary_dim", "attention", "window",
                          "query_scale", "softmax_scale_multiplier"})
    for (const auto& l : layers) EXPECT_TRUE(l.contains(key)) << key;
  EXPECT_EQ(layers[0].at("index"), 0);
  EXPECT_EQ(layers[0].at("attention"), "sliding");
  EXPECT_EQ(layers[0].at("window"), 128);
  EXPECT_EQ(layers[1].at("window"), nullptr);
  EXPECT_EQ(layers[1].at("pairing"), "half_split");
  EXPECT_EQ(layers[1].at("query_scale"), nullptr);
  EXPECT_EQ(layers[1].at("softmax_scale_multiplier"), 1.0);
  EXPECT_EQ(j.at("schedules").at(layers[1].at("schedule").get<int>()).at("inv_freq").size(), 32u);
}

TEST(CliSpec, QueryScaleNamesItsRuleAndParameters) {
  const auto j = run_json("spec --config " + reference_dir() + "/real-configs/Devstral-Small-2-24B-Instruct.json");
  const auto& q = j.at("layers").at(0).at("query_scale");
  EXPECT_EQ(q.at("rule"), "llama_4_scaling_beta");
  EXPECT_EQ(q.at("beta"), 0.1);
  EXPECT_EQ(q.at("original_max_position_embeddings"), 8192);
}

TEST(CliSpec, UnknownFamilyWarnsAndStillGivesTheSchedule) {
  const auto path = write_config({{"model_type", "brand_new_arch"}, {"head_dim", 64}, {"num_hidden_layers", 2}});
  const auto r = run("spec --json --config " + path);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("per-layer semantics"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("layers").empty());
  EXPECT_EQ(j.at("schedules").at(0).at("inv_freq").size(), 32u);
}

TEST(CliSpec, BadInputIsExitTwoWithAMessage) {
  EXPECT_EQ(run("spec").code, 2);  // --config is required
  const auto missing = run("spec --config /nonexistent/config.json");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/config.json"), std::string::npos);
  const auto bad = run("spec --config " + write_config({{"model_type", "gpt_oss"}, {"head_dim", 64},
                                                        {"num_hidden_layers", 3},
                                                        {"layer_types", {"full_attention"}}}));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("layer_types has 1 entries"), std::string::npos) << bad.err;
}

}  // namespace
