// Golden's attention under a distance remap (GoldenParams::remap, golden_remap.h): checked against
// the fused attention kernel (its own tiles, far rows and merge), against an engine's way of
// computing Self-Extend (q and k rotated in float32 at grouped positions, as llama.cpp does), and
// against golden's own plain logits when the remap is the identity.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_remap_support.h"
#include "golden.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/rope_apply.h"

namespace posenc {
namespace {

const F32Tensor& tensor(const Golden& g, const std::string& name) {
  for (const F32Tensor& t : g.tensors.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

std::vector<std::int64_t> range(std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[i] = i;
  return p;
}

PositionRemap self_extend(std::int64_t group, std::int64_t window) {
  PositionRemap r;
  r.kind = PositionRemapKind::kSelfExtend, r.group = group, r.window = window;
  return r;
}

std::vector<PositionRemap> every_kind() {
  PositionRemap rerope, leaky, dca;
  rerope.kind = PositionRemapKind::kReRope, rerope.window = 16;
  leaky.kind = PositionRemapKind::kLeakyReRope, leaky.window = 16, leaky.leak = 3.5;
  dca.kind = PositionRemapKind::kDualChunk, dca.chunk_size = 48, dca.local_size = 16;
  return {self_extend(4, 16), rerope, leaky, dca};
}

Golden golden_with(const std::string& config, std::vector<std::int64_t> positions, const PositionRemap& remap) {
  GoldenParams p;
  p.positions = std::move(positions);
  p.seed = 3;
  p.remap = remap;
  return make_golden(load_model_spec(testing::real_config(config)), p);
}

// The fused kernel with the same remap over golden's q, k, v (one head, positions 0..P-1)
// gives golden's remap_out: two implementations (the kernel factors each far distance into a
// query and a key position and merges tiles; golden sums every pair's rotation in double).
TEST(GoldenRemap, OutputIsTheFusedKernelsForEveryRemap) {
  const ModelSpec spec = load_model_spec(testing::real_config("Llama-3.1-8B-Instruct"));
  const int P = 200, D = spec.layers.empty() ? spec.every_layer->head_dim : spec.layers[0].head_dim;
  const RopeSchedule s = compute_schedule(prefill_params(spec.rope.layers[0], P), P, Numerics::kHfFloat32);
  for (const PositionRemap& remap : every_kind()) {
    SCOPED_TRACE(to_string(remap.kind));
    const Golden g = golden_with("Llama-3.1-8B-Instruct", range(P), remap);
    std::vector<float> q = tensor(g, "full_attention.q").data, k = tensor(g, "full_attention.k").data,
                       v = tensor(g, "full_attention.v").data, out(q.size());
    const std::vector<float>& expected = tensor(g, "full_attention.remap_out").data;
    AttentionParams p;
    p.scale = 1.0 / std::sqrt(double(D));
    p.positions = AttentionPositions::kRope;
    p.rope = rope_apply_params(s, RopeLayout::kHalfSplit);
    p.remap = remap;
    const RopeShape shape{1, P, 1, D};
    attention(bshd(q.data(), shape), bshd(k.data(), shape), bshd(v.data(), shape), bshd(out.data(), shape), p);
    double worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, double(std::fabs(out[i] - expected[i])));
    EXPECT_LE(worst, 2e-6);
    // The remap changes the answer (else the test could not tell a remap from none).
    double moved = 0;
    const Golden plain = golden_with("Llama-3.1-8B-Instruct", range(P), self_extend(1, 0));
    for (std::size_t i = 0; i < out.size(); ++i)
      moved = std::max(moved, double(std::fabs(expected[i] - tensor(plain, "full_attention.remap_out").data[i])));
    EXPECT_GT(moved, 1e-2);
  }
}

// llama.cpp's Self-Extend: a far key is rotated at floor(j / G), the query at floor(i / G) + w -
// floor(w / G), each in float32 (rope_cos_sin at the grouped positions), then the dot product.
TEST(GoldenRemap, SelfExtendLogitsAreAnEnginesGroupedRotations) {
  for (const char* config : {"Llama-3.1-8B-Instruct", "chatglm3-6b", "Phi-3.5-mini-instruct"}) {
    SCOPED_TRACE(config);
    const ModelSpec spec = load_model_spec(testing::real_config(config));
    const LayerSpec& l = spec.every_layer ? *spec.every_layer : spec.layers[0];
    const std::int64_t G = 8, W = 32, P = 300;
    const Golden g = golden_with(config, range(P), self_extend(G, W));
    const RopeSchedule s = compute_schedule(prefill_params(spec.rope.layers[l.schedule], P), P, Numerics::kHfFloat32);
    RopeApplyParams ap = rope_apply_params(s, l.layout);
    ap.angles = Numerics::kHfFloat32;
    const std::string lt = l.layer_type + ".";
    const std::vector<float>&q = tensor(g, lt + "q").data, &k = tensor(g, lt + "k").data;
    const std::vector<float>& logits = tensor(g, lt + "remap_logits").data;
    const int D = l.head_dim, F = l.rotary_dim / 2;
    auto rotated = [&](const float* x, std::int64_t position) {
      std::vector<float> c(F), sn(F), out(x, x + D);
      for (int f = 0; f < F; ++f) rope_cos_sin(s.inv_freq[f], position, ap, &c[f], &sn[f]);
      rope_rotate_row(x + l.rotary_offset, out.data() + l.rotary_offset, c.data(), sn.data(), F, l.layout, +1);
      return out;
    };
    double worst = 0;
    for (std::int64_t i = 0; i < P; i += 7)
      for (std::int64_t j = 0; j <= i; j += 5) {
        const bool far = i - j >= W;
        const std::vector<float> qr = rotated(&q[i * D], far ? i / G + W - W / G : i), kr = rotated(&k[j * D], far ? j / G : j);
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += double(qr[d]) * kr[d];
        worst = std::max(worst, std::fabs(dot * l.softmax_scale - logits[i * P + j]));
      }
    EXPECT_LE(worst, 2e-5);
  }
}

// An identity remap (G = 1, or a window past every distance) leaves golden's plain logits, for
// every pairing, rotary offset and attention factor: interleaved partial (ChatGLM3), MLA's
// trailing rotary slice (DeepSeek-V2-Lite), YaRN's factor (gpt-oss), sliding layers (Gemma 3).
TEST(GoldenRemap, AnIdentityRemapGivesThePlainLogits) {
  PositionRemap wide;
  wide.kind = PositionRemapKind::kReRope, wide.window = 1000;
  for (const char* config : {"Llama-3.1-8B-Instruct", "chatglm3-6b", "DeepSeek-V2-Lite", "gpt-oss-20b", "gemma-3-1b-it"})
    for (const PositionRemap& identity : {self_extend(1, 0), wide}) {
      SCOPED_TRACE(std::string(config) + " " + to_string(identity.kind));
      const Golden g = golden_with(config, range(120), identity);
      int layer_types = 0;
      for (const F32Tensor& t : g.tensors.tensors) {
        if (t.name.size() < 13 || t.name.substr(t.name.size() - 13) != ".remap_logits") continue;
        const std::vector<float>& plain = tensor(g, t.name.substr(0, t.name.size() - 13) + ".logits").data;
        double worst = 0, largest = 0;
        for (std::size_t i = 0; i < plain.size(); ++i) {
          worst = std::max(worst, double(std::fabs(t.data[i] - plain[i])));
          largest = std::max(largest, double(std::fabs(plain[i])));
        }
        EXPECT_LE(worst, 4e-6 * largest) << t.name;  // float32 rounding of q_out, k_out and HF's angles
        ++layer_types;
      }
      EXPECT_GE(layer_types, 1);
    }
}

// Keys a layer's mask hides take no part: Gemma 3's sliding layers (window 512) at positions
// 0, 100, 700 leave the query at 700 only itself; the full layers see all three.
TEST(GoldenRemap, TheLayersMaskDecidesWhichKeysCount) {
  const Golden g = golden_with("gemma-3-1b-it", {0, 100, 700}, self_extend(4, 16));
  const int D = static_cast<int>(tensor(g, "sliding_attention.v").shape[1]);
  const std::vector<float>&sliding = tensor(g, "sliding_attention.remap_out").data, &sv = tensor(g, "sliding_attention.v").data;
  for (int d = 0; d < D; ++d) EXPECT_FLOAT_EQ(sliding[2 * D + d], sv[2 * D + d]);
  for (int d = 0; d < D; ++d) EXPECT_FLOAT_EQ(sliding[d], sv[d]);  // position 0 sees itself alone
  const std::vector<float>&full = tensor(g, "full_attention.remap_out").data, &fv = tensor(g, "full_attention.v").data;
  double apart = 0;
  for (int d = 0; d < D; ++d) apart = std::max(apart, double(std::fabs(full[2 * D + d] - fv[2 * D + d])));
  EXPECT_GT(apart, 1e-3);
}

// The remap's vectors come from their own stream: golden's other tensors are unchanged by it,
// the vision vectors drawn after the layer type's text vectors (Qwen2-VL) too.
TEST(GoldenRemap, OtherVectorsAreTheSameWithOrWithoutTheRemap) {
  GoldenParams p;
  p.positions = {0, 5, 4096};
  const ModelSpec spec = load_model_spec(testing::real_config("Qwen2-VL-7B-Instruct__4layer"));
  const Golden plain = make_golden(spec, p);
  p.remap = self_extend(2, 8);
  const Golden remapped = make_golden(spec, p);
  for (const F32Tensor& t : plain.tensors.tensors) EXPECT_EQ(tensor(remapped, t.name).data, t.data) << t.name;
  EXPECT_EQ(remapped.tensors.tensors.size(), plain.tensors.tensors.size() + 3);  // v, remap_logits, remap_out
}

// remap_logits against q rotated explicitly by D' (a 2 x 2 rotation per pair, then the dot product
// with the unrotated k), times the attention factor squared, the softmax scale and the query scale
// at the query's position: Devstral's llama_4_scaling_beta scales queries past its original context.
TEST(GoldenRemap, LogitsAreTheQueryRotatedByTheRemappedDistanceAndScaled) {
  const std::string config = "Devstral-Small-2-24B-Instruct";
  const ModelSpec spec = load_model_spec(testing::real_config(config));
  const LayerSpec& l = spec.every_layer ? *spec.every_layer : spec.layers[0];
  const std::vector<std::int64_t> pos = {0, 7, 70000, 300000, 300001};
  const PositionRemap remap = self_extend(16, 1024);
  const Golden g = golden_with(config, pos, remap);
  const RopeSchedule s = compute_schedule(prefill_params(spec.rope.layers[l.schedule], 300002), 300002, Numerics::kHfFloat32);
  const std::string lt = l.layer_type + ".";
  const std::vector<float>&q = tensor(g, lt + "q").data, &k = tensor(g, lt + "k").data;
  const std::vector<float>& logits = tensor(g, lt + "remap_logits").data;
  const int D = l.head_dim, F = l.rotary_dim / 2, P = static_cast<int>(pos.size());
  ASSERT_NE(l.query_scale.at(300000), 1.0);  // the rule under test is in force
  double worst = 0;
  for (int i = 0; i < P; ++i)
    for (int j = 0; j < P; ++j) {
      const double d = attention_test::paper_distance(remap, pos[i], pos[j]);
      std::vector<double> rq(q.begin() + i * D, q.begin() + (i + 1) * D);
      for (int f = 0; f < F; ++f) {
        const int a = l.rotary_offset + (l.layout == RopeLayout::kHalfSplit ? f : 2 * f);
        const int b = l.layout == RopeLayout::kHalfSplit ? a + F : a + 1;
        const double w = double(s.inv_freq[f]) * d, qa = rq[a], qb = rq[b];
        rq[a] = s.attention_factor * (qa * std::cos(w) - qb * std::sin(w));
        rq[b] = s.attention_factor * (qa * std::sin(w) + qb * std::cos(w));
      }
      double dot = 0;
      for (int c = 0; c < D; ++c) {
        const bool rotated = c >= l.rotary_offset && c < l.rotary_offset + 2 * F;
        dot += rq[c] * k[j * D + c] * (rotated ? s.attention_factor : 1.0);
      }
      const double want = dot * l.softmax_scale * l.query_scale.at(pos[i]);
      worst = std::max(worst, std::fabs(want - logits[i * P + j]) / std::max(1.0, std::fabs(want)));
    }
  EXPECT_LE(worst, 1e-6);
}

// remap_out row i: the softmax over exactly the keys listed, from golden's own remap_logits and v.
void expect_attends(const Golden& g, const std::string& lt, int i, const std::vector<int>& keys) {
  const std::vector<float>&logits = tensor(g, lt + ".remap_logits").data, &v = tensor(g, lt + ".v").data,
                          &out = tensor(g, lt + ".remap_out").data;
  const int P = static_cast<int>(tensor(g, lt + ".remap_logits").shape[0]), D = static_cast<int>(tensor(g, lt + ".v").shape[1]);
  double top = -1e300, sum = 0;
  for (int j : keys) top = std::max(top, double(logits[i * P + j]));
  std::vector<double> acc(D, 0.0);
  for (int j : keys) {
    const double w = std::exp(double(logits[i * P + j]) - top);
    sum += w;
    for (int d = 0; d < D; ++d) acc[d] += w * v[j * D + d];
  }
  double worst = 0;
  for (int d = 0; d < D; ++d) worst = std::max(worst, std::fabs(acc[d] / sum - out[i * D + d]));
  EXPECT_LE(worst, 1e-6) << lt << " row " << i;
}

// The mask by position and by the layer: Gemma 3's sliding window of 512 at its edge (a key 512
// back is out), Llama 4's chunks of 8192 (a query in a new chunk sees none of the last), and
// positions out of order or repeated (Llama 3.1: by position, not by row).
TEST(GoldenRemap, MasksFollowPositionsAndTheLayersWindowAtItsEdges) {
  const PositionRemap r = self_extend(4, 16);
  const Golden gemma = golden_with("gemma-3-1b-it", {0, 1, 511, 512, 513}, r);
  expect_attends(gemma, "sliding_attention", 3, {1, 2, 3});  // 512 - 0 = 512: out
  expect_attends(gemma, "sliding_attention", 4, {2, 3, 4});
  expect_attends(gemma, "full_attention", 4, {0, 1, 2, 3, 4});
  GoldenParams p;
  p.positions = {8190, 8191, 8192, 8193};
  p.remap = r;
  const Golden llama4 = make_golden(load_model_spec(testing::extra_config("Llama-4-Scout-17B-16E__constructed")), p);
  expect_attends(llama4, "chunked_attention", 2, {2});
  expect_attends(llama4, "chunked_attention", 3, {2, 3});
  expect_attends(llama4, "chunked_attention", 1, {0, 1});
  const Golden unsorted = golden_with("Llama-3.1-8B-Instruct", {5, 2, 5}, r);
  expect_attends(unsorted, "full_attention", 0, {0, 1, 2});
  expect_attends(unsorted, "full_attention", 1, {1});
  expect_attends(unsorted, "full_attention", 2, {0, 1, 2});
}

TEST(GoldenRemap, BadSettingsAndAnglesPastRopesRangeAreErrors) {
  PositionRemap r = self_extend(0, 4);
  try {
    golden_with("Llama-3.1-8B-Instruct", {0, 9}, r);
    FAIL() << "group 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("group G = 0"), std::string::npos) << e.what();
  }
  r.kind = PositionRemapKind::kLeakyReRope, r.window = 1, r.leak = 1e-300;
  try {
    golden_with("Llama-3.1-8B-Instruct", {0, 9}, r);
    FAIL() << "leak 1e-300 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("beyond 2^31 radians"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"leak\":1e-300"), std::string::npos) << e.what();  // names the setting
  }
}

}  // namespace
}  // namespace posenc
