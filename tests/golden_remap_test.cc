// Golden's attention under a distance remap (GoldenParams::remap, golden_remap.h): checked against
// the fused attention kernel (its own tiles, far rows and merge), against an engine's way of
// computing Self-Extend (q and k rotated in float32 at grouped positions, as llama.cpp does), and
// against golden's own plain logits when the remap is the identity.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

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
  }
}

}  // namespace
}  // namespace posenc
