// What the attention tests share: owned [B, tokens, heads, D] tensors in either memory order,
// an element reader, and the parameters of each position scheme over random tables.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/half.h"

namespace posenc::attention_test {

// Owns its bytes; view points into them (so never copy one: make another).
struct Tensor4 {
  Tensor4(const Tensor4&) = delete;
  Tensor4& operator=(const Tensor4&) = delete;
  Tensor4(Tensor4&&) = default;
  DType dtype;
  std::vector<std::uint8_t> bytes;
  RopeTensor view;
};

// [B, tokens, heads, D] values, stored bshd or bhsd.
inline Tensor4 make(DType dtype, int B, int tokens, int heads, int D, bool head_major, std::mt19937* rng) {
  Tensor4 t{dtype, std::vector<std::uint8_t>(static_cast<std::size_t>(B) * tokens * heads * D * dtype_size(dtype)), {}};
  t.view = head_major ? bhsd(t.bytes.data(), dtype, {B, tokens, heads, D}) : bshd(t.bytes.data(), dtype, {B, tokens, heads, D});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = t.bytes.size() / dtype_size(dtype);
  for (std::size_t i = 0; i < n && rng; ++i) {
    const float x = normal(*rng);
    if (dtype == DType::kF32) std::memcpy(&t.bytes[4 * i], &x, 4);
    const std::uint16_t h = dtype == DType::kBF16 ? float_to_bf16(x) : float_to_f16(x);
    if (dtype != DType::kF32) std::memcpy(&t.bytes[2 * i], &h, 2);
  }
  return t;
}

// Element (b, t, h, c) as float, any dtype.
inline float at(const RopeTensor& x, int b, int t, int h, int c) {
  const std::int64_t i = b * x.batch_stride + t * x.token_stride + h * x.head_stride + c;
  if (x.dtype == DType::kF32) return static_cast<const float*>(x.data)[i];
  const std::uint16_t v = static_cast<const std::uint16_t*>(x.data)[i];
  return x.dtype == DType::kBF16 ? bf16_to_float(v) : f16_to_float(v);
}

struct BiasInputs {
  std::vector<double> slopes;
  std::vector<float> t5_table;
  std::vector<float> inv_freq;
  std::vector<std::uint8_t> padding;
};

// Every scheme's inputs filled (ALiBi's slopes, a random T5 table, no padding), positions set.
inline AttentionParams params_for(AttentionPositions positions, BiasInputs& setup, int H, int B, int T, std::mt19937& rng) {
  AttentionParams p;
  p.positions = positions;
  setup.slopes = alibi_slopes(H);
  p.alibi_slopes = setup.slopes.data();
  p.t5 = {8, 24, false};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  setup.t5_table.resize(static_cast<std::size_t>(p.t5.num_buckets) * H);
  for (auto& x : setup.t5_table) x = normal(rng);
  p.t5_table = setup.t5_table.data();
  setup.padding.assign(static_cast<std::size_t>(B) * T, 1);
  return p;
}

// Runs f() once per Highway target compiled in and supported here, with dispatch forced to it
// (and its name in any failure); returns how many targets ran.
template <class F>
std::size_t on_every_target(F&& f) {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  for (const auto target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    f();
  }
  hwy::SetSupportedTargetsForTest(0);
  return targets.size();
}

// A value no lse may keep: every row must be written.
inline constexpr float kUnwritten = 12345.0f;

// Log-sum-exps of the tiled kernel against the reference: within float rounding of the
// scores' magnitude, and -inf exactly where the reference has it (a row that sees no key).
inline void expect_lse_near(const std::vector<float>& ref, const std::vector<float>& fast) {
  ASSERT_EQ(ref.size(), fast.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NE(ref[i], kUnwritten) << "row " << i;
    if (std::isinf(ref[i])) {
      EXPECT_EQ(ref[i], fast[i]) << "row " << i;
      continue;
    }
    EXPECT_NEAR(fast[i], ref[i], 2e-5 * std::max(1.0f, std::abs(ref[i]))) << "row " << i;
  }
}

// The largest difference between two outputs of one shape, in any layout.
inline double max_diff(const Tensor4& a, const Tensor4& b) {
  const RopeTensor& o = a.view;
  double worst = 0;
  for (int n = 0; n < o.batch; ++n)
    for (int i = 0; i < o.tokens; ++i)
      for (int h = 0; h < o.heads; ++h)
        for (int c = 0; c < o.head_dim; ++c) worst = std::max(worst, std::abs(double{at(o, n, i, h, c)} - at(b.view, n, i, h, c)));
  return worst;
}

// The tiled kernel on `threads` threads against the reference: each row's log-sum-exp checked
// by expect_lse_near, the output's largest difference returned (f32 outputs; the kernel's
// written head-major when out_head_major, so the output walk is tested too).
inline double tiled_vs_reference(const Tensor4& q, const Tensor4& k, const Tensor4& v, const AttentionParams& p, int threads,
                          bool out_head_major = false) {
  const int B = q.view.batch, S = q.view.tokens, H = q.view.heads, D = q.view.head_dim;
  Tensor4 ref = make(DType::kF32, B, S, H, D, false, nullptr), fast = make(DType::kF32, B, S, H, D, out_head_major, nullptr);
  std::vector<float> ref_lse(static_cast<std::size_t>(B) * H * S, kUnwritten), fast_lse(ref_lse);
  AttentionOptions options;
  options.lse = ref_lse.data();
  attention_reference(q.view, k.view, v.view, ref.view, p, options);
  options.threads = threads;
  options.lse = fast_lse.data();
  options.bf16_dot_products = false;  // the f32 kernel, bf16 read into f32; the bf16 path: attention_bf16_test.cc
  attention(q.view, k.view, v.view, fast.view, p, options);
  expect_lse_near(ref_lse, fast_lse);
  return max_diff(ref, fast);
}

}  // namespace posenc::attention_test
