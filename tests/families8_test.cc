// Issue 26, DeepSeek-V4 (modeling_deepseek_v4.py / configuration_deepseek_v4.py at HF c49429ed,
// v5.10.1+ semantics): two ropes by label, "main" (default, rope_theta) on sliding_attention
// layers and "compress" (YaRN at compress_rope_theta, attention_factor forced to 1.0) on the
// compressed layers and CSA's indexer; the trailing qk_rope_head_dim = 64 of head_dim 512 in
// interleaved pairs; softmax scale head_dim^-0.5 without mscale; layer types from compress_ratios.
// Each rule is checked against numbers derived here in double from HF's code, or against the
// float32 table of docs' notes (computed with torch from the same formulas), on the sha256-verified
// V4-Flash-0731 config and the unverified V4-Pro copy.
#include <gtest/gtest.h>

#include <cmath>

#include "expect_error.h"
#include "golden.h"
#include "posenc/engine_json.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/hf_config.h"
#include "posenc/model_spec.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

using nlohmann::json;

const std::string kFlash = "/real-configs/DeepSeek-V4-Flash-0731.json";
const std::string kPro = "/configs-extra/DeepSeek-V4-Pro__unverified.json";
json config(const std::string& rel) { return json::parse(testing::read_file(testing::reference_dir() + rel)); }
ModelSpec spec_of(const json& j) { return parse_model_spec(j.dump()); }

const F32Tensor& tensor(const Golden& g, const std::string& name) {
  for (const F32Tensor& t : g.tensors.tensors)
    if (t.name == name) return t;
  throw Error("golden has no tensor " + name);
}

const RopeSchedule& schedule_of(const ModelSpec& spec, const std::string& type) {
  for (const LayerSpec& l : spec.layers)
    if (l.layer_type == type) return spec.schedules.at(l.schedule);
  throw Error("no layer of type " + type);
}

// The notes' table (deepseek_v4.md §4, float32 from torch, dim 64): main = 1 / 10000^(2i/64);
// compress = YaRN at 160000, factor 16, orig 65536, beta 32 / 1, low 15, high 25.
const double kMain[32] = {1.0000000000e+00, 7.4989420176e-01, 5.6234133244e-01, 4.2169651389e-01, 3.1622776389e-01,
                          2.3713736236e-01, 1.7782793939e-01, 1.3335214555e-01, 1.0000000149e-01, 7.4989415705e-02,
                          5.6234128773e-02, 4.2169649154e-02, 3.1622778624e-02, 2.3713735864e-02, 1.7782794312e-02,
                          1.3335214928e-02, 9.9999997765e-03, 7.4989423156e-03, 5.6234132499e-03, 4.2169648223e-03,
                          3.1622778624e-03, 2.3713738192e-03, 1.7782794312e-03, 1.3335214462e-03, 1.0000000475e-03,
                          7.4989418499e-04, 5.6234130170e-04, 4.2169648805e-04, 3.1622778624e-04, 2.3713738483e-04,
                          1.7782794021e-04, 1.3335215044e-04};
const double kCompress[32] = {
    1.0000000000e+00, 6.8765604496e-01, 4.7287079692e-01, 3.2517245412e-01, 2.2360679507e-01, 1.5376456082e-01,
    1.0573711991e-01, 7.2710774839e-02, 5.0000000745e-02, 3.4382801503e-02, 2.3643540218e-02, 1.6258623451e-02,
    1.1180340312e-02, 7.6882280409e-03, 5.2868565544e-03, 3.6355385091e-03, 2.2656249348e-03, 1.3968013227e-03,
    8.4968970623e-04, 5.0808198284e-04, 2.9697778518e-04, 1.6817997675e-04, 9.0867841209e-05, 4.5444230636e-05,
    1.9531253201e-05, 5.3723124438e-06, 3.6943033592e-06, 2.5404096959e-06, 1.7469282056e-06, 1.2012856132e-06,
    8.2607130025e-07, 5.6805293980e-07};

// _compute_yarn_parameters in double: find_correction_dim, floor / ceil (truncate), the ramp over
// dim / 2, inv = interp * ramp + extra * (1 - ramp).
std::vector<double> yarn(double base, double factor, double orig, double beta_fast, double beta_slow, int dim) {
  const auto corr = [&](double rot) { return dim * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(base)); };
  const double low = std::max(std::floor(corr(beta_fast)), 0.0), high = std::min(std::ceil(corr(beta_slow)), dim - 1.0);
  std::vector<double> out;
  for (int i = 0; i < dim / 2; ++i) {
    const double extra = 1.0 / std::pow(base, 2.0 * i / dim), ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    out.push_back(extra / factor * ramp + extra * (1 - ramp));
  }
  return out;
}

// Both schedules, per layer type, in HF's float32 (the notes' table to the bit) and in double
// (posenc's default numerics, against the YaRN written out above).
TEST(Families8, DeepSeekV4InvFreqOfBothRopesPerLayerType) {
  const ModelRope rope = parse_hf_config(config(kFlash).dump());
  ASSERT_EQ(rope.layers.size(), 3u);
  const std::vector<double> want_compress = yarn(160000, 16, 65536, 32, 1, 64);
  for (const LayerRope& l : rope.layers) {
    SCOPED_TRACE(l.layer_type);
    const bool compress = l.layer_type != "sliding_attention";
    const RopeSchedule f32 = compute_schedule(l.params, std::nullopt, Numerics::kHfFloat32);
    const RopeSchedule acc = compute_schedule(l.params);
    ASSERT_EQ(f32.inv_freq.size(), 32u);
    EXPECT_EQ(f32.rotary_dim, 64);
    EXPECT_EQ(acc.attention_factor, 1.0);  // forced: not 0.1 ln(16) + 1 = 1.277
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(f32.inv_freq[i], static_cast<float>(compress ? kCompress[i] : kMain[i])) << i;
      const double want = compress ? want_compress[i] : 1.0 / std::pow(10000.0, i / 32.0);
      EXPECT_NEAR(acc.inv_freq[i], want, 1e-7 * want) << i;
    }
    if (compress) {
      ASSERT_TRUE(acc.correction_range);
      EXPECT_EQ((*acc.correction_range)[0], 15);
      EXPECT_EQ((*acc.correction_range)[1], 25);
    }
  }
}

// Channels [448, 512) of 512 in interleaved pairs, 512^-0.5, window 128 on every layer; the
// indexer only on CSA layers: 64 heads of 128, channels [64, 128), interleaved, 128^-0.5.
TEST(Families8, DeepSeekV4ChannelsScaleAndIndexer) {
  const ModelSpec spec = spec_of(config(kFlash));
  ASSERT_NE(spec.family, nullptr);
  EXPECT_TRUE(spec.warnings.empty()) << spec.warnings.front();
  ASSERT_EQ(spec.layers.size(), 43u);
  for (const LayerSpec& l : spec.layers) {
    SCOPED_TRACE(l.index);
    EXPECT_TRUE(l.rope);
    EXPECT_EQ(l.layout, RopeLayout::kInterleaved);
    EXPECT_EQ(l.head_dim, 512);
    EXPECT_EQ(l.rotary_offset, 448);
    EXPECT_EQ(l.rotary_dim, 64);
    EXPECT_EQ(l.rotated_channels, (std::vector<std::array<int, 2>>{{448, 512}}));
    EXPECT_DOUBLE_EQ(l.softmax_scale, 1.0 / std::sqrt(512.0));
    EXPECT_EQ(l.attention, AttentionKind::kSliding);
    EXPECT_EQ(l.window, 128);
    EXPECT_EQ(spec.schedules.at(l.schedule).attention_factor, 1.0);
    ASSERT_EQ(l.indexer.has_value(), l.layer_type == "compressed_sparse_attention");
    if (!l.indexer) continue;
    EXPECT_EQ(l.indexer->heads, 64);
    EXPECT_EQ(l.indexer->head_dim, 128);
    EXPECT_EQ(l.indexer->rotary_offset, 64);
    EXPECT_EQ(l.indexer->rotary_dim, 64);
    EXPECT_EQ(l.indexer->layout, RopeLayout::kInterleaved);
    EXPECT_EQ(l.indexer->rotated_channels, (std::vector<std::array<int, 2>>{{64, 128}}));
    EXPECT_DOUBLE_EQ(l.indexer->softmax_scale, 1.0 / std::sqrt(128.0));
  }
}

std::vector<std::string> types_of(const ModelSpec& spec) {
  std::vector<std::string> out;
  for (const LayerSpec& l : spec.layers) out.push_back(l.layer_type);
  return out;
}

// compress_ratios 0 / 4 / 128, cut to num_hidden_layers (Flash-0731: 46 entries for 43 layers);
// Pro: 2 HCA, then CSA at even, HCA at odd layers; without compress_ratios, HF's code default,
// whose interleave counts from layer 2, so layer 2 is HCA (unlike the published Pro).
TEST(Families8, DeepSeekV4LayerTypesOfFlashProAndTheDefault) {
  const std::string S = "sliding_attention", C = "compressed_sparse_attention", H = "heavily_compressed_attention";
  const auto flash = types_of(spec_of(config(kFlash)));
  ASSERT_EQ(flash.size(), 43u);
  for (int i = 0; i < 43; ++i) EXPECT_EQ(flash[i], i < 2 ? S : i % 2 == 0 ? C : H) << i;
  const ModelSpec pro_spec = spec_of(config(kPro));
  const auto pro = types_of(pro_spec);
  ASSERT_EQ(pro.size(), 61u);
  for (int i = 0; i < 61; ++i) EXPECT_EQ(pro[i], i < 2 ? H : i % 2 == 0 ? C : H) << i;
  EXPECT_EQ(pro_spec.layers[2].indexer.has_value(), true);
  json j = config(kPro);
  j.erase("compress_ratios");
  const auto dflt = types_of(spec_of(j));
  ASSERT_EQ(dflt.size(), 61u);
  for (int i = 0; i < 61; ++i) EXPECT_EQ(dflt[i], i < 2 || i % 2 == 0 ? H : C) << i;
}

// golden's CSA vectors: k_out recomputed in double from k and golden's own cos/sin (column j =
// frequency j), pairs (448 + 2i, 449 + 2i), the leading 448 channels untouched; cos itself against
// the compress rope's angle; the indexer's k_out the same on [64, 128).
TEST(Families8, DeepSeekV4GoldenCsaKeysRotateTheTrailingPairs) {
  const std::vector<std::int64_t> positions = {0, 1, 127, 4095, 65536};
  const Golden g = make_golden(spec_of(config(kFlash)), GoldenParams{positions, 7});
  const std::string t = "compressed_sparse_attention.";
  const F32Tensor &cos = tensor(g, t + "cos"), &sin = tensor(g, t + "sin");
  const F32Tensor &k = tensor(g, t + "k"), &k_out = tensor(g, t + "k_out");
  ASSERT_EQ(k.shape, (std::vector<std::int64_t>{5, 512}));
  ASSERT_EQ(cos.shape, (std::vector<std::int64_t>{5, 64}));
  const std::vector<double> inv = yarn(160000, 16, 65536, 32, 1, 64);
  double worst = 0, worst_angle = 0;
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const float* in = &k.data[r * 512];
    const float* out = &k_out.data[r * 512];
    for (int c = 0; c < 448; ++c) ASSERT_EQ(out[c], in[c]) << "channel " << c << " must pass through";
    for (int i = 0; i < 32; ++i) {
      const double co = cos.data[r * 64 + i], si = sin.data[r * 64 + i];
      EXPECT_EQ(cos.data[r * 64 + i + 32], cos.data[r * 64 + i]);
      const double a = in[448 + 2 * i], b = in[449 + 2 * i];
      worst = std::max(worst, std::fabs(out[448 + 2 * i] - (a * co - b * si)));
      worst = std::max(worst, std::fabs(out[449 + 2 * i] - (b * co + a * si)));
      // float32 angle: |p| * ulp(inv_freq) bounds the difference from the double angle.
      const double angle = static_cast<double>(positions[r]) * inv[i];
      const double tol = 1e-6 + 2e-7 * angle;
      worst_angle = std::max(worst_angle, std::fabs(co - std::cos(angle)) / tol);
      worst_angle = std::max(worst_angle, std::fabs(si - std::sin(angle)) / tol);
    }
  }
  EXPECT_LE(worst, 1e-6);
  EXPECT_LE(worst_angle, 1.0);
  const F32Tensor &ik = tensor(g, t + "indexer_k"), &ik_out = tensor(g, t + "indexer_k_out");
  double worst_index = 0;
  for (std::size_t r = 0; r < positions.size(); ++r)
    for (int i = 0; i < 32; ++i) {
      const double co = cos.data[r * 64 + i], si = sin.data[r * 64 + i];
      const double a = ik.data[r * 128 + 64 + 2 * i], b = ik.data[r * 128 + 65 + 2 * i];
      worst_index = std::max(worst_index, std::fabs(ik_out.data[r * 128 + 64 + 2 * i] - (a * co - b * si)));
      worst_index = std::max(worst_index, std::fabs(ik_out.data[r * 128 + 65 + 2 * i] - (b * co + a * si)));
      EXPECT_EQ(ik_out.data[r * 128 + i], ik.data[r * 128 + i]);
    }
  EXPECT_LE(worst_index, 1e-6);
  const json manifest = json::parse(g.manifest_json);
  for (const json& e : manifest.at("layer_types"))
    EXPECT_EQ(e.contains("indexer"), e.at("layer_type") == "compressed_sparse_attention") << e.at("layer_type");
}

// A config saved by HF v5 carries rope_parameters {main, compress} (DeepseekV4Config.__post_init__'s
// result) instead of the legacy keys: the same layers and schedules.
TEST(Families8, DeepSeekV4NestedRopeParametersEqualTheFlatKeys) {
  const json flat = config(kFlash);
  json nested = flat;
  for (const char* key : {"rope_scaling", "compress_rope_theta", "qk_rope_head_dim", "rope_theta"}) nested.erase(key);
  nested["partial_rotary_factor"] = 0.125;
  nested["rope_parameters"] = {
      {"main", {{"rope_type", "default"}, {"rope_theta", 10000}, {"partial_rotary_factor", 0.125}}},
      {"compress",
       {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 16}, {"original_max_position_embeddings", 65536},
        {"type", "yarn"}, {"rope_theta", 160000}, {"rope_type", "yarn"}, {"partial_rotary_factor", 0.125},
        {"attention_factor", 1.0}}}};
  const ModelSpec a = spec_of(flat), b = spec_of(nested);
  EXPECT_TRUE(b.warnings.empty()) << b.warnings.front();
  EXPECT_EQ(json::parse(model_spec_json(a)).at("layers"), json::parse(model_spec_json(b)).at("layers"));
  ASSERT_EQ(a.schedules.size(), b.schedules.size());
  for (std::size_t s = 0; s < a.schedules.size(); ++s) {
    EXPECT_EQ(a.schedules[s].inv_freq, b.schedules[s].inv_freq) << s;
    EXPECT_EQ(a.schedules[s].attention_factor, b.schedules[s].attention_factor) << s;
  }
  // Without attention_factor the nested compress dict is YaRN's own: 0.1 ln(16) + 1, as HF reads it.
  nested["rope_parameters"]["compress"].erase("attention_factor");
  EXPECT_NEAR(schedule_of(spec_of(nested), "heavily_compressed_attention").attention_factor, 0.1 * std::log(16.0) + 1, 1e-12);
}

// _compute_yarn_parameters reads truncate from the {main, compress} dict's top level, where it
// never is: a truncate: false in rope_scaling changes nothing, and is said to be ignored.
TEST(Families8, DeepSeekV4YarnAlwaysTruncates) {
  json j = config(kFlash);
  j["rope_scaling"]["truncate"] = false;
  const ModelSpec spec = spec_of(j);
  EXPECT_EQ(schedule_of(spec, "compressed_sparse_attention").inv_freq,
            schedule_of(spec_of(config(kFlash)), "compressed_sparse_attention").inv_freq);
  ASSERT_EQ(spec.warnings.size(), 1u);
  EXPECT_NE(spec.warnings[0].find("rope_scaling.truncate = false ignored"), std::string::npos) << spec.warnings[0];
}

// Bad input: an Error naming the key and the value.
TEST(Families8, DeepSeekV4BadConfigsAreRefusedNamingTheKey) {
  const auto with = [](const char* key, const json& v) {
    json j = config(kFlash);
    j[key] = v;
    return j;
  };
  expect_error([&] { spec_of(with("compress_ratios", {0, 0, 4, 128, 4, 8})); }, "compress_ratios entry 5 is 8");
  expect_error([&] { spec_of(with("compress_ratios", {0, 0, 4})); }, "compress_ratios has 3 entries for num_hidden_layers 43");
  // HF maps every entry before the cut: a bad ratio past the layers is a KeyError too.
  json ratios = config(kFlash)["compress_ratios"];
  ratios.back() = 2;
  expect_error([&] { spec_of(with("compress_ratios", ratios)); }, "compress_ratios entry 45 is 2");
  json types = json::array();
  for (int i = 0; i < 43; ++i) types.push_back(i == 7 ? "full_attention" : "sliding_attention");
  expect_error([&] { spec_of(with("layer_types", types)); }, "layer_types entry 7 'full_attention' is not a DeepSeek-V4");
  expect_error([&] { spec_of(with("index_head_dim", 32)); }, "index_head_dim 32 must be >= the 64");
  expect_error([&] { spec_of(with("compress_rope_theta", -1)); }, "compress_rope_theta");
  json nested = config(kFlash);
  nested.erase("rope_scaling");
  nested["rope_parameters"] = {{"main", {{"rope_type", "default"}, {"rope_theta", 10000}, {"partial_rotary_factor", 0.125}}},
                               {"compress", {{"rope_type", "default"}, {"partial_rotary_factor", 0.125}}}};
  expect_error([&] { spec_of(nested); }, "rope_parameters.compress has no rope_theta");
}

}  // namespace
}  // namespace posenc
