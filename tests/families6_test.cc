// Issue 26, model families round three: DeepSeek-V3.2 (the main MLA attention rotates its trailing
// qk_rope_head_dim channels in interleaved pairs, its lightning indexer the *leading* ones
// half-split, both at the layer's cos/sin). Each rule is checked against values derived here in
// double from HF's code (modeling_deepseek_v32.py), on the config HF keeps beside its port.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/engine_json.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/model_spec.h"

namespace posenc {
namespace {

using nlohmann::json;

std::string real(const std::string& name) { return testing::reference_dir() + "/real-configs/" + name + ".json"; }
json read_json(const std::string& path) { return json::parse(testing::read_file(path)); }

const F32Tensor& tensor(const Golden& g, const std::string& name) {
  for (const F32Tensor& t : g.tensors.tensors)
    if (t.name == name) return t;
  throw Error("golden has no tensor " + name);
}

// yarn_get_mscale(factor, mscale_all_dim) = 0.1 * mscale_all_dim * ln(factor) + 1.
double mscale(double factor, double all_dim) { return 0.1 * all_dim * std::log(factor) + 1.0; }

// DeepseekV32Attention: q = [qk_nope 128 | qk_rope 64], apply_rotary_pos_emb_interleave on the last
// 64; self.scaling = yarn_apply_mscale(rope_parameters, 192^-0.5) = 192^-0.5 * mscale(40, 1)^2.
// DeepseekV32Indexer: index_n_heads 64 heads of index_head_dim 128, rotate_half on channels
// [0, 64), softmax_scale 128^-0.5.
TEST(Families6, DeepSeekV32MainAttentionAndIndexer) {
  const ModelSpec spec = load_model_spec(real("DeepSeek-V3.2"));
  ASSERT_NE(spec.family, nullptr);
  EXPECT_TRUE(spec.warnings.empty()) << spec.warnings.front();
  ASSERT_EQ(spec.layers.size(), 61u);
  const double scale = std::pow(192.0, -0.5) * mscale(40, 1) * mscale(40, 1);
  for (const LayerSpec& l : spec.layers) {
    SCOPED_TRACE(l.index);
    EXPECT_TRUE(l.rope);
    EXPECT_EQ(l.layout, RopeLayout::kDeepSeekV3);  // no rope_interleave key to read
    EXPECT_EQ(l.head_dim, 192);
    EXPECT_EQ(l.rotary_offset, 128);
    EXPECT_EQ(l.rotary_dim, 64);
    EXPECT_NEAR(l.softmax_scale, scale, 1e-12 * scale);
    ASSERT_TRUE(l.indexer);
    EXPECT_EQ(l.indexer->heads, 64);
    EXPECT_EQ(l.indexer->head_dim, 128);
    EXPECT_EQ(l.indexer->rotary_offset, 0);
    EXPECT_EQ(l.indexer->rotary_dim, 64);
    EXPECT_EQ(l.indexer->layout, RopeLayout::kHalfSplit);
    EXPECT_EQ(l.indexer->rotated_channels, (std::vector<std::array<int, 2>>{{0, 64}}));
    EXPECT_DOUBLE_EQ(l.indexer->softmax_scale, 1.0 / std::sqrt(128.0));
  }
  const json j = json::parse(model_spec_json(spec));
  const json& x = j.at("layers").at(0).at("indexer");
  EXPECT_EQ(x.at("pairing"), "half_split");
  EXPECT_EQ(x.at("rotated_channels"), json::parse("[[0, 64]]"));
  EXPECT_EQ(x.at("head_dim"), 128);
  // Families without an indexer carry no such key.
  EXPECT_FALSE(json::parse(model_spec_json(load_model_spec(real("Kimi-K2-Instruct")))).at("layers").at(0).contains("indexer"));
}

// golden's indexer vectors: rotate_half on the first 64 of 128 channels by the layer's own cos/sin
// (recomputed here from q and the golden cos/sin in double), the rest passing through; the
// layer's own q_out rotates pairs (128 + 2i, 129 + 2i) and writes them in half-split order.
TEST(Families6, DeepSeekV32GoldenIndexerRotatesTheLeadingChannelsHalfSplit) {
  const std::vector<std::int64_t> positions = {0, 1, 127, 4095, 163839};
  const Golden g = make_golden(load_model_spec(real("DeepSeek-V3.2")), GoldenParams{positions, 3});
  const F32Tensor &cos = tensor(g, "full_attention.cos"), &sin = tensor(g, "full_attention.sin");
  const F32Tensor &q = tensor(g, "full_attention.indexer_q"), &q_out = tensor(g, "full_attention.indexer_q_out");
  const F32Tensor &k_out = tensor(g, "full_attention.indexer_k_out"), &logits = tensor(g, "full_attention.indexer_logits");
  const F32Tensor &mq = tensor(g, "full_attention.q"), &mq_out = tensor(g, "full_attention.q_out");
  ASSERT_EQ(q.shape, (std::vector<std::int64_t>{5, 128}));
  ASSERT_EQ(cos.shape, (std::vector<std::int64_t>{5, 64}));
  double worst = 0;
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const float* in = &q.data[r * 128];
    const float* out = &q_out.data[r * 128];
    for (int c = 0; c < 128; ++c) {
      if (c >= 64) {
        EXPECT_EQ(out[c], in[c]) << "indexer channel " << c << " must pass through";
        continue;
      }
      const double co = cos.data[r * 64 + c], si = sin.data[r * 64 + c];  // cat(freqs, freqs): column c % 32
      const double want = c < 32 ? in[c] * co - in[c + 32] * si : in[c] * co + in[c - 32] * si;
      worst = std::max(worst, std::fabs(out[c] - want));
    }
    // The main attention: pair i = channels (128 + 2i, 129 + 2i), output at 128 + i and 160 + i.
    const float* m_in = &mq.data[r * 192];
    const float* m_out = &mq_out.data[r * 192];
    for (int i = 0; i < 32; ++i) {
      const double co = cos.data[r * 64 + i], si = sin.data[r * 64 + i];
      const double a = m_in[128 + 2 * i], b = m_in[129 + 2 * i];
      worst = std::max(worst, std::fabs(m_out[128 + i] - (a * co - b * si)));
      worst = std::max(worst, std::fabs(m_out[160 + i] - (b * co + a * si)));
    }
  }
  EXPECT_LE(worst, 1e-6);  // one float32 rounding of values below 2
  double dot = 0;  // logits[1][2]
  for (int d = 0; d < 128; ++d) dot += static_cast<double>(q_out.data[128 + d]) * k_out.data[2 * 128 + d];
  EXPECT_NEAR(logits.data[1 * 5 + 2], dot / std::sqrt(128.0), 1e-5);
  const json manifest = json::parse(g.manifest_json);
  EXPECT_EQ(manifest.at("layer_types").at(0).at("indexer").at("pairing"), "half_split");
}

// DeepseekV32Config has no rope_interleave (modular_deepseek_v32.py: AttributeError): a config
// that carries one is warned about and the layout stays interleaved; an index_head_dim smaller
// than the rotated channels is refused naming both keys.
TEST(Families6, DeepSeekV32KeysItDoesNotReadOrCannotUse) {
  json c = read_json(real("DeepSeek-V3.2"));
  c["rope_interleave"] = false;
  const ModelSpec spec = parse_model_spec(c.dump());
  ASSERT_EQ(spec.warnings.size(), 1u);
  EXPECT_NE(spec.warnings[0].find("rope_interleave is not read by model_type 'deepseek_v32'"), std::string::npos)
      << spec.warnings[0];
  EXPECT_EQ(spec.layers.at(0).layout, RopeLayout::kDeepSeekV3);
  c = read_json(real("DeepSeek-V3.2"));
  c["index_head_dim"] = 32;
  try {
    parse_model_spec(c.dump());
    FAIL() << "index_head_dim 32 < qk_rope_head_dim 64 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index_head_dim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc
