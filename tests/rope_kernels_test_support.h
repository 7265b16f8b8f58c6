// What the RoPE kernel tests share: owned q/k buffers of random values in any storage dtype, an
// element reader, a dot product, the M-RoPE axis map they use, and the fixture that measures the
// prefetch policy on every call and restores Highway's targets after each test.
#pragma once

#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/half.h"
#include "posenc/mrope.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_schedule.h"
#include "rope_prefetch_tuner.h"

namespace posenc::rope_kernels_test {

struct Buffer {
  DType dtype;
  std::vector<std::uint8_t> bytes;
  void* data() { return bytes.data(); }
};

inline Buffer random_buffer(DType dtype, std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Buffer b{dtype, std::vector<std::uint8_t>(n * dtype_size(dtype))};
  for (std::size_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    if (dtype == DType::kF32) std::memcpy(&b.bytes[4 * i], &v, 4);
    const std::uint16_t h = dtype == DType::kBF16 ? float_to_bf16(v) : float_to_f16(v);
    if (dtype != DType::kF32) std::memcpy(&b.bytes[2 * i], &h, 2);
  }
  return b;
}

inline RopeTensor with_data(RopeTensor t, void* data) {
  t.data = data;
  return t;
}

// The M-RoPE axis of each frequency of s, in sections of 1/2, 1/4 and the rest of them.
inline std::vector<std::uint8_t> three_axes(const RopeSchedule& s, bool interleaved) {
  const int half = static_cast<int>(s.inv_freq.size());
  return mrope_axis_map({half / 2, half / 4, half - half / 2 - half / 4}, interleaved);
}

// The process's prefetch tuner (core/src/rope_prefetch_tuner.h) measuring every call of two or
// more tokens, whatever its size, until the call's class settles: the first twelve calls of each
// class are cut in two token ranges rotated under two policies, so every kernel test below checks
// the split calls' bits too, then whole calls under the chosen policy. Then back to the
// process's configuration (POSENC_ROPE_PREFETCH, calls of the last-level cache's size).
inline void measure_every_rope_call() { rope_prefetch_tuner().reset(nullptr, 1); }
inline void measure_rope_calls_as_configured() {
  RopePrefetch fixed = RopePrefetch::kNone;
  const bool is_fixed = parse_rope_prefetch(std::getenv("POSENC_ROPE_PREFETCH"), &fixed);
  rope_prefetch_tuner().reset(is_fixed ? &fixed : nullptr, rope_prefetch_trial_bytes());
}

// Every test may pin one Highway target; each ends back on all of them. Every rope_rotate call a
// prefetch trial until its class settles (above).
class RopeKernels : public ::testing::Test {
 protected:
  void SetUp() override { measure_every_rope_call(); }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    measure_rope_calls_as_configured();
  }
};

// Element i of b, exactly (bf16 and f16 widen without rounding).
inline double value_at(const Buffer& b, std::size_t i) {
  if (b.dtype == DType::kF32) {
    float v;
    std::memcpy(&v, &b.bytes[4 * i], 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, &b.bytes[2 * i], 2);
  return b.dtype == DType::kBF16 ? bf16_to_float(h) : f16_to_float(h);
}

inline double dot(const Buffer& a, const Buffer& b, std::size_t n) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += value_at(a, i) * value_at(b, i);
  return sum;
}

}  // namespace posenc::rope_kernels_test
