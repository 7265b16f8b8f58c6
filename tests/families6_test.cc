// Issue 26, model families round three: DeepSeek-V3.2 (the main MLA attention rotates its trailing
// qk_rope_head_dim channels in interleaved pairs, its lightning indexer the *leading* ones
// half-split, both at the layer's cos/sin) and HunYuan-VL's XD-RoPE (NTK-alpha, four position axes
// laid per cos/sin column). Each rule is checked against values derived here in double from HF's
// code (modeling_deepseek_v32.py, modeling_hunyuan_vl.py), on the config HF keeps beside its
// DeepSeek-V3.2 port and on a HunyuanOCR config built from mlx-vlm's test values.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/engine_json.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/model_spec.h"
#include "posenc/mrope.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

using nlohmann::json;

std::string real(const std::string& name) { return testing::reference_dir() + "/real-configs/" + name + ".json"; }
std::string extra(const std::string& name) { return testing::reference_dir() + "/configs-extra/" + name + ".json"; }
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
  const F32Tensor &iq = tensor(g, "full_attention.indexer_q"), &iq_out = tensor(g, "full_attention.indexer_q_out");
  const F32Tensor &ik = tensor(g, "full_attention.indexer_k"), &ik_out = tensor(g, "full_attention.indexer_k_out");
  const F32Tensor& logits = tensor(g, "full_attention.indexer_logits");
  const F32Tensor &mq = tensor(g, "full_attention.q"), &mq_out = tensor(g, "full_attention.q_out");
  ASSERT_EQ(iq.shape, (std::vector<std::int64_t>{5, 128}));
  ASSERT_EQ(cos.shape, (std::vector<std::int64_t>{5, 64}));
  double worst = 0;
  for (std::size_t r = 0; r < positions.size(); ++r)
    for (const auto& [x, x_out] : {std::pair{&iq, &iq_out}, std::pair{&ik, &ik_out}}) {
      const float* in = &x->data[r * 128];
      const float* out = &x_out->data[r * 128];
      for (int c = 0; c < 128; ++c) {
        if (c >= 64) {
          EXPECT_EQ(out[c], in[c]) << "indexer channel " << c << " must pass through";
          continue;
        }
        const double co = cos.data[r * 64 + c], si = sin.data[r * 64 + c];  // cat(freqs, freqs): column c % 32
        const double want = c < 32 ? in[c] * co - in[c + 32] * si : in[c] * co + in[c - 32] * si;
        worst = std::max(worst, std::fabs(out[c] - want));
      }
    }
  for (std::size_t r = 0; r < positions.size(); ++r) {
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
  for (int d = 0; d < 128; ++d) dot += static_cast<double>(iq_out.data[128 + d]) * ik_out.data[2 * 128 + d];
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

// HunYuanVLTextConfig.convert_rope_params_to_dict: "xdrope" is dynamic, xdrope_section is
// mrope_section; HunYuanVLRotaryEmbedding: NTK-alpha base = theta * alpha^(d/(d-2)), attention
// factor 1; rotate_half, q/k RMSNorm after RoPE (use_qk_norm), head_dim^-0.5.
TEST(Families6, HunyuanVlReadsXdropeAsNtkAlphaOverFourAxes) {
  const ModelSpec spec = load_model_spec(extra("HunyuanOCR__constructed"));
  ASSERT_NE(spec.family, nullptr);
  EXPECT_EQ(spec.mrope_section, (std::vector<int>{16, 16, 16, 16}));
  ASSERT_EQ(spec.mrope_style, MropeStyle::kXdrope);
  ASSERT_TRUE(spec.mrope_vision);
  EXPECT_EQ(spec.mrope_vision->merge_size, 2);
  const RopeParams& p = spec.rope.select().params;
  EXPECT_EQ(p.type, RopeType::kDynamic);
  EXPECT_TRUE(p.mrope_xdrope);
  const RopeSchedule s = compute_schedule(p);
  const double base = 1e4 * std::pow(1000.0, 128.0 / 126.0);  // 11158839.9...
  ASSERT_EQ(s.inv_freq.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(s.inv_freq[i], std::pow(base, -i / 64.0), 1e-6 * std::pow(base, -i / 64.0)) << i;
  EXPECT_EQ(s.attention_factor, 1.0);
  ASSERT_EQ(spec.layers.size(), 6u);
  for (const LayerSpec& l : spec.layers) {
    EXPECT_TRUE(l.rope);
    EXPECT_EQ(l.layout, RopeLayout::kHalfSplit);
    EXPECT_EQ(l.qk_norm, QkNormPlacement::kAfterRope);
    EXPECT_DOUBLE_EQ(l.softmax_scale, 1.0 / std::sqrt(128.0));
  }
  EXPECT_EQ(json::parse(model_spec_json(spec)).at("mrope_style"), "xdrope");
}

// apply_multimodal_rotary_pos_emb: [int(s) * 2 for s in mrope_section] over cat(freqs, freqs), chunk
// i reading axis i % len(sections).
TEST(Families6, XdropeColumnAxesDoubleEachSection) {
  const std::vector<std::uint8_t> axes = xdrope_column_axes({16, 16, 16, 16});
  ASSERT_EQ(axes.size(), 128u);
  for (int c = 0; c < 128; ++c) EXPECT_EQ(axes[c], c / 32) << c;
  EXPECT_EQ(xdrope_column_axes({2, 1, 1}), (std::vector<std::uint8_t>{0, 0, 0, 0, 1, 1, 2, 2}));
  EXPECT_THROW(xdrope_column_axes({32, 32}), Error);
  EXPECT_THROW(xdrope_column_axes({8, 8, 8, 8, 32}), Error);
  EXPECT_THROW(mrope_axis_map({16, 16, 16, 16}, false), Error);  // no per-frequency map
}

// get_rope_index / get_vision_position_ids: text 2, an image of 4 x 6 patches (merge 2: 2 rows of 3
// patches + a newline column, between begin and end tokens), text 2, a second image.
TEST(Families6, XdropePositionIdsFollowHunyuanVlGetRopeIndex) {
  const TokenRun text{TokenRun::kText, 2}, image{TokenRun::kImage, 0, 1, 4, 6, 1};
  const MropeIndex x = xdrope_position_ids({text, image, text, image}, 2, 4);
  ASSERT_EQ(x.seq_len, 2 + 10 + 2 + 10);
  const auto at = [&](int axis, int token) { return x.ids[static_cast<std::size_t>(axis * x.seq_len + token)]; };
  for (int t = 0; t < x.seq_len; ++t) EXPECT_EQ(at(0, t), t) << "the first of 4 axes keeps the token index";
  // Grid tokens 3..10: (column, row) over 2 rows of 4 columns, image index 0.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(at(1, 3 + i), i % 4) << i;
    EXPECT_EQ(at(2, 3 + i), i / 4) << i;
    EXPECT_EQ(at(3, 3 + i), 0) << i;
  }
  for (int t : {0, 1, 2, 11, 12, 13, 14, 23})  // text, begin and end tokens: the token index on every axis
    for (int a = 0; a < 4; ++a) EXPECT_EQ(at(a, t), t) << "token " << t << " axis " << a;
  EXPECT_EQ(at(3, 15), 1);  // the second image's index
  EXPECT_EQ(x.rope_delta, 0);
  const MropeIndex three = xdrope_position_ids({text, image}, 2, 3);  // (width, height, image index)
  EXPECT_EQ(three.ids[static_cast<std::size_t>(0 * three.seq_len + 6)], 3);  // the newline column
  EXPECT_THROW(xdrope_position_ids({text, {TokenRun::kVideo, 0, 2, 4, 4, 1}}, 2, 4), Error);
  EXPECT_THROW(xdrope_position_ids({{TokenRun::kImage, 0, 1, 3, 4, 1}}, 2, 4), Error);  // 3 rows, merge 2
}

// golden's vision vectors for HunYuan-VL: each cos/sin column at its own axis' position, and
// q_out = q * cos + rotate_half(q) * sin recomputed here in double from the written cos/sin. A
// text token's row equals the 1-D cos/sin at its position.
TEST(Families6, HunyuanVlGoldenVisionVectorsAreHfsFormula) {
  const ModelSpec spec = load_model_spec(extra("HunyuanOCR__constructed"));
  GoldenParams params{{0, 1, 127}, 5};
  params.image_grid = {1, 4, 6};
  const Golden g = make_golden(spec, params);
  const F32Tensor& ids = tensor(g, "full_attention.vision.position_ids");
  const F32Tensor &cos = tensor(g, "full_attention.vision.cos"), &sin = tensor(g, "full_attention.vision.sin");
  const F32Tensor &vq = tensor(g, "full_attention.vision.q"), &vq_out = tensor(g, "full_attention.vision.q_out");
  const F32Tensor &vk = tensor(g, "full_attention.vision.k"), &vk_out = tensor(g, "full_attention.vision.k_out");
  const std::int64_t N = 14;
  ASSERT_EQ(ids.shape, (std::vector<std::int64_t>{4, N}));
  const std::vector<float> inv = compute_schedule(spec.rope.select().params, std::nullopt, Numerics::kHfFloat32).inv_freq;
  double angle_err = 0, rot_err = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (int c = 0; c < 128; ++c) {
      const double pos = ids.data[(c / 32) * N + n];
      const double a = static_cast<double>(static_cast<float>(inv[c % 64] * static_cast<float>(pos)));
      angle_err = std::max({angle_err, std::fabs(cos.data[n * 128 + c] - std::cos(a)), std::fabs(sin.data[n * 128 + c] - std::sin(a))});
      for (const auto& [x, x_out] : {std::pair{&vq, &vq_out}, std::pair{&vk, &vk_out}}) {
        const double half = c < 64 ? -static_cast<double>(x->data[n * 128 + c + 64]) : x->data[n * 128 + c - 64];
        const double want = x->data[n * 128 + c] * static_cast<double>(cos.data[n * 128 + c]) + half * sin.data[n * 128 + c];
        rot_err = std::max(rot_err, std::fabs(x_out->data[n * 128 + c] - want));
      }
    }
  EXPECT_LE(angle_err, 1e-6);
  EXPECT_LE(rot_err, 1e-6);
  // Token 6 is the first row's newline (P 6, W 3, H 0, image 0): column 0 reads P, column 64 H.
  EXPECT_NE(cos.data[6 * 128 + 0], cos.data[6 * 128 + 64]);
  const F32Tensor& text_cos = tensor(g, "full_attention.cos");  // rows at positions 0, 1, 127
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 128; ++c) EXPECT_EQ(cos.data[n * 128 + c], text_cos.data[n * 128 + c]) << n << " " << c;
  const json manifest = json::parse(g.manifest_json);
  EXPECT_EQ(manifest.at("layer_types").at(0).at("vision").at("mrope_style"), "xdrope");
}

// What HF refuses, posenc refuses: xdrope_section and mrope_section that differ (ValueError in
// _normalize_mrope_section_alias); sections not summing to head_dim / 2; XD-RoPE's names outside
// HunYuan-VL are a type and a key no rope type knows.
TEST(Families6, XdropeConfigsHfRefuses) {
  const json base = read_json(extra("HunyuanOCR__constructed"));
  const auto refused = [](const json& c, const std::string& part) {
    try {
      parse_model_spec(c.dump());
      ADD_FAILURE() << "accepted; expected an error with '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  json c = base;
  c["rope_scaling"]["mrope_section"] = {16, 16, 32, 0};
  refused(c, "differ");
  c = base;
  c["rope_scaling"]["mrope_section"] = {16, 16, 16, 16};  // the same values: accepted
  EXPECT_EQ(parse_model_spec(c.dump()).mrope_section, (std::vector<int>{16, 16, 16, 16}));
  c = base;
  c["rope_scaling"]["xdrope_section"] = {16, 16, 16, 8};
  refused(c, "sum to rotary_dim/2 = 64");
  c = base;
  c["rope_scaling"]["xdrope_section"] = {8, 8, 8, 8, 32};
  refused(c, "3 or 4");
  c = base;
  c["rope_scaling"].erase("xdrope_section");  // no sections: read as 1-D RoPE, with a warning
  const ModelSpec plain = parse_model_spec(c.dump());
  EXPECT_TRUE(plain.mrope_section.empty());
  bool warned = false;
  for (const auto& w : plain.warnings) warned = warned || w.find("absent or empty") != std::string::npos;
  EXPECT_TRUE(warned);
  c = base;
  c["model_type"] = "qwen2";
  refused(c, "xdrope_section is not a key any rope type knows");
  c["rope_scaling"].erase("xdrope_section");
  refused(c, "is not a rope type posenc knows");
}

// Qwen2.5-Omni's get_rope_index: pieces at the last piece's max + 1 (the v4.49 rule), audio tokens
// sequential on every axis, image T ids f * 1 * 25 and video T ids trunc(float32(f * 0.5) * 25).
// Worked by hand: text 2 (0, 1); image 1x4x4 (merge 2): T 2, H and W 2..3; text 2 (4, 5); audio 3
// (6..8); text 1 (9); video 2x4x4 at 0.5 s per grid: T 10 and 10 + 12, H and W 10..11; text 1 (23).
TEST(Families6, QwenOmniPositionIdsCountAudioAndTimeAlignVideo) {
  const TokenRun text2{TokenRun::kText, 2}, text1{TokenRun::kText, 1};
  TokenRun image{TokenRun::kImage, 0, 1, 4, 4, 25}, audio{TokenRun::kAudio, 3}, video{TokenRun::kVideo, 0, 2, 4, 4, 25};
  video.seconds_per_grid = 0.5;
  const MropeIndex x = mrope_position_ids({text2, image, text2, audio, text1, video, text1}, 2, MropeIndexRule::kV4_49);
  ASSERT_EQ(x.seq_len, 21);
  const std::vector<std::int64_t> T = {0, 1, 2, 2, 2, 2, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10, 22, 22, 22, 22, 23};
  const std::vector<std::int64_t> H = {0, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10, 10, 11, 11, 10, 10, 11, 11, 23};
  const std::vector<std::int64_t> W = {0, 1, 2, 3, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 23};
  EXPECT_EQ(std::vector<std::int64_t>(x.ids.begin(), x.ids.begin() + 21), T);
  EXPECT_EQ(std::vector<std::int64_t>(x.ids.begin() + 21, x.ids.begin() + 42), H);
  EXPECT_EQ(std::vector<std::int64_t>(x.ids.begin() + 42, x.ids.end()), W);
  EXPECT_EQ(x.rope_delta, 24 - 21);
  // ((L - 1) // 2 + 1 - 2) // 2 + 1: 100 mel frames -> 25 tokens; 1 frame -> 0 (Python's floor).
  EXPECT_EQ(qwen_omni_audio_tokens(100, false), 25);
  EXPECT_EQ(qwen_omni_audio_tokens(1, false), 0);
  EXPECT_EQ(qwen_omni_audio_tokens(300, true), 39);  // (L % 100 = 0 -> 0) + 3 * 13
  EXPECT_EQ(qwen_omni_audio_tokens(150, true), 7 + 13);  // f = 25: ((24 // 2 + 1) - 1) // 2 + 1 = 7, + 1 x 13
  // HF multiplies in float32: at 0.04 s per grid, frame 5 is trunc(0.19999999f * 25) = 4, not 5
  // (torch: (arange(6) * tensor(0.04) * 25).long() = [0, 1, 2, 3, 4, 4]).
  TokenRun frames{TokenRun::kVideo, 0, 6, 2, 2, 25};
  frames.seconds_per_grid = 0.04;
  const MropeIndex f = mrope_position_ids({text1, frames}, 2, MropeIndexRule::kV4_49);
  EXPECT_EQ(std::vector<std::int64_t>(f.ids.begin(), f.ids.begin() + 7), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 5}));
  video.seconds_per_grid = -1;
  EXPECT_THROW(mrope_position_ids({video}, 2), Error);
  // Refused before anything is allocated: 2^30 merged patches.
  EXPECT_THROW(mrope_position_ids({{TokenRun::kImage, 0, 1, 65536, 65536}}, 2), Error);
  EXPECT_THROW(xdrope_position_ids({{TokenRun::kImage, 0, 1, 65536, 65536}}, 2, 4), Error);
  EXPECT_THROW(qwen_omni_audio_tokens(-1, false), Error);
}

}  // namespace
}  // namespace posenc
