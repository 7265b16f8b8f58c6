// Golden test vectors (posenc::make_golden) and the safetensors files that carry them.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/file_io.h"
#include "posenc/golden.h"

namespace posenc {
namespace {

using nlohmann::json;

ModelSpec real(const std::string& name) {
  return load_model_spec(testing::reference_dir() + "/real-configs/" + name + ".json");
}

const F32Tensor& tensor(const SafeTensors& f, const std::string& name) {
  for (const F32Tensor& t : f.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

TEST(SafeTensors, RoundTripsShapesValuesAndMetadata) {
  SafeTensors f{{{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", {1}, {-0.5f}}, {"empty", {0, 4}, {}}}, {{"k", "v"}}};
  const std::string bytes = safetensors_bytes(f);
  EXPECT_EQ((bytes.size() - 8 - 7 * 4) % 8, 0u);  // header padded to 8 bytes
  const SafeTensors back = parse_safetensors(bytes);
  ASSERT_EQ(back.tensors.size(), 3u);
  EXPECT_EQ(back.tensors[0].name, "a");
  EXPECT_EQ(back.tensors[0].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(back.tensors[0].data, f.tensors[0].data);
  EXPECT_EQ(back.tensors[1].data, f.tensors[1].data);
  EXPECT_EQ(back.metadata.at("k"), "v");
}

TEST(SafeTensors, MalformedFilesAreErrorsNotCrashes) {
  const std::string good = safetensors_bytes({{{"a", {2}, {1, 2}}}, {}});
  EXPECT_THROW(parse_safetensors(good.substr(0, 5)), Error);               // no header size
  EXPECT_THROW(parse_safetensors(good.substr(0, 20)), Error);              // header cut
  EXPECT_THROW(parse_safetensors(good.substr(0, good.size() - 1)), Error); // data cut
  std::string huge = good;
  huge[7] = '\x7f';  // header size beyond the file
  EXPECT_THROW(parse_safetensors(huge), Error);
  EXPECT_THROW(safetensors_bytes({{{"a", {3}, {1, 2}}}, {}}), Error);      // shape vs data
}

TEST(GoldenVectors, DefaultPositionsFollowTheOriginalContext) {
  EXPECT_EQ(default_golden_positions(real("Llama-3.1-8B-Instruct")),
            (std::vector<std::int64_t>{0, 1, 127, 4095, 8192, 32768, 131071}));
  EXPECT_EQ(default_golden_positions(real("Llama-2-7b__neuron_training")),  // max_position_embeddings 2048
            (std::vector<std::int64_t>{0, 1, 127, 4095, 2048, 8192, 131071}));
}

TEST(GoldenVectors, CosSinRotationAndLogitsAreHfs) {
  const ModelSpec spec = real("gpt-oss-20b");  // yarn, attention factor 1.3466, two layer types
  const std::vector<std::int64_t> pos = {0, 3, 131071};
  const Golden g = make_golden(spec, {pos, 7});
  const SafeTensors f = parse_safetensors(safetensors_bytes(g.tensors));
  const json m = json::parse(g.manifest_json);
  EXPECT_EQ(m.at("positions").get<std::vector<std::int64_t>>(), pos);
  ASSERT_EQ(m.at("layer_types").size(), 2u);
  const RopeSchedule s = compute_schedule(spec.rope.layers[spec.layers[1].schedule].params, 131072,
                                          Numerics::kHfFloat32);
  const F32Tensor& cos = tensor(f, "full_attention.cos");
  const F32Tensor& sin = tensor(f, "full_attention.sin");
  ASSERT_EQ(cos.shape, (std::vector<std::int64_t>{3, 64}));
  const float af = static_cast<float>(s.attention_factor);
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 32; ++j) {
      const float angle = s.inv_freq[j] * static_cast<float>(pos[r]);  // HF: float32 angle
      EXPECT_EQ(cos.data[r * 64 + j], std::cos(angle) * af);
      EXPECT_EQ(cos.data[r * 64 + j + 32], std::cos(angle) * af);
      EXPECT_EQ(sin.data[r * 64 + j + 32], std::sin(angle) * af);
    }
  // q_out = rotate_half rotation (half-split): out_j = q_j c - q_{j+32} s, out_{j+32} = q_{j+32} c + q_j s.
  const F32Tensor& q = tensor(f, "full_attention.q");
  const F32Tensor& q_out = tensor(f, "full_attention.q_out");
  const F32Tensor& k_out = tensor(f, "full_attention.k_out");
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 32; ++j) {
      const float c = cos.data[r * 64 + j], sn = sin.data[r * 64 + j];
      EXPECT_NEAR(q_out.data[r * 64 + j], q.data[r * 64 + j] * c - q.data[r * 64 + j + 32] * sn, 1e-6);
      EXPECT_NEAR(q_out.data[r * 64 + j + 32], q.data[r * 64 + j + 32] * c + q.data[r * 64 + j] * sn, 1e-6);
    }
  const F32Tensor& logits = tensor(f, "full_attention.logits");
  double dot = 0;
  for (int d = 0; d < 64; ++d) dot += double(q_out.data[2 * 64 + d]) * k_out.data[1 * 64 + d];
  EXPECT_NEAR(logits.data[2 * 3 + 1], dot / 8.0, 1e-6);  // softmax scale 64^-0.5
  // Relative position: with attention factor a, q_out(p).k_out(p) = a^2 q.k at any p.
  const F32Tensor& k = tensor(f, "full_attention.k");
  double raw = 0;
  for (int d = 0; d < 64; ++d) raw += double(q.data[d]) * k.data[d];
  EXPECT_NEAR(logits.data[0], raw * af * af / 8.0, 1e-5);
}

TEST(GoldenVectors, MlaKeepsTheNopeChannelsAndQueryScaleMultipliesQ) {
  const Golden ds = make_golden(real("DeepSeek-V2-Lite"), {{5}, 1});
  const F32Tensor& q = tensor(ds.tensors, "full_attention.q");
  const F32Tensor& q_out = tensor(ds.tensors, "full_attention.q_out");
  ASSERT_EQ(q.shape, (std::vector<std::int64_t>{1, 192}));
  for (int d = 0; d < 128; ++d) EXPECT_EQ(q_out.data[d], q.data[d]);
  EXPECT_NE(q_out.data[128], q.data[128]);

  const Golden dev = make_golden(real("Devstral-Small-2-24B-Instruct"), {{8191, 8192}, 1});
  const json m = json::parse(dev.manifest_json);
  const auto scales = m.at("layer_types").at(0).at("query_scales").get<std::vector<double>>();
  EXPECT_EQ(scales[0], 1.0);
  EXPECT_NEAR(scales[1], 1 + 0.1 * std::log(2.0), 1e-15);
  // Scaling q scales row 1 of the logits relative to an unscaled rotation.
  const F32Tensor& k_out = tensor(dev.tensors, "full_attention.k_out");
  const F32Tensor& q_out8192 = tensor(dev.tensors, "full_attention.q_out");
  const F32Tensor& logits = tensor(dev.tensors, "full_attention.logits");
  double dot = 0;
  for (int d = 0; d < 128; ++d) dot += double(q_out8192.data[128 + d]) * k_out.data[d];
  EXPECT_NEAR(logits.data[2], dot / std::sqrt(128.0), 1e-6);
  // Against the same model without beta: q_out at 8192 is the unscaled rotation times 1 + 0.1 ln 2.
  json c = json::parse(testing::read_file(testing::reference_dir() + "/real-configs/Devstral-Small-2-24B-Instruct.json"));
  c["text_config"]["rope_parameters"]["llama_4_scaling_beta"] = 0.0;
  const Golden plain = make_golden(parse_model_spec(c.dump()), {{8191, 8192}, 1});
  const F32Tensor& unscaled = tensor(plain.tensors, "full_attention.q_out");
  for (int d = 0; d < 128; ++d) {
    EXPECT_EQ(q_out8192.data[d], unscaled.data[d]);
    EXPECT_EQ(q_out8192.data[128 + d], unscaled.data[128 + d] * static_cast<float>(scales[1]));
  }
}

TEST(GoldenVectors, NopeLayersHaveNoCosSinAndUnknownFamiliesAreRefused) {
  const Golden g = make_golden(real("EXAONE-4.0-32B"), {{0, 9}, 0});
  bool has_full_cos = false, has_sliding_cos = false;
  for (const F32Tensor& t : g.tensors.tensors) {
    has_full_cos |= t.name == "full_attention.cos";
    has_sliding_cos |= t.name == "sliding_attention.cos";
  }
  EXPECT_FALSE(has_full_cos);
  EXPECT_TRUE(has_sliding_cos);
  const ModelSpec unknown = parse_model_spec(R"({"model_type": "brand_new", "head_dim": 64, "num_hidden_layers": 2})");
  EXPECT_THROW(make_golden(unknown, {}), Error);
  EXPECT_THROW(make_golden(real("Qwen3-8B"), {{-1}, 0}), Error);
}

TEST(GoldenVectors, WrittenFilesReadBack) {
  const std::string dir = ::testing::TempDir() + "posenc_golden_rt";
  const Golden g = make_golden(real("Qwen3-8B"), {{0, 1, 2}, 3});
  write_golden(g, dir);
  const SafeTensors back = parse_safetensors(read_file(dir + "/golden.safetensors", 1 << 26));
  ASSERT_EQ(back.tensors.size(), g.tensors.tensors.size());
  for (std::size_t i = 0; i < back.tensors.size(); ++i) EXPECT_EQ(back.tensors[i].data, g.tensors.tensors[i].data);
  EXPECT_EQ(read_file(dir + "/manifest.json", 1 << 20), g.manifest_json);
}

// --shift: k_out re-rotated by delta is k rotated at p + delta (the same seeded k, so a second
// golden at the moved positions is the reference), up to the shift's extra float32 rounding:
// at most 4 ulp of the larger angle (p + |delta| here < 2^13, so < 4e-3 rad) per unit of |k|.
void expect_shift_is_rotation_at(const std::string& model, const std::string& lt, std::vector<std::int64_t> pos,
                                 std::int64_t delta) {
  GoldenParams gp{pos, 9};
  gp.shift = delta;
  const Golden g = make_golden(real(model), gp);
  std::vector<std::int64_t> moved;
  for (std::int64_t p : pos) moved.push_back(p + delta);
  const Golden at = make_golden(real(model), {moved, 9});
  const F32Tensor& shifted = tensor(g.tensors, lt + ".k_shifted");
  const F32Tensor& fresh = tensor(at.tensors, lt + ".k_out");
  ASSERT_EQ(tensor(g.tensors, lt + ".k").data, tensor(at.tensors, lt + ".k").data);
  double worst = 0, moved_by = 0;
  for (std::size_t i = 0; i < shifted.data.size(); ++i) {
    worst = std::max(worst, double(std::fabs(shifted.data[i] - fresh.data[i])));
    moved_by = std::max(moved_by, double(std::fabs(shifted.data[i] - tensor(g.tensors, lt + ".k_out").data[i])));
  }
  EXPECT_LT(worst, 3e-3) << model;
  EXPECT_GT(moved_by, 0.1) << model << ": the keys moved";
  EXPECT_EQ(json::parse(g.manifest_json).at("layer_types")[0].at("k_shifted").at("delta"), delta);
}

TEST(GoldenVectors, ShiftedKeysAreTheKeysRotatedAtTheMovedPositions) {
  expect_shift_is_rotation_at("Llama-3.1-8B-Instruct", "full_attention", {0, 1, 127, 4095}, 1000);
  expect_shift_is_rotation_at("Llama-3.1-8B-Instruct", "full_attention", {300, 301, 4095}, -300);
  expect_shift_is_rotation_at("DeepSeek-V2-Lite", "full_attention", {0, 5, 127}, 64);  // MLA, deepseek_v3 order
  expect_shift_is_rotation_at("gpt-oss-20b", "full_attention", {0, 3, 4095}, 2048);   // YaRN's factor not applied again
  GoldenParams out{{0, 5}, 0};
  out.shift = -6;
  EXPECT_THROW(make_golden(real("Qwen3-8B"), out), Error);  // 5 - 6 < 0
}

}  // namespace
}  // namespace posenc
