// Issue 26: Qwen2.5-Omni's thinker (below), and GPT-J and CodeGen (modeling_gptj.py, modeling_codegen.py in transformers 5.5.0.dev0):
// their attention builds its own sinusoids at base 10000 over config.rotary_dim channels
// (create_sinusoidal_positions) and rotates each head's first rotary_dim channels in GPT-J pairs
// (rotate_every_two); rope_theta, partial_rotary_factor and rope dicts are not read. Checked on the
// published configs against that formula written out here.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/model_spec.h"

namespace posenc {
namespace {

using testing::real_config;

// create_sinusoidal_positions: inv_freq = 1 / 10000^(arange(0, dim, 2) / dim) in float32.
float gptj_inv_freq(int k, int dim) { return 1.0f / std::pow(10000.0f, static_cast<float>(2 * k) / static_cast<float>(dim)); }

TEST(Families7, GptjAndCodegenFromTheirPublishedConfigs) {
  struct Case {
    const char* name;
    int layers, head_dim, rotary_dim;
  };
  for (const Case c : {Case{"gpt-j-6b", 28, 256, 64}, Case{"codegen-350M-mono", 20, 64, 32}}) {
    SCOPED_TRACE(c.name);
    const ModelSpec spec = load_model_spec(real_config(c.name));
    ASSERT_NE(spec.family, nullptr);
    EXPECT_TRUE(spec.warnings.empty()) << spec.warnings.front();
    ASSERT_EQ(spec.layers.size(), std::size_t(c.layers));
    for (const LayerSpec& l : spec.layers) {
      EXPECT_TRUE(l.rope);
      EXPECT_EQ(l.layout, RopeLayout::kInterleaved);
      EXPECT_EQ(l.head_dim, c.head_dim);
      EXPECT_EQ(l.rotary_offset, 0);
      EXPECT_EQ(l.rotary_dim, c.rotary_dim);
      EXPECT_DOUBLE_EQ(l.softmax_scale, 1.0 / std::sqrt(double(c.head_dim)));  // scale_attn = sqrt(head_dim)
    }
    const RopeSchedule& s = spec.schedules.at(0);
    ASSERT_EQ(s.inv_freq.size(), std::size_t(c.rotary_dim / 2));
    for (int k = 0; k < c.rotary_dim / 2; ++k) EXPECT_NEAR(s.inv_freq[k], gptj_inv_freq(k, c.rotary_dim), 2e-7 * s.inv_freq[k]) << k;
  }
}

// golden's q_out is HF's rotation: pairs (2i, 2i + 1) of the first rotary_dim channels by
// float32(p * inv_freq_i), the rest of the head unchanged.
TEST(Families7, GoldenRotatesGptjPairsOnTheRotaryChannelsOnly) {
  const ModelSpec spec = load_model_spec(real_config("codegen-350M-mono"));
  const std::vector<std::int64_t> positions{0, 1, 2047};
  const Golden g = make_golden(spec, GoldenParams{positions, 7});
  auto tensor = [&](const std::string& name) -> const F32Tensor& {
    for (const F32Tensor& t : g.tensors.tensors)
      if (t.name == "full_attention." + name) return t;
    throw Error("no tensor " + name);
  };
  const F32Tensor &q = tensor("q"), &q_out = tensor("q_out");
  const int D = 64, R = 32;
  double worst = 0;
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const float* in = &q.data[r * D];
    const float* out = &q_out.data[r * D];
    for (int i = 0; i < R / 2; ++i) {
      const double a = static_cast<float>(static_cast<float>(positions[r]) * gptj_inv_freq(i, R));
      worst = std::max(worst, std::fabs(out[2 * i] - (in[2 * i] * std::cos(a) - in[2 * i + 1] * std::sin(a))));
      worst = std::max(worst, std::fabs(out[2 * i + 1] - (in[2 * i + 1] * std::cos(a) + in[2 * i] * std::sin(a))));
    }
    for (int c = R; c < D; ++c) EXPECT_EQ(out[c], in[c]) << c;  // past rotary_dim: unchanged
  }
  EXPECT_LT(worst, 2e-6);
}

// What HF does not read is said, not honoured; rotary_dim absent is GPTJConfig's 64.
TEST(Families7, KeysGptjDoesNotReadAreWarnedAndIgnored) {
  const std::string base = R"("model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_layer": 2, "n_positions": 2048)";
  const ModelSpec theta = parse_model_spec("{" + base + R"(, "rotary_dim": 64, "rope_theta": 500000,
                                            "rope_scaling": {"rope_type": "linear", "factor": 4}})");
  ASSERT_EQ(theta.warnings.size(), 2u);
  EXPECT_NE(theta.warnings[0].find("rope_theta ignored"), std::string::npos) << theta.warnings[0];
  EXPECT_NE(theta.warnings[1].find("rope_scaling ignored"), std::string::npos) << theta.warnings[1];
  EXPECT_EQ(theta.schedules.at(0).inv_freq.at(1), gptj_inv_freq(1, 64));  // base 10000, unscaled
  const ModelSpec absent = parse_model_spec("{" + base + "}");
  EXPECT_EQ(absent.layers.at(0).rotary_dim, 64);
  const ModelSpec pct = parse_model_spec("{" + base + R"(, "rotary_pct": 0.5, "rotary_emb_base": 1e5})");
  for (const std::string& w : pct.warnings) EXPECT_NE(w.find("ignored: model_type 'gptj'"), std::string::npos) << w;
  EXPECT_EQ(pct.warnings.size(), 2u);
  auto error_of = [&](const std::string& extra) {
    try {
      parse_model_spec("{" + base + ", " + extra + "}");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of(R"("rotary_dim": 512)").find("rotary_dim"), std::string::npos);  // past head_dim 256
  EXPECT_NE(error_of(R"("rotary_dim": 63)").find("rotary_dim must be even"), std::string::npos);
  EXPECT_NE(error_of(R"("rotary_dim": null)").find("whole n_embd"), std::string::npos);  // HF: rotary_dim or embed_dim
  try {
    parse_model_spec(R"({"model_type": "codegen", "n_embd": 1024, "n_head": 15, "n_layer": 1})");
    ADD_FAILURE() << "n_embd 1024 over 15 heads accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_embd 1024 is not divisible by n_head 15"), std::string::npos) << e.what();
  }
}

// Qwen2.5-Omni: the text model is thinker_config.text_config (Qwen2_5OmniConfig.get_text_config),
// contiguous M-RoPE, and golden's vision sequence follows its get_rope_index: each piece at the last
// piece's max + 1, image and video T ids at position_id_per_seconds (25) per second.
TEST(Families7, QwenOmniThinkerTextModelAndItsPositionIds) {
  const ModelSpec spec = load_model_spec(testing::extra_config("Qwen2.5-Omni-7B__constructed"));
  ASSERT_NE(spec.family, nullptr);
  EXPECT_TRUE(spec.warnings.empty()) << spec.warnings.front();
  EXPECT_EQ(spec.layers.size(), 28u);
  EXPECT_EQ(spec.mrope_section, (std::vector<int>{16, 24, 24}));
  EXPECT_EQ(spec.mrope_style, MropeStyle::kContiguous);
  EXPECT_EQ(spec.schedules.at(0).inv_freq.at(1), static_cast<float>(std::pow(1e6, -2.0 / 128)));
  ASSERT_TRUE(spec.vision_rope);  // the thinker's Qwen2.5-VL tower
  EXPECT_EQ(spec.vision_rope->params.head_dim, 80);
  GoldenParams params{{0, 1}, 1};
  params.image_grid = {1, 4, 6};
  params.video_grid = {2, 4, 4};
  const Golden g = make_golden(spec, params);
  const F32Tensor* ids = nullptr;
  for (const F32Tensor& t : g.tensors.tensors)
    if (t.name == "full_attention.vision.position_ids") ids = &t;
  ASSERT_NE(ids, nullptr);
  // text 0 1 | image T 2, H 2..3, W 2..4 | text 5 6 | video T 7 and 7 + 25, H, W 7..8 | text 33 34
  const std::int64_t N = ids->shape.at(1);
  ASSERT_EQ(N, 20);
  const std::vector<float> T(ids->data.begin(), ids->data.begin() + N);
  EXPECT_EQ(T, (std::vector<float>{0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 7, 7, 7, 7, 32, 32, 32, 32, 33, 34}));
  // Without an mrope_section HF v5 raises KeyError in the forward: said, not invented.
  const ModelSpec bare = parse_model_spec(R"({"model_type": "qwen2_5_omni", "thinker_config": {"text_config": {
      "model_type": "qwen2_5_omni_text", "hidden_size": 512, "num_attention_heads": 4, "num_hidden_layers": 2}}})");
  ASSERT_EQ(bare.warnings.size(), 1u);
  EXPECT_NE(bare.warnings[0].find("thinker_config.text_config.rope_parameters"), std::string::npos) << bare.warnings[0];
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// Qwen3-Omni-MoE: strict reading accepts the `interleaved` key its config class skips at validation
// (and only for this family), interleaved M-RoPE whatever the dict says, [24, 20, 20] when the dict
// has no sections (modeling_qwen3_omni_moe.py), q/k norm before RoPE; float position ids: no vision
// vectors in golden.
TEST(Families7, QwenThreeOmniThinker) {
  const ModelSpec spec = load_model_spec(testing::extra_config("Qwen3-Omni-30B-A3B__constructed"));
  ASSERT_NE(spec.family, nullptr);
  EXPECT_TRUE(spec.warnings.empty()) << spec.warnings.front();
  EXPECT_EQ(spec.layers.size(), 48u);
  EXPECT_EQ(spec.mrope_style, MropeStyle::kInterleaved);
  EXPECT_EQ(spec.layers.at(0).qk_norm, QkNormPlacement::kBeforeRope);
  EXPECT_FALSE(spec.mrope_vision);
  const std::string text = R"("text_config": {"model_type": "qwen3_omni_moe_text", "hidden_size": 512, "head_dim": 128,
      "num_attention_heads": 4, "num_hidden_layers": 2, "rope_scaling": {"rope_type": "default"}})";
  const ModelSpec bare = parse_model_spec(R"({"model_type": "qwen3_omni_moe", "thinker_config": {)" + text + "}}");
  EXPECT_EQ(bare.mrope_section, (std::vector<int>{24, 20, 20}));
  EXPECT_EQ(bare.mrope_style, MropeStyle::kInterleaved);
  EXPECT_TRUE(bare.warnings.empty()) << bare.warnings.front();
  // Another family does not skip `interleaved`: an unknown rope key there, as before.
  EXPECT_THROW(parse_model_spec(R"({"model_type": "qwen2_vl", "hidden_size": 512, "num_attention_heads": 4,
      "num_hidden_layers": 1, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24], "interleaved": true}})"),
               Error);
}

}  // namespace
}  // namespace posenc
