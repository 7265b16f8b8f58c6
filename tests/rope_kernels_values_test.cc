// The RoPE kernels at the edges of their values: bf16 narrowing of special values (native and
// emulated) and f16's on every target, the angles and attention factors they refuse, and the cos/sin
// table's growth and mismatch checks. Rotation and walks: rope_kernels_test.cc.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_kernels.h"
#include "rope_kernels_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace rope_kernels_test;

// The two inputs (indices into the same buffer) whose rotation gives output i of a row of
// head_dim values: the pair i belongs to after the layout's permutation.
std::pair<std::size_t, std::size_t> operands(RopeLayout layout, int direction, std::size_t i, std::size_t head_dim) {
  const std::size_t row = i - i % head_dim, k = i % head_dim, half = head_dim / 2;
  switch (layout) {
    case RopeLayout::kHalfSplit: return {row + k % half, row + k % half + half};
    case RopeLayout::kInterleaved: return {row + (k & ~std::size_t{1}), row + (k | 1)};
    case RopeLayout::kDeepSeekV3:  // forward: pairs in, halves out; backward: the reverse
      if (direction > 0) return {row + 2 * (k % half), row + 2 * (k % half) + 1};
      return {row + k / 2, row + k / 2 + half};
  }
  return {i, i};
}

// A NaN result: which of two NaN operands it carries, and its sign, IEEE 754 leaves to the
// hardware and the operation's form. It must carry one of its two inputs' payloads (made quiet), or
// be the default NaN where an input is infinite (inf x 0, inf - inf). Bit fields of one format.
struct NanBits {
  std::uint16_t exponent, mantissa, quiet;
  bool is_nan(std::uint16_t b) const { return (b & exponent) == exponent && (b & mantissa) != 0; }
  bool allowed(std::uint16_t got, std::uint16_t in_a, std::uint16_t in_b) const {
    const auto carries = [&](std::uint16_t in) { return is_nan(in) && ((in | quiet) & 0x7fff) == (got & 0x7fff); };
    const bool infinite_input = (in_a & 0x7fff) == exponent || (in_b & 0x7fff) == exponent;
    return is_nan(got) && (carries(in_a) || carries(in_b) || (infinite_input && (got & 0x7fff) == (exponent | quiet)));
  }
};
constexpr NanBits kBf16Nan{0x7f80, 0x007f, 0x0040}, kF16Nan{0x7c00, 0x03ff, 0x0200};

std::uint16_t Bits16(const Buffer& b, std::size_t i) {
  std::uint16_t v;
  std::memcpy(&v, &b.bytes[2 * i], 2);
  return v;
}

// A rotation of 16-bit values (rows of head_dim) against the reference's: the same bits, or, where
// the reference's is a NaN, one the rule allows. Stops at the first difference; returns the
// number of NaN results.
int ExpectReferenceBits(const NanBits& nan, const Buffer& in, const Buffer& got, const Buffer& want, RopeLayout layout,
                        int direction, std::size_t head_dim, const std::string& where) {
  int nan_results = 0;
  for (std::size_t i = 0; i < in.bytes.size() / 2; ++i) {
    const std::uint16_t g = Bits16(got, i), w = Bits16(want, i);
    bool ok = g == w;
    if (nan.is_nan(w)) {
      ++nan_results;
      const auto [first, second] = operands(layout, direction, i, head_dim);
      ok = nan.allowed(g, Bits16(in, first), Bits16(in, second));
    }
    if (!ok) {
      ADD_FAILURE() << where << " element " << i << ": got " << g << ", the reference " << w;
      break;
    }
  }
  return nan_results;
}

// Narrowing to bf16 rounds like posenc::float_to_bf16 on every target, whether the CPU's own
// instruction (AVX512_BF16) or the emulation does it: values that round to even, subnormal
// inputs and results (which the instruction flushes to zero: the kernel must not let it),
// zeros, infinities, overflow to infinity and NaN. head_dim 84, 96 and 128 reach the kernels'
// two-vectors-a-step loops, their one-vector steps and scalar tails.
TEST_F(RopeKernels, Bf16NarrowingEqualsTheReferenceNativeAndEmulated) {
  std::mt19937 rng(29);
  std::vector<std::uint16_t> specials = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x0081, 0x00ff,
                                         0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x7fff, 0xffff, 0x3f80,
                                         0x7f95, 0xffaa};
  std::uniform_int_distribution<int> any_bits(0, 0xffff), pick(0, 3);
  std::vector<std::int64_t> ids;
  for (int t = 0; t < 7; ++t) ids.push_back(t == 0 ? 0 : 1 + 977 * t);
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (bool native : {true, false}) {
      allow_rope_native_bf16_for_test(native);
      for (int head_dim : {84, 96, 128})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3}) {
          const RopeSchedule schedule = testing::plain_schedule(head_dim);  // p points into it
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
          const Buffer in = x;
          const RopeTensor view = bshd(x.data(), DType::kBF16, {1, static_cast<int>(ids.size()), 2, head_dim});
          const PositionIds pos{ids.data(), 1, static_cast<int>(ids.size())};
          rope_apply_reference(with_data(view, ref.data()), pos, p);
          rope_rotate(view, nullptr, pos, p);
          ExpectReferenceBits(kBf16Nan, in, x, ref, layout, 1, static_cast<std::size_t>(head_dim),
                              "native " + std::to_string(native) + " head_dim " + std::to_string(head_dim) + " layout " +
                                  to_string(layout));
        }
    }
  }
  allow_rope_native_bf16_for_test(true);
  hwy::SetSupportedTargetsForTest(0);
  std::printf("bf16 narrowing: the CPU's instruction %s here\n", rope_native_bf16() ? "is used" : "is not available");
}

// f16 storage at its edges, through every layout's kernel (interleaved's rotation is x c2 +
// swap(x) s2 with the sin's sign folded in; DeepSeek-V3 narrows as it stores the halves): zeros
// of both signs, subnormals, the largest finite values (their rotations round to infinity when
// narrowed back to f16), infinities and NaN, every target, both directions, token-major and
// head-major (the grouped walk). A NaN result may carry either operand's
// payload (the hardware's choice, as in the bf16 test above); everything else equals the
// reference bit for bit.
TEST_F(RopeKernels, F16SpecialValuesEqualTheReference) {
  std::mt19937 rng(37);
  const std::vector<std::uint16_t> specials = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff,
                                               0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0x3c00, 0xbc00, 0x7d55, 0xfeaa, 0x7fff};
  std::uniform_int_distribution<int> any_bits(0, 0xffff), pick(0, 2);
  std::vector<std::int64_t> ids;
  for (int t = 0; t < 5; ++t) ids.push_back(t == 0 ? 0 : 1 + 613 * t);
  int nan_results = 0;
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (int head_dim : {84, 96, 128})
      for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
        for (int direction : {1, -1})
        for (bool head_major : {false, true}) {  // head-major with a table: the grouped walk
          const RopeSchedule schedule = testing::plain_schedule(head_dim);  // p points into it
          RopeApplyParams p = rope_apply_params(schedule, layout);
          p.direction = direction;
          p.attention_factor = 1.0625;  // products that are not exact: every lane rounds
          const std::size_t n = ids.size() * 2 * static_cast<std::size_t>(head_dim);
          Buffer x{DType::kF16, std::vector<std::uint8_t>(2 * n)};
          for (std::size_t i = 0; i < n; ++i) {
            const int kind = pick(rng);
            const std::uint16_t bits = kind == 0   ? specials[static_cast<std::size_t>(any_bits(rng)) % specials.size()]
                                       : kind == 1 ? static_cast<std::uint16_t>(any_bits(rng) & 0x83ff)  // subnormal
                                                   : static_cast<std::uint16_t>(0x3000 + (any_bits(rng) & 0x0fff));
            std::memcpy(&x.bytes[2 * i], &bits, 2);
          }
          Buffer ref = x;
          const Buffer in = x;
          const int tokens = static_cast<int>(ids.size());
          const RopeTensor view = head_major ? bhsd(x.data(), DType::kF16, {1, tokens, 2, head_dim})
                                             : bshd(x.data(), DType::kF16, {1, tokens, 2, head_dim});
          const PositionIds pos{ids.data(), 1, tokens};
          rope_apply_reference(with_data(view, ref.data()), pos, p);
          RopeTable table(p, 4096);
          RopeKernelOptions options;
          options.table = head_major ? &table : nullptr;
          rope_rotate(view, nullptr, pos, p, options);
          nan_results += ExpectReferenceBits(kF16Nan, in, x, ref, layout, direction, static_cast<std::size_t>(head_dim),
                                             "head_dim " + std::to_string(head_dim) + " layout " + to_string(layout) + " direction " +
                                                 std::to_string(direction) + " head-major " + std::to_string(head_major));
        }
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GT(nan_results, 0);  // the inputs reach NaN results (infinities times zero, NaN inputs)
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
  const RopeSchedule s = testing::plain_schedule(4);
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
  const RopeSchedule s = testing::plain_schedule(8);
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
