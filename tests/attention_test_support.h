// What the attention tests share: owned [B, tokens, heads, D] tensors in either memory order,
// an element reader, and the parameters of each position scheme over random tables.
#pragma once

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

}  // namespace posenc::attention_test
