// Issue 26: GPT-J and CodeGen (modeling_gptj.py, modeling_codegen.py in transformers 5.5.0.dev0):
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
  try {
    parse_model_spec("{" + base + R"(, "rotary_dim": 512})");
    ADD_FAILURE() << "rotary_dim past head_dim accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary_dim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc
