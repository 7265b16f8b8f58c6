// Issue 26, model families round three: each rule checked against a value derived here
// independently (the formula in double, or HF's own numbers), on the real configs in
// tests/data where one was found and on configs built in the test where none was.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/hf_config.h"
#include "posenc/model_spec.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

using nlohmann::json;

std::string real(const std::string& name) { return testing::reference_dir() + "/real-configs/" + name + ".json"; }
json real_json(const std::string& name) { return json::parse(testing::read_file(real(name))); }

// HunyuanImage-2.1's reprompt model: dynamic + alpha 1000, head_dim 128, rope_theta 1e4.
// modeling_hunyuan_v1_dense.py: base = theta * alpha^(d/(d-2)), inv_freq = base^(-2i/d), attention 1.
TEST(Families3, HunyuanNtkAlphaIsAStaticBase) {
  const ModelSpec spec = load_model_spec(real("HunyuanImage-2.1-reprompt"));
  const RopeSchedule& s = spec.schedules.at(0);
  const double base = 1e4 * std::pow(1000.0, 128.0 / 126.0);  // 11158839.9 (hy_v3's default_theta)
  EXPECT_NEAR(s.base, base, 1e-6 * base);
  EXPECT_NEAR(base, 11158840, 1);
  ASSERT_EQ(s.inv_freq.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    const double want = 1 / std::pow(base, 2.0 * i / 128);
    EXPECT_NEAR(s.inv_freq[i], want, 1e-6 * want) << i;
  }
  EXPECT_EQ(s.attention_factor, 1.0);
  EXPECT_EQ(spec.layers.at(0).qk_norm, QkNormPlacement::kAfterRope);
  // Past max_position_embeddings HF's dynamic_rope_update recomputes plain dynamic NTK (factor 1):
  // base = theta * (L / max_pos)^(d/(d-2)), alpha gone.
  const RopeSchedule past = compute_schedule(spec.rope.layers[0].params, 65536);
  EXPECT_NEAR(past.base, 1e4 * std::pow(2.0, 128.0 / 126.0), 1e-6);
  // An attention_head_dim without head_dim (Hunyuan-A13B) is the head size.
  json c = real_json("HunyuanImage-2.1-reprompt");
  c.erase("head_dim");
  c["attention_head_dim"] = 64;
  EXPECT_EQ(parse_hf_config(c.dump()).select().params.head_dim, 64);
}

TEST(Families3, AlphaIsHunyuansOnly) {
  json c = real_json("HunyuanImage-2.1-reprompt");
  c["model_type"] = "llama";  // RU _compute_dynamic_ntk_parameters does not read alpha
  const ModelRope m = parse_hf_config(c.dump());
  EXPECT_FALSE(m.select().params.alpha);
  EXPECT_EQ(compute_schedule(m.select().params).base, 1e4);
  c["rope_scaling"]["alpha"] = -1;
  c["model_type"] = "hunyuan_v1_moe";
  EXPECT_THROW(parse_hf_config(c.dump()), Error);  // "alpha must be a finite number > 0, got -1"
}

// RU standardize_rope_params: the top-level partial_rotary_factor overwrites the dict's,
// in a global dict and in every per-layer-type dict.
TEST(Families3, TopLevelPartialRotaryFactorOverwritesTheDict) {
  json c = real_json("Qwen3-8B");
  c["rope_scaling"] = {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
  c["partial_rotary_factor"] = 0.5;
  const ModelRope m = parse_hf_config(c.dump());
  EXPECT_EQ(compute_schedule(m.select().params).rotary_dim, 64);  // 128 * 0.5
  bool warned = false;
  for (const auto& w : m.warnings) warned = warned || w.find("overrides rope_scaling.partial_rotary_factor") != std::string::npos;
  EXPECT_TRUE(warned);
  json g = real_json("gpt-oss-20b");  // per-layer dicts
  g["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"partial_rotary_factor", 1.0}}},
                          {"sliding_attention", {{"rope_type", "default"}}}};
  g.erase("rope_scaling");
  g["partial_rotary_factor"] = 0.5;
  for (const LayerRope& l : parse_hf_config(g.dump()).layers) EXPECT_EQ(l.params.rotated_dim(), 32) << l.layer_type;
}

// The family's default_theta when the config has none (model-families-3.md §1).
TEST(Families3, DefaultThetaIsTheFamilys) {
  for (auto [name, theta] : {std::pair<const char*, double>{"Mixtral-8x7B-v0.1", 1e6}, {"Qwen2.5-VL-7B-Instruct", 1e6},
                             {"Qwen2.5-7B-Instruct", 1e4}, {"gpt-oss-20b", 150000}, {"Mistral-7B-Instruct-v0.3__full_dump", 1e4}}) {
    json c = real_json(name);
    json& text = c.contains("text_config") ? c["text_config"] : c;
    text.erase("rope_theta");
    if (text.contains("rope_scaling") && text["rope_scaling"].is_object()) text["rope_scaling"].erase("rope_theta");
    EXPECT_EQ(parse_hf_config(c.dump()).select().params.theta, theta) << name;
  }
}

// MiniCPM3: HF v5 raises KeyError('factor'); posenc refuses with that reason, --lenient computes.
TEST(Families3, MiniCpm3IsRefusedAsHfRefusesIt) {
  const std::string path = testing::reference_dir() + "/configs-extra/MiniCPM3-4B__constructed.json";
  try {
    load_hf_config(path);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KeyError('factor')"), std::string::npos) << e.what();
  }
  ConfigOptions lenient;
  lenient.lenient = true;
  const ModelSpec spec = load_model_spec(path, lenient);
  EXPECT_EQ(spec.layers.at(0).rotary_offset, 64);
  EXPECT_EQ(spec.layers.at(0).rotary_dim, 32);
  EXPECT_EQ(spec.layers.at(0).layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(spec.schedules.at(0).attention_factor, 1.0);  // factor 32768/32768 = 1
  json c = json::parse(testing::read_file(path));
  c["rope_scaling"]["factor"] = 1.0;  // with a factor HF loads it
  EXPECT_NO_THROW(parse_hf_config(c.dump()));
}

TEST(Families3, Glm41vMropeOverTheRotatedHalfWithGptjPairs) {
  const ModelSpec spec = load_model_spec(real("GLM-4.1V-9B-Thinking"));
  EXPECT_EQ(spec.mrope_section, (std::vector<int>{8, 12, 12}));
  EXPECT_EQ(spec.mrope_style, MropeStyle::kContiguous);
  const LayerSpec& l = spec.layers.at(0);
  EXPECT_EQ(l.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(l.rotary_dim, 64);  // 8 + 12 + 12 = 32 frequencies = the rotated half's
  EXPECT_EQ(l.head_dim, 128);
}

json hybrid(const char* type) {
  return {{"model_type", type}, {"hidden_size", 512}, {"num_attention_heads", 8}, {"num_hidden_layers", 8},
          {"rope_theta", 10000}};
}

TEST(Families3, GraniteSoftmaxScaleIsTheAttentionMultiplier) {
  json c = hybrid("granite");
  c["attention_multiplier"] = 0.015625;  // 1/64, the shipped Granite 3 value (1/sqrt(64) = 0.125)
  const ModelSpec spec = parse_model_spec(c.dump());
  EXPECT_EQ(spec.layers.at(0).softmax_scale, 0.015625);
  c.erase("attention_multiplier");  // GraniteConfig default 1.0
  EXPECT_EQ(parse_model_spec(c.dump()).layers.at(0).softmax_scale, 1.0);
}

TEST(Families3, HybridAttentionLayersWithoutPositions) {
  json g = hybrid("granitemoehybrid");
  g["layer_types"] = {"mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba", "attention"};
  g["position_embedding_type"] = "nope";
  g["attention_multiplier"] = 0.0078125;
  ModelSpec spec = parse_model_spec(g.dump());
  EXPECT_EQ(spec.layers.at(3).attention, AttentionKind::kFull);
  EXPECT_FALSE(spec.layers.at(3).rope);
  EXPECT_EQ(spec.layers.at(3).softmax_scale, 0.0078125);
  EXPECT_EQ(spec.layers.at(0).attention, AttentionKind::kNone);
  g["position_embedding_type"] = "rope";
  spec = parse_model_spec(g.dump());
  EXPECT_TRUE(spec.layers.at(3).rope);
  EXPECT_FALSE(spec.layers.at(0).rope);

  json j = hybrid("jamba");  // attention at i % 8 == 4
  spec = parse_model_spec(j.dump());
  for (const LayerSpec& l : spec.layers) {
    EXPECT_EQ(l.attention == AttentionKind::kFull, l.index == 4) << l.index;
    EXPECT_FALSE(l.rope) << l.index;
  }
  json n = hybrid("nemotron_h");
  n["hybrid_override_pattern"] = "M-M*-ME-";
  spec = parse_model_spec(n.dump());
  EXPECT_EQ(spec.layers.at(3).attention, AttentionKind::kFull);
  EXPECT_FALSE(spec.layers.at(3).rope);
  n["hybrid_override_pattern"] = "M-M*-MX-";
  EXPECT_THROW(parse_model_spec(n.dump()), Error);

  json b = hybrid("bamba");  // RoPE on the attention layers, partial rotary honoured
  b["attn_layer_indices"] = {2, 6};
  b["partial_rotary_factor"] = 0.5;
  spec = parse_model_spec(b.dump());
  EXPECT_TRUE(spec.layers.at(2).rope);
  EXPECT_EQ(spec.layers.at(2).rotary_dim, 32);
  EXPECT_FALSE(spec.layers.at(3).rope);
}

// Issue 26: a uniform model without num_hidden_layers still has golden vectors.
TEST(Families3, GoldenWithoutALayerCount) {
  const ModelSpec spec = load_model_spec(std::string(POSENC_EXAMPLES_DIR) + "/configs/qwen2.5-yarn-128k.json");
  EXPECT_TRUE(spec.layers.empty());
  ASSERT_TRUE(spec.every_layer);
  EXPECT_TRUE(spec.every_layer->rope);
  const Golden g = make_golden(spec, GoldenParams{{0, 1, 4095}, 0});
  EXPECT_FALSE(g.tensors.tensors.empty());
}

}  // namespace
}  // namespace posenc
