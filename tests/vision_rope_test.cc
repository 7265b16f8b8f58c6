// Issue 26: the vision towers' 2-D RoPE (vision_rope.h) against each tower's HF construction,
// written out here step by step in double as HF writes it in torch (modeling_pixtral.py
// PixtralRotaryEmbedding, modeling_llama4.py Llama4VisionRotaryEmbedding, Kimi-VL's Rope2DPosEmb,
// modeling_qwen2_vl.py VisionRotaryEmbedding); the worked values come from reading that code.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/model_spec.h"
#include "posenc/vision_rope.h"

namespace posenc {
namespace {

using testing::extra_config;
using testing::real_config;

VisionRope tower(VisionRopeFamily family, int head_dim, int side = 4, double theta = 10000.0) {
  VisionRopeParams p;
  p.family = family;
  p.head_dim = head_dim;
  p.theta = theta;
  p.patches_per_side = side;
  return vision_rope(p);
}

// The angle of each of the head_dim / 2 complex pairs (HF's table row, before cat or view_as_complex)
// at the coordinates (row, col) HF's own code forms for the patch (Llama 4: already + 1).
std::vector<double> hf_angles(VisionRopeFamily family, int D, double theta, double row, double col) {
  std::vector<double> out;
  switch (family) {
    case VisionRopeFamily::kPixtral: {  // freqs over D; outer(h, freqs[::2]) then outer(w, freqs[1::2])
      std::vector<double> freqs;
      for (int j = 0; j < D; j += 2) freqs.push_back(1.0 / std::pow(theta, double(j) / D));
      for (std::size_t j = 0; j < freqs.size(); j += 2) out.push_back(row * freqs[j]);
      for (std::size_t j = 1; j < freqs.size(); j += 2) out.push_back(col * freqs[j]);
      break;
    }
    case VisionRopeFamily::kLlama4: {  // cat([x * f].repeat_interleave(2), [y * f].repeat_interleave(2))[..., ::2]
      const int freq_dim = D / 2;
      std::vector<double> f, cat;
      for (int j = 0; j < freq_dim && f.size() < std::size_t(freq_dim / 2); j += 2) f.push_back(1.0 / std::pow(theta, double(j) / freq_dim));
      for (double v : f) cat.insert(cat.end(), {col * v, col * v});
      for (double v : f) cat.insert(cat.end(), {row * v, row * v});
      for (std::size_t j = 0; j < cat.size(); j += 2) out.push_back(cat[j]);
      break;
    }
    case VisionRopeFamily::kMoonVit: {  // cat([x_cis[..., None], y_cis[..., None]], -1).reshape(.., dim / 2)
      for (int j = 0; j < D; j += 4) {
        const double f = 1.0 / std::pow(theta, double(j) / D);
        out.push_back(col * f);
        out.push_back(row * f);
      }
      break;
    }
    case VisionRopeFamily::kGemma4: {  // spatial_dim = D / 2: x (column) half, then y (row) half, each cat(f, f)
      std::vector<double> f;
      for (int j = 0; j < D / 2; j += 2) f.push_back(1.0 / std::pow(theta, double(j) / (D / 2)));
      for (double v : f) out.push_back(col * v);
      for (double v : f) out.push_back(row * v);
      break;
    }
    case VisionRopeFamily::kQwen2Vl: {  // VisionRotaryEmbedding(D / 2)(max_grid)[pos_ids].flatten(1): [h * f, w * f]
      std::vector<double> f;
      for (int j = 0; j < D / 2; j += 2) f.push_back(1.0 / std::pow(theta, double(j) / (D / 2)));
      for (double v : f) out.push_back(row * v);
      for (double v : f) out.push_back(col * v);
      break;
    }
  }
  return out;
}

// The two channels HF rotates together by angle f: rotate_half pairs (c, c + half) inside each block
// (Gemma 4: each half of the head), complex pairs (2j, 2j + 1).
// Read from the family, as HF's code fixes it, not from the VisionRope under test.
std::array<int, 2> hf_pair(const VisionRope& v, int f) {
  const VisionRopeFamily family = v.params.family;
  const int blocks = family == VisionRopeFamily::kGemma4 ? 2 : 1;
  const int per_block = v.params.head_dim / 2 / blocks, base = 2 * (f / per_block) * per_block, j = f % per_block;
  if (family == VisionRopeFamily::kLlama4 || family == VisionRopeFamily::kMoonVit) return {base + 2 * j, base + 2 * j + 1};
  return {base + j, base + j + per_block};
}

void rotate(const VisionRope& v, float* x, int tokens, const std::vector<std::int64_t>& ids) {
  for (const RopeApplyParams& ap : vision_rope_apply_params(v))
    rope_apply_reference(bshd(x, {1, tokens, 1, v.params.head_dim}), PositionIds::explicit_ids(ids.data(), 2, tokens), ap);
}

// The angle posenc gives pair f at token n of ids [2][N].
double posenc_angle(const VisionRope& v, const std::vector<std::int64_t>& ids, std::size_t n, int f) {
  const std::size_t N = ids.size() / 2;
  return double(v.inv_freq[f]) * double(ids[v.axis_of_freq[f] * N + n]);
}

// The worked examples read from HF's code (head_dim 8, theta 1e4, the patch at row 1, column 2).
TEST(VisionRope, WorkedExamplesFromHfCode) {
  struct Case {
    VisionRopeFamily family;
    int rows, cols;
    std::size_t token;  // the patch at row 1, column 2 in the tower's order
    std::vector<double> angles;
  };
  const Case cases[] = {
      {VisionRopeFamily::kPixtral, 2, 3, 5, {1, 0.01, 0.2, 0.002}},  // rows u0, u2; columns u1, u3
      {VisionRopeFamily::kLlama4, 4, 4, 6, {3, 0.03, 2, 0.02}},      // its whole tile; column + 1 = 3, row + 1 = 2
      {VisionRopeFamily::kMoonVit, 2, 3, 5, {2, 1, 0.02, 0.01}},     // column, row per frequency
      {VisionRopeFamily::kQwen2Vl, 2, 4, 6, {1, 0.01, 2, 0.02}},     // row, then column; 2 x 2 merge blocks
      {VisionRopeFamily::kGemma4, 2, 3, 5, {2, 0.02, 1, 0.01}},      // column half, then row half
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(to_string(c.family));
    const VisionRope v = tower(c.family, 8);
    const std::vector<std::int64_t> ids = vision_rope_position_ids(v, c.rows, c.cols);
    for (int f = 0; f < 4; ++f) EXPECT_NEAR(posenc_angle(v, ids, c.token, f), c.angles[f], 2e-7 * c.angles[f]) << f;
    EXPECT_EQ(v.layout, c.family == VisionRopeFamily::kLlama4 || c.family == VisionRopeFamily::kMoonVit
                            ? RopeLayout::kInterleaved
                            : RopeLayout::kHalfSplit);
  }
  // Gemma 4 at its own theta 100 (the example read from modeling_gemma4.py): channels (0, 2) turn by
  // 2, (1, 3) by 0.2 (the column), (4, 6) by 1, (5, 7) by 0.1 (the row).
  const VisionRope g = tower(VisionRopeFamily::kGemma4, 8, 4, 100.0);
  const std::vector<std::int64_t> ids = vision_rope_position_ids(g, 2, 3);
  const double want[4] = {2, 0.2, 1, 0.1};
  const std::array<int, 2> pairs[4] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  for (int f = 0; f < 4; ++f) {
    EXPECT_NEAR(posenc_angle(g, ids, 5, f), want[f], 2e-7 * want[f]) << f;
    EXPECT_EQ(hf_pair(g, f), pairs[f]) << f;
  }
}

// Every pair of every patch of a grid against HF's construction, at a real head_dim.
TEST(VisionRope, EveryPatchMatchesTheTowersConstruction) {
  for (const VisionRopeFamily family :
       {VisionRopeFamily::kPixtral, VisionRopeFamily::kLlama4, VisionRopeFamily::kMoonVit, VisionRopeFamily::kQwen2Vl,
        VisionRopeFamily::kGemma4}) {
    SCOPED_TRACE(to_string(family));
    const int D = family == VisionRopeFamily::kLlama4 ? 88 : 64, side = 6;
    const VisionRope v = tower(family, D, side, 1e4);
    const int rows = family == VisionRopeFamily::kLlama4 ? side : 4, cols = side;
    const std::vector<std::int64_t> ids = vision_rope_position_ids(v, rows, cols);
    const std::size_t N = ids.size() / 2;
    ASSERT_EQ(N, std::size_t(rows) * cols + (family == VisionRopeFamily::kLlama4 ? 1 : 0));
    double worst = 0;
    for (std::size_t n = 0; n < N; ++n) {
      const std::vector<double> want = hf_angles(family, D, 1e4, double(ids[n]), double(ids[N + n]));
      for (int f = 0; f < D / 2; ++f)  // float32 frequencies: one rounding of inv_freq
        worst = std::max(worst, std::fabs(posenc_angle(v, ids, n, f) - want[f]) / std::max(1.0, std::fabs(want[f])));
    }
    EXPECT_LT(worst, 5e-7);  // float32 inv_freq: a rounding or two of the power
  }
}

TEST(VisionRope, TokenOrderPerTower) {
  // Pixtral, MoonViT: row-major over the image's own patches, from 0.
  const VisionRope pixtral = tower(VisionRopeFamily::kPixtral, 8, 110);
  EXPECT_EQ(vision_rope_position_ids(pixtral, 2, 3), (std::vector<std::int64_t>{0, 0, 0, 1, 1, 1, 0, 1, 2, 0, 1, 2}));
  EXPECT_THROW(vision_rope_position_ids(pixtral, 111, 2), Error);  // past the table: HF indexes out of range
  // Llama 4: the whole tile 1-based, then the class token at angle 0.
  const VisionRope llama4 = tower(VisionRopeFamily::kLlama4, 8, 2);
  EXPECT_EQ(vision_rope_position_ids(llama4, 2, 2), (std::vector<std::int64_t>{1, 1, 2, 2, 0, 1, 2, 1, 2, 0}));
  try {
    vision_rope_position_ids(llama4, 1, 2);
    ADD_FAILURE() << "a partial tile was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 x 2"), std::string::npos) << e.what();
  }
  // Qwen2-VL: merge blocks (m = 2) of a 2 x 4 grid.
  VisionRopeParams qp;
  qp.head_dim = 8;
  EXPECT_EQ(vision_rope_position_ids(vision_rope(qp), 2, 4), (std::vector<std::int64_t>{0, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 1, 2, 3, 2, 3}));
}

TEST(VisionRope, BadParametersNameTheValue) {
  auto message = [](VisionRopeParams p) {
    try {
      vision_rope(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  VisionRopeParams p;
  p.family = VisionRopeFamily::kPixtral;
  p.head_dim = 66;
  p.patches_per_side = 10;
  EXPECT_NE(message(p).find("got 66"), std::string::npos) << message(p);
  p.head_dim = 64;
  p.theta = std::nan("");
  EXPECT_NE(message(p).find("rope_theta"), std::string::npos) << message(p);
  p.theta = 1e4;
  p.patches_per_side = 0;
  EXPECT_NE(message(p).find("got 0"), std::string::npos) << message(p);
}

// Rotating with the core's kernels' reference equals HF's application written out: rotate_half
// (x * cos + rotate_half(x) * sin over cat(freqs, freqs)) or complex pairs (2j, 2j + 1).
TEST(VisionRope, RotationIsTheTowersApplication) {
  for (const VisionRopeFamily family : {VisionRopeFamily::kPixtral, VisionRopeFamily::kLlama4, VisionRopeFamily::kGemma4,
                                        VisionRopeFamily::kMoonVit, VisionRopeFamily::kQwen2Vl}) {
    SCOPED_TRACE(to_string(family));
    const int D = 16, side = 3;
    const VisionRope v = tower(family, D, side);
    const std::vector<std::int64_t> ids =
        vision_rope_position_ids(v, family == VisionRopeFamily::kQwen2Vl ? 4 : side, family == VisionRopeFamily::kQwen2Vl ? 4 : side);
    const int N = static_cast<int>(ids.size() / 2);
    std::vector<float> x(std::size_t(N) * D);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * double(i) + 0.1));
    std::vector<float> rotated = x;
    rotate(v, rotated.data(), N, ids);
    double worst = 0;
    for (int n = 0; n < N; ++n) {
      const std::vector<double> a = hf_angles(family, D, 1e4, double(ids[n]), double(ids[N + n]));
      const float* in = &x[std::size_t(n) * D];
      for (int f = 0; f < D / 2; ++f) {
        const auto [i0, i1] = hf_pair(v, f);
        const double c = std::cos(a[f]), s = std::sin(a[f]);
        worst = std::max(worst, std::fabs(rotated[std::size_t(n) * D + i0] - (in[i0] * c - in[i1] * s)));
        worst = std::max(worst, std::fabs(rotated[std::size_t(n) * D + i1] - (in[i1] * c + in[i0] * s)));
      }
    }
    EXPECT_LT(worst, 2e-6);  // float32 angles, cos and sin against double
  }
}

// q.k after the rotation depends on the row and column offsets only (the point of 2-D RoPE).
TEST(VisionRope, ScoresDependOnOffsetsOnly) {
  for (const VisionRopeFamily family :
       {VisionRopeFamily::kPixtral, VisionRopeFamily::kMoonVit, VisionRopeFamily::kQwen2Vl, VisionRopeFamily::kGemma4}) {
    SCOPED_TRACE(to_string(family));
    const int D = 16;
    const VisionRope v = tower(family, D, 64);
    auto score = [&](std::int64_t qr, std::int64_t qc, std::int64_t kr, std::int64_t kc) {
      std::vector<float> q(D), k(D);
      for (int i = 0; i < D; ++i) q[i] = float(std::cos(i + 0.5)), k[i] = float(std::sin(2.0 * i + 1));
      const std::int64_t qi[2] = {qr, qc}, ki[2] = {kr, kc};
      rotate(v, q.data(), 1, {qi[0], qi[1]});
      rotate(v, k.data(), 1, {ki[0], ki[1]});
      double d = 0;
      for (int i = 0; i < D; ++i) d += double(q[i]) * k[i];
      return d;
    };
    EXPECT_NEAR(score(3, 5, 1, 2), score(13, 25, 11, 22), 1e-4);
    EXPECT_GT(std::fabs(score(3, 5, 1, 2) - score(3, 5, 2, 1)), 1e-3);  // rows and columns are told apart
  }
}

TEST(VisionRope, ReadFromTheConfigsPublishersShip) {
  struct Case {
    std::string path;
    VisionRopeFamily family;
    int head_dim, side_or_merge;
  };
  const Case cases[] = {
      {real_config("Devstral-Small-2-24B-Instruct"), VisionRopeFamily::kPixtral, 64, 110},  // 1540 / 14
      {extra_config("Llama-4-Scout-17B-16E__constructed"), VisionRopeFamily::kLlama4, 88, 24},  // 1408 / 16, 336 / 14
      {real_config("Qwen2-VL-7B-Instruct__4layer"), VisionRopeFamily::kQwen2Vl, 80, 2},  // embed_dim 1280 / 16
      {real_config("Qwen2.5-VL-7B-Instruct"), VisionRopeFamily::kQwen2Vl, 80, 2},
      {real_config("Qwen3.5-9B"), VisionRopeFamily::kQwen2Vl, 72, 2},
      {real_config("GLM-4.1V-9B-Thinking"), VisionRopeFamily::kQwen2Vl, 128, 2},  // 1536 / 12
      {real_config("gemma-4-31B-it"), VisionRopeFamily::kGemma4, 72, 0},  // head_dim 72, theta 100
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    const ModelSpec spec = load_model_spec(c.path);
    ASSERT_TRUE(spec.vision_rope);
    EXPECT_EQ(spec.vision_rope->params.family, c.family);
    EXPECT_EQ(spec.vision_rope->params.head_dim, c.head_dim);
    EXPECT_EQ(spec.vision_rope->params.theta, c.family == VisionRopeFamily::kGemma4 ? 100.0 : 10000.0);
    if (c.family != VisionRopeFamily::kGemma4)
      EXPECT_EQ(c.family == VisionRopeFamily::kQwen2Vl ? spec.vision_rope->params.merge_size
                                                         : spec.vision_rope->params.patches_per_side,
                c.side_or_merge);
  }
  // Llama-4-Scout ships attn_temperature_tuning: 4, which HF tests for truth.
  const ModelSpec scout = load_model_spec(extra_config("Llama-4-Scout-17B-16E__constructed"));
  ASSERT_EQ(scout.warnings.size(), 1u);
  EXPECT_NE(scout.warnings[0].find("attn_temperature_tuning is the number 4"), std::string::npos) << scout.warnings[0];
  EXPECT_EQ(scout.layers.at(3).query_scale.rule, QueryScale::kLlama4Temperature);
  // A text-only model has no tower; Mllama's tower has learned positions, not RoPE.
  EXPECT_FALSE(load_model_spec(real_config("Qwen3-8B")).vision_rope);
  EXPECT_FALSE(load_model_spec(real_config("Llama-3.2-90B-Vision-Instruct")).vision_rope);
}

// MoonViT (Kimi-VL, LocateAnything: remote code) with the vision_config LocateAnything-3B ships.
TEST(VisionRope, MoonVitFromItsVisionConfig) {
  const std::string text = R"({"model_type": "kimi_vl",
    "text_config": {"model_type": "qwen2", "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 2,
                    "rope_theta": 1000000.0, "max_position_embeddings": 32768},
    "vision_config": {"hidden_size": 1152, "init_pos_emb_height": 64, "init_pos_emb_width": 64,
                      "intermediate_size": 4304, "merge_kernel_size": [2, 2], "model_type": "moonvit",
                      "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14}})";
  const ModelSpec spec = parse_model_spec(text);
  ASSERT_TRUE(spec.vision_rope);
  EXPECT_EQ(spec.vision_rope->params.family, VisionRopeFamily::kMoonVit);
  EXPECT_EQ(spec.vision_rope->params.head_dim, 72);
  EXPECT_EQ(spec.vision_rope->params.patches_per_side, 512);
}

TEST(VisionRope, BadVisionConfigsAreErrorsNamingTheKey) {
  auto error_of = [](const std::string& vision) {
    try {
      parse_model_spec(R"({"model_type": "mistral3", "text_config": {"model_type": "mistral", "hidden_size": 64,
                           "num_attention_heads": 4, "num_hidden_layers": 1}, "vision_config": )" + vision + "}");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string base = R"("model_type": "pixtral", "hidden_size": 1024, "num_attention_heads": 16, "patch_size": 14)";
  EXPECT_NE(error_of("{" + base + "}").find("image_size"), std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "image_size": 1540, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}})")
                .find("vision_config.rope_parameters.rope_type 'yarn'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "pixtral", "hidden_size": 1000, "num_attention_heads": 16, "patch_size": 14, "image_size": 140})")
                .find("hidden_size 1000 is not divisible"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + R"(, "image_size": 1540, "rope_theta": -1})").find("rope_theta"), std::string::npos);
  // theta whose float32 frequencies are inf or 0, as HF's float32 would compute them
  for (const char* theta : {"1e-300", "1e39"})
    EXPECT_NE(error_of("{" + base + R"(, "image_size": 1540, "rope_parameters": {"rope_theta": )" + theta + "}}")
                  .find("stay finite and normal"),
              std::string::npos)
        << theta;
  // The Qwen-VL towers fix theta 10000 in code: a key that says otherwise is reported, not read.
  const ModelSpec qwen = parse_model_spec(R"({"model_type": "qwen2_vl", "num_hidden_layers": 1, "hidden_size": 64,
      "num_attention_heads": 1, "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
      "vision_config": {"embed_dim": 1280, "num_heads": 16, "rope_theta": 500}})");
  ASSERT_TRUE(qwen.vision_rope);
  EXPECT_EQ(qwen.vision_rope->params.theta, 10000.0);
  ASSERT_EQ(qwen.warnings.size(), 1u);
  EXPECT_NE(qwen.warnings[0].find("vision_config.rope_theta ignored"), std::string::npos) << qwen.warnings[0];
  // A key of Pixtral's default rope dict its tower does not read (a factor) is reported, not read.
  const ModelSpec pixtral = parse_model_spec(R"({"model_type": "mistral3", "text_config": {"model_type": "mistral",
      "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 1}, "vision_config": {"model_type": "pixtral",
      "hidden_size": 1024, "num_attention_heads": 16, "patch_size": 14, "image_size": 1540,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "factor": 2.0}}})");
  ASSERT_TRUE(pixtral.vision_rope);
  ASSERT_EQ(pixtral.warnings.size(), 1u);
  EXPECT_NE(pixtral.warnings[0].find("vision_config.rope_parameters.factor ignored"), std::string::npos) << pixtral.warnings[0];
}

// golden's vision_tower vectors: q_out is q rotated at the tower's coordinates, cos/sin in
// cat(freqs, freqs) order, and Llama 4's class token passes unrotated.
TEST(VisionRope, GoldenWritesTheTowersVectors) {
  for (const std::string& path :
       {real_config("Devstral-Small-2-24B-Instruct"), extra_config("Llama-4-Scout-17B-16E__constructed"),
        real_config("gemma-4-31B-it")}) {
    SCOPED_TRACE(path);
    const ModelSpec spec = load_model_spec(path);
    GoldenParams params;
    params.positions = {0, 1};
    const Golden g = make_golden(spec, params);
    auto tensor = [&](const std::string& name) -> const F32Tensor& {
      for (const F32Tensor& t : g.tensors.tensors)
        if (t.name == "vision_tower." + name) return t;
      throw Error("no tensor vision_tower." + name);
    };
    const VisionRope& v = *spec.vision_rope;
    const int D = v.params.head_dim, F = D / 2;
    const F32Tensor &ids = tensor("position_ids"), &q = tensor("q"), &q_out = tensor("q_out"), &cos = tensor("cos"),
                    &sin = tensor("sin"), &k = tensor("k"), &k_out = tensor("k_out");
    const std::int64_t N = ids.shape.at(1);
    EXPECT_EQ(N, v.params.family == VisionRopeFamily::kLlama4 ? 24 * 24 + 1 : 4 * 6);
    double worst = 0;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::vector<double> a = hf_angles(v.params.family, D, v.params.theta, ids.data[n], ids.data[N + n]);
      const int per_block = F / (v.params.family == VisionRopeFamily::kGemma4 ? 2 : 1);
      for (int f = 0; f < F; ++f) {
        const auto [i0, i1] = hf_pair(v, f);
        // cos/sin in cat(freqs, freqs) order per block (the manifest's cos_sin_order), whatever the pairing
        const std::int64_t col = n * D + 2 * (f / per_block) * per_block + f % per_block;
        EXPECT_NEAR(cos.data[col], std::cos(a[f]), 1e-5) << f;
        EXPECT_NEAR(sin.data[col + per_block], std::sin(a[f]), 1e-5) << f;
        for (const auto* pair : {&q, &k}) {
          const float* in = &pair->data[n * D];
          const float* out = &(pair == &q ? q_out : k_out).data[n * D];
          worst = std::max(worst, std::fabs(out[i0] - (in[i0] * std::cos(a[f]) - in[i1] * std::sin(a[f]))));
          worst = std::max(worst, std::fabs(out[i1] - (in[i1] * std::cos(a[f]) + in[i0] * std::sin(a[f]))));
        }
      }
    }
    // Angles up to 25 rad (Llama 4's 24 + 1) in float32: cos/sin carry ~25 * 2^-24 each.
    EXPECT_LT(worst, 2e-5);
    if (v.params.family == VisionRopeFamily::kLlama4) {
      for (int i = 0; i < D; ++i) EXPECT_EQ(q_out.data[(N - 1) * D + i], q.data[(N - 1) * D + i]);  // the class token
    }
  }
}

}  // namespace
}  // namespace posenc
