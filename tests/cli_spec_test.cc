// `posenc spec` end to end: the fixed JSON keys engines read, warnings, exit codes.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

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

// DeepSeek-V3.2's indexer in the text and the JSON; HunYuan-VL's XD-RoPE sections in both.
TEST(CliSpec, IndexerAndXdropeAreSaidInTextAndJson) {
  const auto text = run("spec --config " + reference_dir() + "/real-configs/DeepSeek-V3.2.json");
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("DSA indexer: 64 heads of 128, RoPE half_split pairs on channels [0, 64) (the layer's "
                          "cos/sin), softmax scale 0.0883883476"),
            std::string::npos)
      << text.out;
  const auto x = run_json("spec --config " + reference_dir() + "/real-configs/DeepSeek-V3.2.json").at("layers").at(60).at("indexer");
  EXPECT_EQ(x.at("schedule"), 0);
  EXPECT_NEAR(x.at("softmax_scale").get<double>(), 0.08838834764831845, 1e-15);
  const auto hy = run("spec --config " + reference_dir() + "/configs-extra/HunyuanOCR__constructed.json");
  EXPECT_NE(hy.out.find("M-RoPE sections 16 16 16 16 (xdrope)"), std::string::npos) << hy.out;
  const auto freqs = run_json("freqs --json --config " + reference_dir() + "/configs-extra/HunyuanOCR__constructed.json");
  EXPECT_EQ(freqs.at("mrope_xdrope"), true);
}

// The vision tower's 2-D RoPE in the text and the JSON (Pixtral's, from Devstral's vision_config).
TEST(CliSpec, VisionTowerRopeIsSaidInTextAndJson) {
  const std::string cfg = reference_dir() + "/real-configs/Devstral-Small-2-24B-Instruct.json";
  const auto text = run("spec --config " + cfg);
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("vision tower: pixtral 2-D RoPE: head_dim 64, theta 1e+04, half_split pairs; frequencies "
                          "[0, 16) read the row, [16, 32) the column"),
            std::string::npos)
      << text.out;
  const auto v = run_json("spec --json --config " + cfg).at("vision_rope");
  EXPECT_EQ(v.at("family"), "pixtral");
  EXPECT_EQ(v.at("patches_per_side"), 110);
  EXPECT_EQ(v.at("inv_freq").size(), 32u);
  EXPECT_NEAR(v.at("inv_freq")[16].get<double>(), std::pow(1e4, -2.0 / 64), 1e-7);  // u_1: the first column frequency
  EXPECT_TRUE(run_json("spec --json --config " + reference_dir() + "/real-configs/Qwen3-8B.json").at("vision_rope").is_null());
  // explain says what spec says: the tower, and M-RoPE's axes
  const auto explained = run("explain --config " + cfg);
  EXPECT_NE(explained.out.find("The vision tower: pixtral 2-D RoPE: head_dim 64"), std::string::npos) << explained.out;
  const auto omni = run("explain --config " + reference_dir() + "/configs-extra/Qwen2.5-Omni-7B__constructed.json");
  EXPECT_NE(omni.out.find("M-RoPE (contiguous, sections 16, 24, 24)"), std::string::npos) << omni.out;
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

// Every config the project carries (the real ones, the examples, the constructed ones):
// `posenc spec` and `posenc freqs --layer-type all` read the same model, so each rotating
// layer's schedule in spec is the one freqs prints for its layer type (or the model's one
// schedule when freqs has no layer types), and each layer type freqs prints rotates in spec.
std::vector<std::string> every_config() {
  std::vector<std::string> out;
  for (const std::string dir : {reference_dir() + "/real-configs", reference_dir() + "/configs-extra",
                                reference_dir() + "/../../examples/configs"}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() != ".json" || name == "manifest.json" || name == "keys-in-the-wild.json") continue;
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CliSpec, SpecAgreesWithFreqsOnEveryConfig) {
  const auto configs = every_config();
  ASSERT_GE(configs.size(), 47u);  // 41 real, 4 examples, EXAONE-4.5, MiniCPM3
  for (const std::string& path : configs) {
    SCOPED_TRACE(path);
    // Where HF itself fails (MiniCPM3: KeyError('factor')), both commands refuse, with one reason.
    const auto spec_run = run("spec --json --config " + path);
    if (spec_run.code != 0) {
      const auto freqs_run = run("freqs --json --layer-type all --config " + path);
      EXPECT_EQ(spec_run.code, 2) << spec_run.err;
      EXPECT_EQ(freqs_run.code, 2);
      EXPECT_EQ(spec_run.err, freqs_run.err);
      EXPECT_NE(spec_run.err.find("HF v5 raises"), std::string::npos) << spec_run.err;
      continue;
    }
    const auto spec = nlohmann::json::parse(spec_run.out);
    const auto freqs = run_json("freqs --layer-type all --config " + path).at("layers");
    ASSERT_FALSE(freqs.empty());
    auto freqs_for = [&](const std::string& type) -> const nlohmann::json* {
      for (const auto& f : freqs)
        if (f.at("layer_type") == type) return &f;
      return freqs.size() == 1 && freqs[0].at("layer_type") == "" ? &freqs[0] : nullptr;
    };
    std::set<std::string> rotating;
    for (const auto& l : spec.at("layers")) {
      if (!l.at("rope").get<bool>()) continue;
      const std::string type = l.at("layer_type");
      rotating.insert(type);
      const auto& s = spec.at("schedules").at(l.at("schedule").get<int>());
      const nlohmann::json* f = freqs_for(type);
      if (!f && type == "chunked_attention") f = freqs_for("full_attention");  // Llama 4 names its RoPE layers so
      ASSERT_NE(f, nullptr) << "freqs has no schedule for the rotating layers of type " << type;
      for (const char* key : {"rope_type", "rotary_dim", "inv_freq", "attention_factor"})
        EXPECT_EQ(s.at(key), f->at(key)) << type << " " << key;
      int rotated = 0;  // the rotated channels spec names are the channels freqs gives a frequency
      for (const auto& c : l.at("rotated_channels")) rotated += c[1].get<int>() - c[0].get<int>();
      EXPECT_EQ(rotated, f->at("rotated_dim").get<int>()) << type;
    }
    if (spec.at("layers").empty()) continue;  // unknown family: the schedule alone
    for (const auto& f : freqs) {
      const std::string type = f.at("layer_type");
      if (!type.empty()) EXPECT_EQ(rotating.count(type), 1u) << "freqs shows " << type << ", which spec says is NoPE";
    }
  }
}

TEST(CliSpec, Exaone45IsAKnownFamilyWithTheThetaOfItsRopeParameters) {
  const auto r = run("spec --json --config " + reference_dir() + "/configs-extra/EXAONE-4.5-33B__constructed.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("not in posenc's family table"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("model_type"), "exaone4_5");
  EXPECT_TRUE(j.at("family_known").get<bool>());
  for (const auto& n : j.at("notes")) EXPECT_EQ(n.get<std::string>().find("rope_theta absent"), std::string::npos) << n;
  EXPECT_FALSE(j.at("layers").at(3).at("rope").get<bool>());
  const auto f = run_json("freqs --config " + reference_dir() + "/configs-extra/EXAONE-4.5-33B__constructed.json");
  EXPECT_EQ(f.at("rope_theta"), 1e6);
  EXPECT_EQ(f.at("rope_type"), "llama3");
}

}  // namespace

// Issue 32: models without RoPE are described for what they are by spec and explain, and refused
// by freqs with the scheme named and spec suggested.
TEST(CliSpec, ModelsWithoutRopeAreDescribedAndFreqsRefusesThem) {
  struct Case {
    const char* file;
    const char* scheme;   // positions.stacks[0].scheme
    const char* words;    // in explain's text
  };
  for (const Case& c : {Case{"bert-base-uncased", "learned_absolute", "learned table of 512 rows"},
                        Case{"bloom-560m__constructed", "alibi", "each of the 16 heads subtracts slope * distance"},
                        Case{"falcon-rw-1b__constructed", "alibi", "each of the 32 heads"},
                        Case{"t5-small", "t5_relative_buckets", "Distances 0 to 7 each have their own bucket"},
                        Case{"whisper-tiny__constructed", "sinusoidal", "fixed sinusoidal table of 1500 rows"},
                        Case{"mpt-7b-instruct__constructed", "alibi", "each of the 32 heads subtracts slope * distance"},
                        Case{"opt-125m__constructed", "learned_absolute", "learned table of 2048 rows"},
                        Case{"bart-large-mnli__constructed", "learned_absolute", "decoder: a learned table of 1024 rows"},
                        Case{"roberta-base__constructed", "learned_absolute", "learned table of 512 rows"},
                        Case{"umt5-base__constructed", "t5_relative_buckets", "Distances 0 to 7 each have their own bucket"}}) {
    SCOPED_TRACE(c.file);
    const std::string config = " --config " + reference_dir() + "/positions-configs/" + c.file + ".json";
    const auto j = run_json("spec" + config);
    EXPECT_EQ(j.at("positions").at("rope"), false);
    EXPECT_EQ(j.at("positions").at("stacks").at(0).at("scheme"), c.scheme);
    EXPECT_TRUE(j.at("layers").empty() && j.at("schedules").empty());
    const auto text = run("spec" + config);
    EXPECT_EQ(text.code, 0) << text.err;
    EXPECT_NE(text.out.find("(no RoPE)"), std::string::npos) << text.out;
    EXPECT_EQ(text.err, "");  // no "unknown family" warning: the scheme is known
    const auto explained = run("explain" + config);
    EXPECT_EQ(explained.code, 0) << explained.err;
    EXPECT_NE(explained.out.find("No RoPE"), std::string::npos) << explained.out;
    EXPECT_NE(explained.out.find(c.words), std::string::npos) << explained.out;
    EXPECT_EQ(explained.out.find("rotates"), std::string::npos) << explained.out;
    EXPECT_EQ(run_json("explain" + config).at("rope"), false);
    EXPECT_CLEAN_ERROR(run("freqs" + config), "has no rotary embedding", "posenc spec");
  }
  const auto bloom = run_json("spec --config " + reference_dir() + "/positions-configs/bloom-560m__constructed.json");
  const auto& stack = bloom.at("positions").at("stacks").at(0);
  EXPECT_EQ(stack.at("heads"), 16);
  EXPECT_EQ(stack.at("slopes").at(3), 0.25);  // 2^(-8 * 4 / 16)
  const auto t5 = run_json("spec --config " + reference_dir() + "/positions-configs/t5-small.json");
  EXPECT_EQ(t5.at("positions").at("stacks").at(1).at("bidirectional"), false);
  EXPECT_EQ(t5.at("positions").at("stacks").at(1).at("num_buckets"), 32);
  const auto bert = run_json("spec --config " + reference_dir() + "/positions-configs/bert-base-uncased.json");
  EXPECT_EQ(bert.at("positions").at("stacks").at(0).at("max_positions"), 512);
  EXPECT_EQ(bert.at("positions").at("stacks").at(0).at("row_offset"), 0);
  // OPTLearnedPositionalEmbedding: position p reads row p + 2; RoBERTa's first token row pad + 1 = 2.
  for (const char* file : {"opt-125m__constructed", "roberta-base__constructed"}) {
    const auto offset = run_json(std::string("spec --config ") + reference_dir() + "/positions-configs/" + file + ".json");
    EXPECT_EQ(offset.at("positions").at("stacks").at(0).at("row_offset"), 2) << file;
  }
  const auto text = run("spec --config " + reference_dir() + "/positions-configs/umt5-base__constructed.json");
  EXPECT_NE(text.out.find("every self-attention layer owns its own"), std::string::npos) << text.out;
}

TEST(CliSpec, RopeModelsSayRopeInTheirPositions) {
  const auto j = run_json("spec --config " + reference_dir() + "/real-configs/Qwen3-8B.json");
  EXPECT_EQ(j.at("positions").at("rope"), true);
  EXPECT_EQ(j.at("positions").at("stacks").at(0).at("scheme"), "rope");
}
