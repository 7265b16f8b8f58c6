// RoPE application against HF: half-split, partial (NeoX), interleaved (GPT-J), M-RoPE, 2-D.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/hf_config.h"
#include "posenc/mrope.h"
#include "posenc/rope_apply.h"
#include "posenc/vision_rope.h"

namespace posenc {
namespace {

using testing::flatten;
using testing::flatten_f;
using testing::golden_case;
using testing::max_abs_diff;

constexpr double kTol = 2e-6;  // float32 rounding of products of O(1) values

struct Rotated {
  std::vector<float> q, k;
};

// The default schedule of a golden case whose head_dim and theta stand under the keys named.
RopeSchedule case_schedule(const nlohmann::json& c, const char* head_dim_key, const char* theta_key) {
  RopeParams params;
  params.head_dim = c.at(head_dim_key);
  params.theta = c.at(theta_key);
  return compute_schedule(params);
}

Rotated rotate(const nlohmann::json& c, const RopeApplyParams& p, bool bhsd_layout, const PositionIds& pos) {
  Rotated out{flatten_f(c.at("q")), flatten_f(c.at("k"))};
  const auto& shape = c.at("q");
  const int b = static_cast<int>(shape.size()), d1 = static_cast<int>(shape[0].size()),
            d2 = static_cast<int>(shape[0][0].size()), d = static_cast<int>(shape[0][0][0].size());
  for (auto* x : {&out.q, &out.k}) {
    auto view = bhsd_layout ? bhsd(x->data(), {b, d2, d1, d}) : bshd(x->data(), {b, d1, d2, d});
    rope_apply_reference(view, pos, p);
  }
  return out;
}

TEST(RopeApplyGolden, HalfSplitAndPartial) {
  for (const char* name : {"llama_half_split_default_d8", "neox_half_split_partial_0.5_d8"}) {
    SCOPED_TRACE(name);
    const auto& c = golden_case("rope_apply", name);
    const RopeSchedule s = compute_schedule(parse_hf_config(c.at("config_input").dump()).select().params);
    const auto positions = c.at("positions").get<std::vector<std::int64_t>>();
    for (Numerics mode : {Numerics::kHfFloat32, Numerics::kAccurate}) {
      RopeApplyParams p = rope_apply_params(s);
      p.angles = mode;
      const Rotated r = rotate(c, p, true, {positions.data(), 1, 0});
      EXPECT_LE(max_abs_diff(r.q, flatten(c.at("q_embed"))), kTol);
      EXPECT_LE(max_abs_diff(r.k, flatten(c.at("k_embed"))), kTol);
    }
    // The cos/sin HF used, from the same function.
    RopeApplyParams p = rope_apply_params(s);
    p.angles = Numerics::kHfFloat32;
    const auto cos_hf = flatten(c.at("cos")), sin_hf = flatten(c.at("sin"));
    const std::size_t rot = 2 * s.inv_freq.size();
    for (std::size_t t = 0; t < positions.size(); ++t)
      for (std::size_t ch = 0; ch < rot; ++ch) {
        float co, si;
        rope_cos_sin(s.inv_freq[ch % s.inv_freq.size()], positions[t], p, &co, &si);
        EXPECT_NEAR(co, cos_hf[t * rot + ch], 1e-7);
        EXPECT_NEAR(si, sin_hf[t * rot + ch], 1e-7);
      }
  }
}

TEST(RopeApplyGolden, GptjInterleaved) {
  const auto& c = golden_case("rope_apply", "gptj_interleaved_rotary_dim_8_d8");
  const RopeSchedule s = case_schedule(c, "rotary_dim", "theta");
  const auto positions = c.at("positions").get<std::vector<std::int64_t>>();
  RopeApplyParams p = rope_apply_params(s, RopeLayout::kInterleaved);
  p.angles = Numerics::kHfFloat32;
  const Rotated r = rotate(c, p, false, {positions.data(), 1, 0});  // [batch, seq, heads, dim]
  EXPECT_LE(max_abs_diff(r.q, flatten(c.at("q_embed"))), kTol);
  EXPECT_LE(max_abs_diff(r.k, flatten(c.at("k_embed"))), kTol);
}

TEST(RopeApplyGolden, DeepSeekV3IsInterleavedThenDeinterleaved) {
  // HF: equals_gptj_result_deinterleaved. Same inputs as the GPT-J case.
  const auto& c = golden_case("rope_apply", "gptj_interleaved_rotary_dim_8_d8");
  RopeParams params;
  params.head_dim = 8;
  const RopeSchedule s = compute_schedule(params);
  const auto positions = c.at("positions").get<std::vector<std::int64_t>>();
  const Rotated gptj = rotate(c, rope_apply_params(s, RopeLayout::kInterleaved), false, {positions.data(), 1, 0});
  const Rotated ds = rotate(c, rope_apply_params(s, RopeLayout::kDeepSeekV3), false, {positions.data(), 1, 0});
  const auto perm = c.at("permutation_interleaved_to_half").get<std::vector<int>>();  // [0,2,4,6,1,3,5,7]
  for (std::size_t row = 0; row < gptj.q.size() / 8; ++row)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(ds.q[row * 8 + i], gptj.q[row * 8 + perm[i]]);
}

TEST(MropeGolden, GetRopeIndexImage) {
  const auto& c = golden_case("mrope_and_2d", "qwen2vl_get_rope_index_image_t1_h4_w6");
  const auto grid = c.at("image_grid_thw")[0].get<std::vector<int>>();
  const std::vector<TokenRun> runs = {{TokenRun::kText, 2}, {TokenRun::kImage, 0, grid[0], grid[1], grid[2]},
                                      {TokenRun::kText, 2}};
  for (auto [rule, key, delta] : {std::tuple{MropeIndexRule::kV5, "position_ids_v5_main", "rope_deltas_v5_main"},
                                  std::tuple{MropeIndexRule::kV4_49, "position_ids_v4_49", "rope_deltas_v4_49"}}) {
    const MropeIndex idx = mrope_position_ids(runs, c.at("spatial_merge_size"), rule);
    std::vector<std::int64_t> want;  // [3][seq] flattened
    for (const auto& axis : c.at(key))
      for (const auto& v : axis) want.push_back(v.get<std::int64_t>());
    EXPECT_EQ(idx.ids, want);
    EXPECT_EQ(idx.rope_delta, c.at(delta)[0][0].get<std::int64_t>());
  }
}

TEST(MropeGolden, ApplyTinyD16) {
  const auto& c = golden_case("mrope_and_2d", "qwen2vl_mrope_apply_tiny_d16");
  const RopeSchedule s = case_schedule(c, "head_dim", "rope_theta");
  const auto axis = mrope_axis_map(c.at("mrope_section").get<std::vector<int>>(), false);
  const auto axis_of_channel = c.at("axis_of_channel").get<std::vector<int>>();
  for (std::size_t ch = 0; ch < axis_of_channel.size(); ++ch)
    EXPECT_EQ(axis[ch % axis.size()], axis_of_channel[ch]) << ch;
  std::vector<std::int64_t> ids;
  for (const auto& a : c.at("position_ids_3xS")) for (auto v : a) ids.push_back(v);
  RopeApplyParams p = rope_apply_params(s);
  p.axis_of_freq = axis.data();
  p.angles = Numerics::kHfFloat32;
  const std::int64_t seq = static_cast<std::int64_t>(ids.size() / 3);
  const Rotated r = rotate(c, p, true, {ids.data(), 3, seq});
  EXPECT_LE(max_abs_diff(r.q, flatten(c.at("q_embed"))), kTol);
  EXPECT_LE(max_abs_diff(r.k, flatten(c.at("k_embed"))), kTol);
}

TEST(MropeGolden, Vision2d) {
  const auto& c = golden_case("mrope_and_2d", "qwen2vl_vision_2d_rope_grid_1x4x6_sms2_d16");
  const auto grid = c.at("grid_thw")[0].get<std::vector<int>>();
  const auto ids = vision_2d_position_ids(grid[0], grid[1], grid[2], c.at("spatial_merge_size"));
  const auto hw = c.at("position_ids_hw").get<std::vector<std::vector<std::int64_t>>>();
  const std::size_t n = hw.size();
  ASSERT_EQ(ids.size(), 2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(ids[i], hw[i][0]) << i;
    EXPECT_EQ(ids[n + i], hw[i][1]) << i;
  }
  VisionRopeParams vp;
  vp.head_dim = c.at("head_dim");
  vp.theta = c.at("theta");
  vp.merge_size = c.at("spatial_merge_size");
  const VisionRope v = vision_rope(vp);
  EXPECT_EQ(vision_rope_position_ids(v, grid[1], grid[2]), ids);  // the family's ids are the tower's
  const auto want_inv = c.at("vision_inv_freq").get<std::vector<double>>();
  for (std::size_t k = 0; k < want_inv.size(); ++k) EXPECT_EQ(v.inv_freq[k], static_cast<float>(want_inv[k]));
  RopeApplyParams p;
  p.inv_freq = v.inv_freq.data();
  p.num_freqs = static_cast<int>(v.inv_freq.size());
  p.axis_of_freq = v.axis_of_freq.data();
  p.angles = Numerics::kHfFloat32;
  // q, k are [seq, heads, head_dim]: one batch of seq tokens.
  std::vector<float> q = flatten_f(c.at("q")), k = flatten_f(c.at("k"));
  const int heads = static_cast<int>(c.at("q")[0].size()), d = c.at("head_dim");
  for (auto* x : {&q, &k}) rope_apply_reference(bshd(x->data(), {1, static_cast<int>(n), heads, d}), {ids.data(), 2, static_cast<std::int64_t>(n)}, p);
  EXPECT_LE(max_abs_diff(q, flatten(c.at("q_embed"))), kTol);
  EXPECT_LE(max_abs_diff(k, flatten(c.at("k_embed"))), kTol);
}

}  // namespace
}  // namespace posenc
