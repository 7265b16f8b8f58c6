// The SIMD kernels against the scalar reference: every compiled-and-supported Highway target,
// every layout, dtype, partial rotary, M-RoPE, direction, id type and cos/sin mode — bit for bit;
// both walks (token-outer, head by head), thread counts, and direction -1 as the transpose.
// Storage conversions' special values and the refusals: rope_kernels_values_test.cc.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "posenc/rope_kernels.h"
#include "rope_kernels_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace rope_kernels_test;

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

// The kernels' widths chosen per row (rope_half_split-inl.h, rope_token_kernels-inl.h): cos/sin
// held in registers, a loop unrolled for half 64 (and 32 for emulated bf16), a runtime loop with
// vector and scalar tails — token-major, where each token calls the kernel, for head_dim 16 to
// 256 (half 8 to 128, an odd half of 21 included), every layout, target, dtype and direction,
// from a table and on the fly. (This host's targets only: AVX-512's 16 lanes run where it has
// them.)
TEST_F(RopeKernels, KernelWidthsEqualTheReferenceTokenMajor) {
  std::mt19937 rng(13);
  const int tokens = 3, heads = 3;
  std::vector<std::int64_t> ids = {5, 0, 77};
  int combinations = 0;
  const auto targets = hwy::SupportedAndGeneratedTargets();
  for (const auto target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (int head_dim : {16, 32, 42, 64, 96, 128, 256}) {
      const RopeSchedule sched = testing::plain_schedule(head_dim);
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
        for (int direction : {1, -1})
          for (bool table : {false, true}) {
            RopeApplyParams p = rope_apply_params(sched, layout);
            p.direction = direction;
            const PositionIds pos{ids.data(), 1, tokens};
            Buffer x = random_buffer(dtype, std::size_t{tokens} * heads * head_dim, rng), ref = x;
            const RopeTensor view = bshd(x.data(), dtype, {1, tokens, heads, head_dim});
            rope_apply_reference(with_data(view, ref.data()), pos, p);
            RopeTable cache(p, 80);
            RopeKernelOptions options;
            options.table = table ? &cache : nullptr;
            rope_rotate(view, nullptr, pos, p, options);
            ASSERT_EQ(x.bytes, ref.bytes) << to_string(dtype) << " layout " << static_cast<int>(layout) << " head_dim " << head_dim
                                          << " dir " << direction << " table " << table;
            ++combinations;
          }
    }
  }
  EXPECT_EQ(combinations, static_cast<int>(targets.size()) * 7 * 3 * 3 * 2 * 2);
}

TEST_F(RopeKernels, LargePositionsOnTheFlyOnEveryTarget) {
  const RopeSchedule s = testing::plain_schedule(64);
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

// [B, H, S, D] storage with a table is walked in groups of up to 4 heads of one tensor, token by
// token, through chunks of tokens (1024 at head_dim 128: 512 KiB of cos/sin rows); each thread
// takes a run of groups, or of token slices of them where groups are fewer than threads. Shapes
// with a group of 4 and a remainder group (q: 5, 6 heads), a lone head (k: 1 head), 1100 tokens
// across a chunk's end, vector tails (head_dim 40), head_dim 64 and 128 (the emulated bf16
// kernel's constant widths), 6 threads over 4 units (2 batch rows x the q group and the k head: 2
// token slices each, 8 items), batch rows with consecutive ids (implicit, or explicit) and with a
// gap, every target, layout, dtype and direction.
TEST_F(RopeKernels, HeadMajorGroupsAndChunksEqualTheReference) {
  std::mt19937 rng(31);
  const int batch = 2, k_heads = 1;
  struct Shape {
    int tokens, heads, head_dim, threads;
  };
  int combinations = 0;
  const auto targets = hwy::SupportedAndGeneratedTargets();
  for (const auto target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Shape& shape : {Shape{9, 3, 40, 2}, Shape{9, 6, 128, 3}, Shape{9, 5, 64, 2}, Shape{600, 3, 40, 6}, Shape{1100, 5, 128, 2}}) {
      const int tokens = shape.tokens, head_dim = shape.head_dim;
      std::vector<std::int64_t> ids(static_cast<std::size_t>(batch) * tokens);
      for (int t = 0; t < tokens; ++t) {
        ids[static_cast<std::size_t>(t)] = 40 + t;                                           // row 0: consecutive
        const int gap_at = tokens > 9 ? 300 : 4;
        ids[static_cast<std::size_t>(tokens + t)] = t < gap_at ? 7 + t : 20 + t;  // row 1: a gap
      }
      const RopeSchedule sched = testing::plain_schedule(head_dim);
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
          for (int direction : {1, -1})
            for (bool implicit : {true, false}) {
              RopeApplyParams p = rope_apply_params(sched, layout);
              p.direction = direction;
              p.attention_factor = 1.125;
              const PositionIds pos = implicit ? PositionIds::implicit(5) : PositionIds{ids.data(), 1, batch * tokens};
              Buffer q = random_buffer(dtype, std::size_t{batch} * tokens * shape.heads * head_dim, rng), q_ref = q;
              Buffer k = random_buffer(dtype, std::size_t{batch} * tokens * k_heads * head_dim, rng), k_ref = k;
              const RopeTensor qv = bhsd(q.data(), dtype, {batch, tokens, shape.heads, head_dim});
              const RopeTensor kv = bhsd(k.data(), dtype, {batch, tokens, k_heads, head_dim});
              rope_apply_reference(with_data(qv, q_ref.data()), pos, p);
              rope_apply_reference(with_data(kv, k_ref.data()), pos, p);
              RopeTable table(p, 8);
              RopeKernelOptions options;
              options.table = &table;
              options.threads = shape.threads;
              rope_rotate(qv, &kv, pos, p, options);
              ASSERT_EQ(q.bytes, q_ref.bytes) << to_string(dtype) << " " << to_string(layout) << " tokens " << tokens
                                              << " head_dim " << head_dim << " dir " << direction << " implicit " << implicit
                                              << " threads " << shape.threads;
              ASSERT_EQ(k.bytes, k_ref.bytes) << to_string(dtype) << " " << to_string(layout) << " tokens " << tokens;
              ++combinations;
            }
    }
  }
  EXPECT_EQ(combinations, static_cast<int>(targets.size()) * 5 * 3 * 3 * 2 * 2);
}

TEST_F(RopeKernels, ThreadCountDoesNotChangeBits) {
  const RopeSchedule s = testing::plain_schedule(128);
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
  const RopeSchedule s = testing::plain_schedule(128);
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

}  // namespace
}  // namespace posenc
