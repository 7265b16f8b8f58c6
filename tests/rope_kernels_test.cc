// The SIMD kernels against the scalar reference: every compiled-and-supported Highway target,
// every layout, dtype, partial rotary, M-RoPE, direction, id type and cos/sin mode — bit for bit.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>

#include "posenc/error.h"
#include "posenc/mrope.h"
#include "posenc/rope_kernels.h"

namespace posenc {
namespace {

struct Buffer {
  DType dtype;
  std::vector<std::uint8_t> bytes;
  void* data() { return bytes.data(); }
};

Buffer random_buffer(DType dtype, std::size_t n, std::mt19937& rng) {
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

RopeTensor with_data(RopeTensor t, void* data) {
  t.data = data;
  return t;
}

// The M-RoPE axis of each frequency of s, in sections of 1/2, 1/4 and the rest of them.
std::vector<std::uint8_t> three_axes(const RopeSchedule& s, bool interleaved) {
  const int half = static_cast<int>(s.inv_freq.size());
  return mrope_axis_map({half / 2, half / 4, half - half / 2 - half / 4}, interleaved);
}

class RopeKernels : public ::testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_F(RopeKernels, EveryTargetEqualsTheReferenceBitForBit) {
  const int batch = 2, tokens = 5, q_heads = 3, k_heads = 2, head_dim = 40;
  RopeParams rp;
  rp.head_dim = head_dim;
  rp.theta = 10000;
  std::mt19937 rng(7);
  std::vector<std::int64_t> ids64(3 * batch * tokens);
  // Up to 4000 (+ an offset of 1000) keeps the cos/sin tables small; large positions are the
  // subject of AccurateAnglesStayExactAtLargePositions and of the on-the-fly case below.
  std::uniform_int_distribution<std::int64_t> any_position(0, 4000);
  for (auto& v : ids64) v = any_position(rng);
  std::vector<std::int32_t> ids32(ids64.begin(), ids64.end());
  const auto targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  int combinations = 0;
  for (const auto target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (double prf : {1.0, 0.5}) {
      rp.partial_rotary_factor = prf;
      const RopeSchedule s = compute_schedule(rp);
      const auto mrope_axes = three_axes(s, prf < 1);
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
          for (int direction : {1, -1})
            for (bool mrope : {false, true})
              for (bool table : {false, true})
                for (Numerics angles : {Numerics::kAccurate, Numerics::kHfFloat32})
                for (bool k_head_major : {false, true}) {  // both views head-major: the head-major path
                  RopeApplyParams p = rope_apply_params(s, layout);
                  p.direction = direction;
                  p.angles = angles;
                  p.attention_factor = 1.125;
                  if (mrope) p.axis_of_freq = mrope_axes.data();
                  PositionIds pos{mrope || direction < 0 ? ids64.data() : nullptr, mrope ? 3 : 1, batch * tokens};
                  if (!mrope && direction > 0) {  // int32 ids with a KV-cache offset, or implicit arange
                    pos.ids32 = table ? ids32.data() : nullptr;
                    pos.offset = 1000;
                  }
                  Buffer q = random_buffer(dtype, std::size_t{batch} * tokens * q_heads * head_dim, rng);
                  Buffer k = random_buffer(dtype, std::size_t{batch} * tokens * k_heads * head_dim, rng);
                  Buffer q_ref = q, k_ref = k;
                  const RopeTensor qv = bhsd(q.data(), dtype, {batch, tokens, q_heads, head_dim});
                  const RopeTensor kv = k_head_major ? bhsd(k.data(), dtype, {batch, tokens, k_heads, head_dim})
                                                     : bshd(k.data(), dtype, {batch, tokens, k_heads, head_dim});
                  rope_apply_reference(with_data(qv, q_ref.data()), pos, p);
                  rope_apply_reference(with_data(kv, k_ref.data()), pos, p);
                  RopeTable cache(p, 16);
                  RopeKernelOptions options;
                  options.table = table ? &cache : nullptr;
                  options.threads = 2;
                  rope_rotate(qv, &kv, pos, p, options);
                  ASSERT_EQ(q.bytes, q_ref.bytes) << to_string(dtype) << " layout " << static_cast<int>(layout)
                                                  << " dir " << direction << " mrope " << mrope << " table " << table;
                  ASSERT_EQ(k.bytes, k_ref.bytes) << to_string(dtype) << " layout " << static_cast<int>(layout);
                  ++combinations;
                }
    }
  }
  EXPECT_EQ(combinations, static_cast<int>(targets.size()) * 2 * 3 * 3 * 2 * 2 * 2 * 2 * 2);
  std::printf("kernels: %d combinations on %zu targets equal the reference\n", combinations, targets.size());
}

TEST_F(RopeKernels, LargePositionsOnTheFlyOnEveryTarget) {
  RopeParams rp;
  rp.head_dim = 64;
  const RopeSchedule s = compute_schedule(rp);
  std::mt19937 rng(11);
  const std::vector<std::int64_t> ids = {0, 65535, 131071, 1 << 24, 2147483647};
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      Buffer x = random_buffer(dtype, 5 * 2 * 64, rng), ref = x;
      const RopeApplyParams p = rope_apply_params(s);
      rope_apply_reference(bshd(ref.data(), dtype, {1, 5, 2, 64}), {ids.data(), 1, 5}, p);
      rope_rotate(bshd(x.data(), dtype, {1, 5, 2, 64}), nullptr, {ids.data(), 1, 5}, p);
      EXPECT_EQ(x.bytes, ref.bytes) << hwy::TargetName(target) << " " << to_string(dtype);
    }
  }
}

// Narrowing to bf16 rounds like posenc::float_to_bf16 on every target, whether the CPU's own
// instruction (AVX512_BF16) or the emulation does it: values that round to even, subnormal
// inputs and results (which the instruction flushes to zero: the kernel must not let it),
// zeros, infinities, overflow to infinity and NaN. head_dim 96 and 128 reach the kernel's
// two-vectors-a-step loop, its one-vector step and (interleaved) its pair path.
TEST_F(RopeKernels, Bf16NarrowingEqualsTheReferenceNativeAndEmulated) {
  std::mt19937 rng(29);
  std::vector<std::uint16_t> specials = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x0081, 0x00ff,
                                         0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x7fff, 0xffff, 0x3f80};
  std::uniform_int_distribution<int> any_bits(0, 0xffff), pick(0, 3);
  std::vector<std::int64_t> ids;
  for (int t = 0; t < 7; ++t) ids.push_back(t == 0 ? 0 : 1 + 977 * t);
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (bool native : {true, false}) {
      allow_rope_native_bf16_for_test(native);
      for (int head_dim : {96, 128})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3}) {
          RopeParams rp;
          rp.head_dim = head_dim;
          const RopeSchedule schedule = compute_schedule(rp);  // p points into it
          RopeApplyParams p = rope_apply_params(schedule, layout);
          p.attention_factor = 1.0625;  // products that are not exact: every lane rounds
          const std::size_t n = ids.size() * 2 * static_cast<std::size_t>(head_dim);
          Buffer x{DType::kBF16, std::vector<std::uint8_t>(2 * n)};
          for (std::size_t i = 0; i < n; ++i) {
            // Mostly subnormal-range and ordinary values; some specials; one vector in four clean.
            const int kind = pick(rng);
            const std::uint16_t bits = kind == 0   ? specials[static_cast<std::size_t>(any_bits(rng)) % specials.size()]
                                       : kind == 1 ? static_cast<std::uint16_t>(any_bits(rng) & 0x80ff)  // tiny
                                                   : static_cast<std::uint16_t>(0x3c00 + (any_bits(rng) & 0x07ff));
            std::memcpy(&x.bytes[2 * i], &bits, 2);
          }
          for (std::size_t i = n / 4; i < n / 2; ++i) x.bytes[2 * i + 1] = 0x3f;  // normal values only
          Buffer ref = x;
          const RopeTensor view = bshd(x.data(), DType::kBF16, {1, static_cast<int>(ids.size()), 2, head_dim});
          const PositionIds pos{ids.data(), 1, static_cast<int>(ids.size())};
          rope_apply_reference(with_data(view, ref.data()), pos, p);
          rope_rotate(view, nullptr, pos, p);
          for (std::size_t i = 0; i < n; ++i) {
            std::uint16_t got, want;
            std::memcpy(&got, &x.bytes[2 * i], 2);
            std::memcpy(&want, &ref.bytes[2 * i], 2);
            // A NaN result stays a quiet NaN; its payload depends on which NaN operand the
            // hardware propagates (operand order, unspecified by IEEE 754), not on rounding.
            const auto is_nan = [](std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; };
            if (is_nan(want) && is_nan(got) && (got & 0x40)) continue;
            ASSERT_EQ(got, want) << "native " << native << " head_dim " << head_dim << " layout " << to_string(layout)
                                 << " element " << i;
          }
        }
    }
  }
  allow_rope_native_bf16_for_test(true);
  hwy::SetSupportedTargetsForTest(0);
  std::printf("bf16 narrowing: the CPU's instruction %s here\n", rope_native_bf16() ? "is used" : "is not available");
}

// [B, H, S, D] storage with a table is walked head by head; where a batch row's positions are
// consecutive, all of a head's tokens go through one call (each token a row of the view, its own
// cos/sin row). Rows with consecutive ids (implicit, or explicit) and with a gap, every target,
// layout, dtype, direction, and head dims with and without vector tails.
TEST_F(RopeKernels, HeadMajorRunsOfConsecutivePositionsEqualTheReference) {
  std::mt19937 rng(31);
  const int batch = 2, heads = 3;
  int combinations = 0;
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    // 9 tokens, and 600 (row 1 with its gap after 300), with and without vector tails.
    for (const auto& [tokens, head_dim] : {std::pair{9, 40}, std::pair{9, 128}, std::pair{600, 40}}) {
      std::vector<std::int64_t> ids(static_cast<std::size_t>(batch) * tokens);
      for (int t = 0; t < tokens; ++t) {
        ids[static_cast<std::size_t>(t)] = 40 + t;                                           // row 0: consecutive
        const int gap_at = tokens > 9 ? 300 : 4;
        ids[static_cast<std::size_t>(tokens + t)] = t < gap_at ? 7 + t : 20 + t;  // row 1: a gap
      }
      RopeParams rp;
      rp.head_dim = head_dim;
      const RopeSchedule sched = compute_schedule(rp);
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
          for (int direction : {1, -1})
            for (bool implicit : {true, false}) {
              RopeApplyParams p = rope_apply_params(sched, layout);
              p.direction = direction;
              p.attention_factor = 1.125;
              const PositionIds pos = implicit ? PositionIds::implicit(5) : PositionIds{ids.data(), 1, batch * tokens};
              Buffer q = random_buffer(dtype, std::size_t{batch} * tokens * heads * head_dim, rng), ref = q;
              const RopeTensor view = bhsd(q.data(), dtype, {batch, tokens, heads, head_dim});
              rope_apply_reference(with_data(view, ref.data()), pos, p);
              RopeTable table(p, 8);
              RopeKernelOptions options;
              options.table = &table;
              options.threads = 2;
              rope_rotate(view, nullptr, pos, p, options);
              ASSERT_EQ(q.bytes, ref.bytes) << to_string(dtype) << " " << to_string(layout) << " head_dim " << head_dim
                                            << " dir " << direction << " implicit " << implicit;
              ++combinations;
            }
    }
  }
  EXPECT_GT(combinations, 0);
}

TEST_F(RopeKernels, ThreadCountDoesNotChangeBits) {
  RopeParams rp;
  rp.head_dim = 128;
  const RopeSchedule s = compute_schedule(rp);
  std::mt19937 rng(3);
  Buffer one = random_buffer(DType::kBF16, 64 * 4 * 128, rng), two = one;
  const RopeApplyParams p = rope_apply_params(s);
  RopeKernelOptions o1, o2;
  o1.threads = 1;
  o2.threads = 2;
  rope_rotate(bshd(one.data(), DType::kBF16, {1, 64, 4, 128}), nullptr, {}, p, o1);
  rope_rotate(bshd(two.data(), DType::kBF16, {1, 64, 4, 128}), nullptr, {}, p, o2);
  EXPECT_EQ(one.bytes, two.bytes);
}

TEST_F(RopeKernels, ForwardThenBackwardReturnsTheInput) {
  RopeParams rp;
  rp.head_dim = 128;
  const RopeSchedule s = compute_schedule(rp);
  std::mt19937 rng(5);
  Buffer x = random_buffer(DType::kF32, 16 * 8 * 128, rng);
  const Buffer original = x;
  RopeApplyParams p = rope_apply_params(s, RopeLayout::kInterleaved);
  const RopeTensor view = bshd(x.data(), DType::kF32, {2, 8, 8, 128});
  const PositionIds pos = PositionIds::implicit(123456);
  rope_rotate(view, nullptr, pos, p);
  p.direction = -1;
  rope_rotate(view, nullptr, pos, p);
  const float* a = reinterpret_cast<const float*>(x.bytes.data());
  const float* b = reinterpret_cast<const float*>(original.bytes.data());
  for (std::size_t i = 0; i < 16 * 8 * 128; ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << i;
}

double value_at(const Buffer& b, std::size_t i) {
  if (b.dtype == DType::kF32) {
    float v;
    std::memcpy(&v, &b.bytes[4 * i], 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, &b.bytes[2 * i], 2);
  return b.dtype == DType::kBF16 ? bf16_to_float(h) : f16_to_float(h);
}

double dot(const Buffer& a, const Buffer& b, std::size_t n) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += value_at(a, i) * value_at(b, i);
  return sum;
}

// direction -1 must be the transpose of direction +1 (it is the backward pass): the adjoint
// identity <R x, y> = <x, R^T y>, and R^T R x = x when the attention factor is 1 — every target,
// layout, dtype, partial rotary and M-RoPE. DeepSeek-V3 reads pairs and writes halves, so its
// transpose must read halves and write pairs; reading pairs both ways fails both checks.
TEST_F(RopeKernels, DirectionMinusOneIsTheTransposeOnEveryTarget) {
  const int batch = 2, tokens = 6, heads = 3, head_dim = 40;
  const std::size_t n = std::size_t{batch} * tokens * heads * head_dim;
  std::mt19937 rng(17);
  std::vector<std::int64_t> ids(3 * batch * tokens);
  std::uniform_int_distribution<std::int64_t> any_position(0, 100000);
  for (auto& v : ids) v = any_position(rng);
  int combinations = 0;
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (double prf : {1.0, 0.5}) {
      RopeParams rp;
      rp.head_dim = head_dim;
      rp.partial_rotary_factor = prf;
      const RopeSchedule s = compute_schedule(rp);
      const auto mrope_axes = three_axes(s, prf < 1);
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
          for (bool mrope : {false, true})
            for (double factor : {1.0, 1.2}) {
              SCOPED_TRACE(std::string(to_string(dtype)) + " layout " + std::to_string(static_cast<int>(layout)) + " prf " +
                           std::to_string(prf) + " mrope " + std::to_string(mrope) + " factor " + std::to_string(factor));
              RopeApplyParams p = rope_apply_params(s, layout);
              p.attention_factor = factor;
              if (mrope) p.axis_of_freq = mrope_axes.data();
              const PositionIds pos{ids.data(), mrope ? 3 : 1, batch * tokens};
              const Buffer x = random_buffer(dtype, n, rng), y = random_buffer(dtype, n, rng);
              Buffer rx = x, rty = y;
              p.direction = +1;
              rope_rotate(bshd(rx.data(), dtype, {batch, tokens, heads, head_dim}), nullptr, pos, p);
              p.direction = -1;
              rope_rotate(bshd(rty.data(), dtype, {batch, tokens, heads, head_dim}), nullptr, pos, p);
              // Storage rounding (2^-8 for bf16) bounds the gap: each side is a sum of n products
              // of rounded values.
              const double eps = dtype == DType::kF32 ? 1e-6 : dtype == DType::kBF16 ? 8e-3 : 1e-3;
              const double scale = std::sqrt(dot(x, x, n) * dot(y, y, n));
              EXPECT_NEAR(dot(rx, y, n), dot(x, rty, n), eps * scale);
              if (factor == 1.0) {
                Buffer back = rx;
                rope_rotate(bshd(back.data(), dtype, {batch, tokens, heads, head_dim}), nullptr, pos, p);
                double worst = 0;
                for (std::size_t i = 0; i < n; ++i)
                  worst = std::max(worst, std::abs(value_at(back, i) - value_at(x, i)) / (1 + std::abs(value_at(x, i))));
                EXPECT_LT(worst, dtype == DType::kF32 ? 1e-5 : dtype == DType::kBF16 ? 2e-2 : 3e-3);
              }
              // The scalar reference is the transpose too.
              Buffer ref = y;
              rope_apply_reference(bshd(ref.data(), dtype, {batch, tokens, heads, head_dim}), pos, p);
              EXPECT_EQ(ref.bytes, rty.bytes);
              ++combinations;
            }
    }
  }
  EXPECT_GT(combinations, 0);
}

TEST_F(RopeKernels, AnglesBeyondTheAccurateRangeAreRefused) {
  // rope_theta 0.25 makes inv_freq[1] = 2: position 2^30 + 1 is an angle past 2^31 radians.
  RopeParams rp;
  rp.head_dim = 4;
  rp.theta = 0.25;
  const RopeSchedule s = compute_schedule(rp);
  const RopeApplyParams p = rope_apply_params(s);
  std::vector<float> x(4, 1.0f);
  const std::int64_t ok = 1 << 30, far = (std::int64_t{1} << 30) + 1;
  EXPECT_NO_THROW(rope_rotate(bshd(x.data(), {1, 1, 1, 4}), nullptr, {&ok, 1, 1}, p));
  try {
    rope_rotate(bshd(x.data(), {1, 1, 1, 4}), nullptr, {&far, 1, 1}, p);
    ADD_FAILURE() << "no error past 2^31 radians";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("beyond 2^31"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rope_apply_reference(bshd(x.data(), {1, 1, 1, 4}), {&far, 1, 1}, p), Error);
}

// A NaN or infinite attention factor is refused by name: cos and sin must be finite (the bf16
// narrowing relies on it, and no schedule produces another).
TEST_F(RopeKernels, ANonFiniteAttentionFactorIsRefused) {
  RopeParams rp;
  rp.head_dim = 4;
  const RopeSchedule s = compute_schedule(rp);
  std::vector<float> x(4, 1.0f);
  for (double factor : {std::nan(""), HUGE_VAL}) {
    const RopeApplyParams p = rope_apply_params(s.inv_freq, factor, RopeLayout::kHalfSplit);
    try {
      rope_rotate(bshd(x.data(), {1, 1, 1, 4}), nullptr, {}, p);
      ADD_FAILURE() << "no error for attention factor " << factor;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention_factor must be finite"), std::string::npos) << e.what();
    }
  }
}

TEST_F(RopeKernels, TableGrowsAndRejectsAMismatch) {
  RopeParams rp;
  rp.head_dim = 8;
  const RopeSchedule s = compute_schedule(rp);
  const RopeApplyParams p = rope_apply_params(s);
  RopeTable table(p, 4);
  EXPECT_EQ(table.ensure(3)->positions, 4);
  EXPECT_GE(table.ensure(1000)->positions, 1001);
  RopeApplyParams other = p;
  other.attention_factor = 2;
  std::vector<float> x(8, 1.0f);
  RopeKernelOptions o;
  o.table = &table;
  EXPECT_THROW(rope_rotate(bshd(x.data(), {1, 1, 1, 8}), nullptr, {}, other, o), Error);
  const RopeTensor bad_k = bshd(x.data(), {1, 2, 1, 4});
  EXPECT_THROW(rope_rotate(bshd(x.data(), {1, 1, 1, 8}), &bad_k, {}, p), Error);
}

}  // namespace
}  // namespace posenc
