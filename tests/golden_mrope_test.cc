// Golden's per-axis M-RoPE vectors (core/src/golden_mrope.h): the 3-axis position ids HF's
// get_rope_index builds for an image and a video, against hf-golden.json where it has them, and
// q/k rotated per axis against a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "golden.h"
#include "posenc/golden.h"
#include "posenc/mrope.h"

namespace posenc {
namespace {

using nlohmann::json;

json real_json(const std::string& name) {
  return json::parse(testing::read_file(testing::reference_dir() + "/real-configs/" + name + ".json"));
}

const F32Tensor& tensor(const Golden& g, const std::string& name) {
  for (const F32Tensor& t : g.tensors.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

const json& layer_entry(const Golden& g, const std::string& layer_type) {
  static json m;
  m = json::parse(g.manifest_json);
  for (const json& e : m.at("layer_types"))
    if (e.at("layer_type") == layer_type) return e;
  throw std::runtime_error("no layer type " + layer_type);
}

// ids[axis][n] of the vision sequence as golden wrote them.
std::vector<std::vector<std::int64_t>> ids_of(const Golden& g, const std::string& lt) {
  const F32Tensor& t = tensor(g, lt + ".vision.position_ids");
  const std::int64_t N = t.shape[1];
  std::vector<std::vector<std::int64_t>> ids(3);
  for (int a = 0; a < 3; ++a)
    for (std::int64_t n = 0; n < N; ++n) ids[a].push_back(static_cast<std::int64_t>(t.data[a * N + n]));
  return ids;
}

// The rotation in double: frequency j (HF's float32 inv_freq, read back from golden's cos/sin at a
// text position 1 where every axis reads 1) turns by inv_freq_j * ids[axis_j][n]; largest error.
double max_rotation_error(const Golden& g, const std::string& lt, const std::vector<int>& axis_of_freq,
                          const std::vector<float>& inv_freq, bool half_split) {
  const auto ids = ids_of(g, lt);
  const F32Tensor& q = tensor(g, lt + ".vision.q");
  const F32Tensor& q_out = tensor(g, lt + ".vision.q_out");
  const std::int64_t N = q.shape[0], D = q.shape[1];
  const int F = static_cast<int>(inv_freq.size());
  double worst = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (int j = 0; j < F; ++j) {
      const double angle = double(inv_freq[j]) * double(ids[axis_of_freq[j]][n]);
      const std::int64_t a = n * D + (half_split ? j : 2 * j), b = n * D + (half_split ? j + F : 2 * j + 1);
      const double x0 = q.data[a], x1 = q.data[b];
      worst = std::max(worst, std::fabs(x0 * std::cos(angle) - x1 * std::sin(angle) - q_out.data[a]));
      worst = std::max(worst, std::fabs(x1 * std::cos(angle) + x0 * std::sin(angle) - q_out.data[b]));
    }
  for (std::int64_t n = 0; n < N; ++n)  // the channels past the rotary part pass through
    for (std::int64_t d = 2 * F; d < D; ++d) worst = std::max(worst, double(std::fabs(q.data[n * D + d] - q_out.data[n * D + d])));
  return worst;
}

// Qwen2-VL at head_dim 16, mrope_section [2, 3, 3]: hf-golden.json's qwen2vl_mrope_apply_tiny_d16.
ModelSpec tiny_qwen2_vl() {
  json c = real_json("Qwen2-VL-7B-Instruct__4layer");
  c["hidden_size"] = 32, c["num_attention_heads"] = 2, c["num_key_value_heads"] = 2;
  c["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {2, 3, 3}}};
  c["rope_theta"] = 10000.0;
  return parse_model_spec(c.dump());
}

TEST(GoldenMrope, ImagePositionIdsAndCosSinAreHfs) {
  const ModelSpec spec = tiny_qwen2_vl();
  const Golden g = make_golden(spec, GoldenParams{{0, 1}, 3, {1, 4, 6}, {2, 4, 4}});
  const std::string lt = layer_entry(g, "full_attention").at("layer_type");
  // text 2, image 1x4x6 (6 merged tokens), text 2: HF's input_ids [100, <vision_start>, 6 x <image>, 100, 100].
  const json& idx = testing::golden_case("mrope_and_2d", "qwen2vl_get_rope_index_image_t1_h4_w6");
  const auto ids = ids_of(g, lt);
  for (int a = 0; a < 3; ++a)
    for (int n = 0; n < 10; ++n) EXPECT_EQ(ids[a][n], idx.at("position_ids_v5_main")[a][n].get<std::int64_t>()) << a << "," << n;
  const json& tiny = testing::golden_case("mrope_and_2d", "qwen2vl_mrope_apply_tiny_d16");
  const F32Tensor& cos = tensor(g, lt + ".vision.cos");
  const F32Tensor& sin = tensor(g, lt + ".vision.sin");
  for (int n = 0; n < 10; ++n)
    for (int c = 0; c < 16; ++c) {
      EXPECT_NEAR(cos.data[n * 16 + c], tiny.at("cos_merged")[n][c].get<double>(), 1e-7) << n << "," << c;
      EXPECT_NEAR(sin.data[n * 16 + c], tiny.at("sin_merged")[n][c].get<double>(), 1e-7) << n << "," << c;
    }
  const json& v = layer_entry(g, "full_attention").at("vision");
  EXPECT_EQ(v.at("axis_of_freq"), json({0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(v.at("rope_delta"), ids[0].back() + 1 - static_cast<std::int64_t>(ids[0].size()));
  std::vector<float> inv_freq;
  for (const json& f : tiny.at("inv_freq")) inv_freq.push_back(f.get<float>());
  EXPECT_LT(max_rotation_error(g, lt, {0, 0, 1, 1, 1, 2, 2, 2}, inv_freq, true), 2e-6);
}

TEST(GoldenMrope, VideoTimeStepsPerFamily) {
  // Qwen2-VL: T steps by 1 per temporal patch; after the video, text starts at pos + max(h', w').
  const Golden q2 = make_golden(tiny_qwen2_vl(), GoldenParams{{0, 1}, 0, {1, 4, 6}, {4, 2, 2}});
  const auto a = ids_of(q2, "full_attention");
  // text 2, image 6, text 2 (ids 5, 6), video 4 frames x 1 token at pos 7, text 2 at 7 + max(1, 1).
  EXPECT_EQ(a[0], (std::vector<std::int64_t>{0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 7, 8, 9, 10, 8, 9}));
  EXPECT_EQ(a[1], (std::vector<std::int64_t>{0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 7, 7, 7, 7, 8, 9}));

  // Qwen2.5-VL: T steps by vision_config.tokens_per_second (2 in the released config).
  const ModelSpec q25 = load_model_spec(testing::reference_dir() + "/real-configs/Qwen2.5-VL-7B-Instruct.json");
  ASSERT_TRUE(q25.mrope_vision);
  EXPECT_EQ(q25.mrope_vision->time_interval, 2);
  const Golden g25 = make_golden(q25, GoldenParams{{0, 1}, 0, {1, 2, 2}, {3, 2, 2}});
  const auto b = ids_of(g25, "full_attention");
  // text 2, image 1 token at 2, text 2 (3, 4), video 3 tokens at pos 5: T = 5, 7, 9; text at 6, 7.
  EXPECT_EQ(b[0], (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 7, 9, 6, 7}));
  EXPECT_EQ(b[2], (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 5, 5, 6, 7}));

  // Qwen3.5 (Qwen3-VL's get_rope_index): one t = 1 grid per frame with a timestamp between.
  const ModelSpec q35 = load_model_spec(testing::reference_dir() + "/real-configs/Qwen3.5-9B.json");
  ASSERT_TRUE(q35.mrope_vision);
  EXPECT_TRUE(q35.mrope_vision->frames_split);
  const Golden g35 = make_golden(q35, GoldenParams{{0, 1}, 0, {1, 2, 2}, {2, 2, 2}});
  const auto c = ids_of(g35, "full_attention");
  // text 2, image at 2, text 3 4, frame at 5, timestamp 6 7, frame at 8, text 9 10.
  EXPECT_EQ(c[0], (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

TEST(GoldenMrope, InterleavedPartialRotaryIsRotatedPerAxis) {
  // Qwen3.5-9B: head_dim 256, 64 rotated channels, interleaved sections [11, 11, 10].
  const ModelSpec spec = load_model_spec(testing::reference_dir() + "/real-configs/Qwen3.5-9B.json");
  const Golden g = make_golden(spec, GoldenParams{{0, 1}, 7, {1, 4, 6}, {2, 4, 4}});
  const json& e = layer_entry(g, "full_attention");
  const std::vector<int> axis = e.at("vision").at("axis_of_freq").get<std::vector<int>>();
  const auto map = mrope_axis_map({11, 11, 10}, true);
  EXPECT_EQ(axis, std::vector<int>(map.begin(), map.end()));
  EXPECT_EQ(axis[1], 1);  // frequency 1 reads H, 2 reads W, 3 reads T (Qwen3-VL's apply_interleaved_mrope)
  EXPECT_EQ(axis[2], 2);
  EXPECT_EQ(axis[3], 0);
  // HF's float32 inv_freq from golden's own text cos/sin at position 1 (all axes equal there).
  const F32Tensor& cos = tensor(g, "full_attention.cos");
  const F32Tensor& sin = tensor(g, "full_attention.sin");
  const int R = e.at("rotary_dim"), F = R / 2;
  std::vector<float> inv_freq;
  const double af = e.at("attention_factor");
  for (int j = 0; j < F; ++j) inv_freq.push_back(static_cast<float>(std::atan2(sin.data[R + j] / af, cos.data[R + j] / af)));
  EXPECT_LT(max_rotation_error(g, "full_attention", axis, inv_freq, true), 5e-6);
  // A wrong axis map is seen: the contiguous one reads W for frequency 29.
  const auto contiguous = mrope_axis_map({11, 11, 10}, false);
  EXPECT_GT(max_rotation_error(g, "full_attention", std::vector<int>(contiguous.begin(), contiguous.end()), inv_freq, true), 1e-2);
}

TEST(GoldenMrope, OnlyTheQwenVlFamiliesAndSaneGrids) {
  // GLM-4.1V is M-RoPE but its get_rope_index is not followed: text vectors only.
  const ModelSpec glm = load_model_spec(testing::reference_dir() + "/real-configs/GLM-4.1V-9B-Thinking.json");
  EXPECT_FALSE(glm.mrope_vision);
  const ModelSpec q2 = tiny_qwen2_vl();
  EXPECT_THROW(make_golden(q2, GoldenParams{{0}, 0, {1, 3, 4}, {1, 2, 2}}), Error);   // h not divisible by merge 2
  EXPECT_THROW(make_golden(q2, GoldenParams{{0}, 0, {0, 2, 2}, {1, 2, 2}}), Error);   // t = 0
  EXPECT_THROW(make_golden(q2, GoldenParams{{0}, 0, {1, 2, 2}, {4096, 4096, 4096}}), Error);  // too many tokens
}

}  // namespace
}  // namespace posenc
