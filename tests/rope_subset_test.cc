// Partial rotary at a channel offset and RoPE on a subset of heads (RopeApplyParams'
// channel_offset, rotated_heads): every SIMD target equals the scalar reference bit for bit; the
// reference equals plain RoPE on the rotated block alone with every other channel and head left
// as it was; rope_shift moves the same channels; the refusals.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_shift.h"
#include "expect_error.h"
#include "rope_kernels_test_support.h"

namespace posenc {
namespace {

using namespace rope_kernels_test;

RopeSchedule schedule(int head_dim) {
  RopeParams rp;
  rp.head_dim = head_dim;
  return compute_schedule(rp);
}

TEST_F(RopeKernels, OffsetsAndHeadSubsetsOnEveryTargetEqualTheReference) {
  const int batch = 2, tokens = 5, q_heads = 3, k_heads = 2, head_dim = 44;
  const RopeSchedule s = schedule(32);  // 16 pairs: 32 of the 44 channels rotate
  std::mt19937 rng(21);
  int combinations = 0;
  for (const auto target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (int offset : {0, 3, 12})
      for (int heads : {0, 1, 2, 5})
        for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
          for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
            for (bool table : {false, true}) {
              RopeApplyParams p = rope_apply_params(s, layout);
              p.channel_offset = offset;
              p.rotated_heads = heads;
              const PositionIds pos = PositionIds::implicit(7);
              Buffer q = random_buffer(dtype, std::size_t{batch} * tokens * q_heads * head_dim, rng);
              Buffer k = random_buffer(dtype, std::size_t{batch} * tokens * k_heads * head_dim, rng);
              Buffer q_ref = q, k_ref = k;
              rope_apply_reference(bshd(q_ref.data(), dtype, {batch, tokens, q_heads, head_dim}), pos, p);
              rope_apply_reference(bhsd(k_ref.data(), dtype, {batch, tokens, k_heads, head_dim}), pos, p);
              RopeTable cache(p, 16);
              RopeKernelOptions options;
              options.table = table ? &cache : nullptr;
              options.threads = 2;
              const RopeTensor kv = bhsd(k.data(), dtype, {batch, tokens, k_heads, head_dim});
              rope_rotate(bshd(q.data(), dtype, {batch, tokens, q_heads, head_dim}), &kv, pos, p, options);
              ASSERT_EQ(q.bytes, q_ref.bytes) << "offset " << offset << " heads " << heads << " " << to_string(dtype) << " "
                                              << to_string(layout) << " table " << table;
              ASSERT_EQ(k.bytes, k_ref.bytes) << "offset " << offset << " heads " << heads << " " << to_string(dtype);
              ++combinations;
            }
  }
  EXPECT_GT(combinations, 0);
}

// The reference against its definition: rotating [o, o + 32) of the first n heads is plain RoPE
// of a copy of that block alone; every other channel and head keeps its bits.
TEST(RopeSubset, TheRotatedBlockIsPlainRopeAndTheRestPassesThrough) {
  const int tokens = 4, heads = 3, head_dim = 44, rotary = 32;
  const RopeSchedule s = schedule(rotary);
  std::mt19937 rng(4);
  for (int offset : {0, 5, 12})
    for (int rotated_heads : {0, 2})
      for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
        std::vector<float> x(std::size_t{tokens} * heads * head_dim);
        std::normal_distribution<float> normal;
        for (auto& v : x) v = normal(rng);
        std::vector<float> got = x;
        RopeApplyParams p = rope_apply_params(s, layout);
        p.channel_offset = offset;
        p.rotated_heads = rotated_heads;
        rope_apply_reference(bshd(got.data(), {1, tokens, heads, head_dim}), PositionIds::implicit(3), p);
        // The block alone, [tokens, heads, 32], through plain RoPE.
        std::vector<float> block(std::size_t{tokens} * heads * rotary);
        for (int t = 0; t < tokens; ++t)
          for (int h = 0; h < heads; ++h)
            std::memcpy(&block[static_cast<std::size_t>((t * heads + h) * rotary)],
                        &x[static_cast<std::size_t>((t * heads + h) * head_dim + offset)], rotary * sizeof(float));
        rope_apply_reference(bshd(block.data(), {1, tokens, heads, rotary}), PositionIds::implicit(3), rope_apply_params(s, layout));
        for (int t = 0; t < tokens; ++t)
          for (int h = 0; h < heads; ++h)
            for (int c = 0; c < head_dim; ++c) {
              const std::size_t i = static_cast<std::size_t>((t * heads + h) * head_dim + c);
              const bool rotates = (rotated_heads == 0 || h < rotated_heads) && c >= offset && c < offset + rotary;
              const float want = rotates ? block[static_cast<std::size_t>((t * heads + h) * rotary + c - offset)] : x[i];
              ASSERT_EQ(got[i], want) << "offset " << offset << " heads " << rotated_heads << " t " << t << " h " << h << " c " << c;
            }
      }
}

TEST(RopeSubset, ShiftMovesTheSameChannelsAndHeads) {
  const int tokens = 6, heads = 3, head_dim = 40;
  const RopeSchedule s = schedule(16);
  std::mt19937 rng(8);
  Buffer k = random_buffer(DType::kF32, std::size_t{tokens} * heads * head_dim, rng), k_ref = k;
  RopeShiftParams shift;
  shift.rope = rope_apply_params(s);
  shift.rope.channel_offset = 9;
  shift.rope.rotated_heads = 2;
  shift.delta = -5;
  rope_shift(bshd(k.data(), DType::kF32, {1, tokens, heads, head_dim}), shift);
  rope_shift_reference(bshd(k_ref.data(), DType::kF32, {1, tokens, heads, head_dim}), shift);
  EXPECT_EQ(k.bytes, k_ref.bytes);
}

TEST(RopeSubset, RefusesChannelsOutsideTheHeadAndNegativeHeadCounts) {
  const RopeSchedule s = schedule(32);
  std::vector<float> x(44, 0.0f);
  const RopeTensor view = bshd(x.data(), {1, 1, 1, 44});
  RopeApplyParams p = rope_apply_params(s);
  p.channel_offset = 13;
  expect_error([&] { rope_rotate(view, nullptr, PositionIds::implicit(), p); },
                 "channel_offset 13 must be in [0, head_dim 44 - rotary dim 32]");
  p.channel_offset = -1;
  expect_error([&] { rope_apply_reference(view, PositionIds::implicit(), p); }, "channel_offset -1 must be in");
  p.channel_offset = 0;
  p.rotated_heads = -2;
  expect_error([&] { rope_rotate(view, nullptr, PositionIds::implicit(), p); }, "rotated_heads must be >= 0 (0: every head), got -2");
  RopeShiftParams shift;
  shift.rope = rope_apply_params(s);
  shift.rope.xpos.scale_base = 512;
  shift.delta = 1;
  expect_error([&] { rope_shift(view, shift); }, "xPos keys cannot be shifted");
}

}  // namespace
}  // namespace posenc
