// bf16 attention on AVX512-BF16 (posenc/attention_bf16.h): the output of every query row
// against attention_reference (double) on the same bf16 inputs, element by element within the
// header's bound, computed here from the reference's own scores and weights; which calls take
// the path; and the fallback (the f32 kernel, bit for bit) where the CPU lacks the instruction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention_bf16.h"
#include "attention_bf16_bound.h"
#include "attention_plan.h"
#include "attention_test_support.h"
#include "posenc/attention.h"
#include "posenc/attention_bf16.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

struct Case {
  const char* name;
  int S, T, Hq, Hk, D;
  AttentionPositions positions;
  bool causal;
  RopeLayout layout;
  bool padded;  // batch row 1's first 20 keys padding: its first 20 queries (causal) see no key
  DType out;
  int window;  // sliding window, 0: none
};

TEST(AttentionBf16, WithinTheBoundOfBf16RoundingAgainstTheDoubleReference) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the path is never taken (the fallback test covers it)";
  const std::vector<Case> cases = {
      {"alibi causal GQA, 2 query tiles and 5 key tiles, each last one partial", 300, 300, 4, 2, 64, AttentionPositions::kAlibi, true, RopeLayout::kHalfSplit, false, DType::kF32, 0},
      {"alibi symmetric, S < T, T not a tile multiple", 33, 100, 4, 2, 64, AttentionPositions::kAlibi, false, RopeLayout::kHalfSplit, false, DType::kF32, 0},
      {"rope half-split causal D 128, sliding window 70", 200, 200, 4, 1, 128, AttentionPositions::kRope, true, RopeLayout::kHalfSplit, false, DType::kF32, 70},
      {"rope interleaved D 40 (a partial vector of sums), bf16 out", 70, 70, 2, 2, 40, AttentionPositions::kRope, false, RopeLayout::kInterleaved, false, DType::kBF16, 0},
      {"no positions, odd D 33, rows that see no key", 90, 90, 2, 1, 33, AttentionPositions::kNone, true, RopeLayout::kHalfSplit, true, DType::kF32, 0},
      {"t5 causal, padding", 130, 130, 2, 2, 64, AttentionPositions::kT5, true, RopeLayout::kHalfSplit, true, DType::kF32, 0},
  };
  std::mt19937 rng(29);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int B = 2;
    BiasInputs setup;
    AttentionParams p = params_for(c.positions, setup, c.Hq, B, c.T, rng);
    p.mask.causal = c.causal;
    p.alibi_mode = c.causal ? AlibiMode::kCausal : AlibiMode::kSymmetric;
    p.t5.bidirectional = !c.causal;
    const RopeSchedule sched = testing::plain_schedule(c.D % 2 == 0 ? c.D : c.D - 1);
    p.rope = rope_apply_params(sched, c.layout);
    p.q_positions.offset = 5 + c.T - c.S;
    p.k_positions.offset = 5;
    p.mask.sliding_window = c.window;
    if (c.padded) {
      for (int j = 0; j < 20; ++j) setup.padding[static_cast<std::size_t>(c.T) + j] = 0;
      p.mask.key_padding = setup.padding.data();
    }
    Tensor4 q = make(DType::kBF16, B, c.S, c.Hq, c.D, false, &rng), k = make(DType::kBF16, B, c.T, c.Hk, c.D, true, &rng),
            v = make(DType::kBF16, B, c.T, c.Hk, c.D, false, &rng);
    AttentionOptions two;
    two.threads = 2;
    EXPECT_TRUE(attention_runs_bf16(q.view, k.view, v.view, p, two));
    const Outcome o = bf16_vs_reference(q, k, v, p, c.out, 2);
    EXPECT_EQ(o.empty_rows, c.padded && c.causal ? 20 * c.Hq : 0);
    // Not the reference's bits: the path rounds to bf16 (a test that would pass with the f32
    // kernel in its place checks nothing of the path).
    EXPECT_GT(o.worst_error, 1e-5);
    std::printf("bf16 attention, %s: %d elements, worst error %.3g, worst error / bound %.3f\n", c.name, o.elements, o.worst_error,
                o.worst_ratio);
  }
}

TEST(AttentionBf16, TakenOnlyForBf16InputsWithoutRemapAndWithATaskPerThread) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(1);
  const int S = attention_detail::kBf16QueryTile + 44;  // 2 query tiles
  Tensor4 q = make(DType::kBF16, 1, S, 2, 32, false, &rng), k = make(DType::kBF16, 1, S, 2, 32, false, &rng);
  Tensor4 k32 = make(DType::kF32, 1, S, 2, 32, false, &rng), k16 = make(DType::kF16, 1, S, 2, 32, false, &rng);
  AttentionParams p;
  AttentionOptions o;
  o.threads = 2;
  EXPECT_TRUE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  EXPECT_FALSE(attention_runs_bf16(q.view, k32.view, k.view, p, o));
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k16.view, p, o));
  o.bf16_dot_products = false;
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  o.bf16_dot_products = true;
  o.threads = 5;  // 2 heads x 2 query tiles: 4 tasks, the f32 kernel splits the keys
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  o.threads = 4;
  EXPECT_TRUE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  p.positions = AttentionPositions::kRope;
  p.remap.kind = PositionRemapKind::kReRope;
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k.view, p, o));
}

TEST(AttentionBf16, WithoutTheInstructionTheF32KernelRunsBitForBit) {
  // A CPU without AVX512-BF16 (forced): the same bits as bf16_dot_products = false, which is the
  // f32 kernel that attention_test.cc checks against the reference.
  std::mt19937 rng(2);
  const int B = 1, S = 100, T = 100, H = 4, D = 64;
  BiasInputs setup;
  AttentionParams p = params_for(AttentionPositions::kAlibi, setup, H, B, T, rng);
  Tensor4 q = make(DType::kBF16, B, S, H, D, false, &rng), k = make(DType::kBF16, B, T, H, D, false, &rng),
          v = make(DType::kBF16, B, T, H, D, false, &rng);
  expect_f32_bits_without_the_instruction(q, k, v, p, [&](const AttentionOptions& options) {
    EXPECT_FALSE(attention_runs_bf16(q.view, k.view, v.view, p, options));
  });
}

TEST(AttentionBf16, KeysPackedAheadOrPerTaskGiveTheSameBits) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(4);
  const int B = 2, S = 300, T = 300, Hq = 4, Hk = 2, D = 64;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (auto positions : {AttentionPositions::kAlibi, AttentionPositions::kRope}) {
    BiasInputs setup;
    AttentionParams p = params_for(positions, setup, Hq, B, T, rng);
    p.rope = rope_apply_params(sched);
    p.mask.sliding_window = 100;  // key ranges that start inside a tile
    Tensor4 q = make(DType::kBF16, B, S, Hq, D, false, &rng), k = make(DType::kBF16, B, T, Hk, D, true, &rng),
            v = make(DType::kBF16, B, T, Hk, D, false, &rng);
    Tensor4 ahead = make(DType::kF32, B, S, Hq, D, false, nullptr), per_task = make(DType::kF32, B, S, Hq, D, false, nullptr);
    AttentionOptions options;
    options.threads = 2;
    attention(q.view, k.view, v.view, ahead.view, p, options);
    attention_detail::set_bf16_pack_ahead_limit_for_test(0);
    attention(q.view, k.view, v.view, per_task.view, p, options);
    attention_detail::set_bf16_pack_ahead_limit_for_test(std::int64_t{256} << 20);
    EXPECT_EQ(ahead.bytes, per_task.bytes) << to_string(positions);
  }
}

TEST(AttentionBf16, ExtraBytesCoverItsTilesAndThePackedKeysAndValues) {
  std::mt19937 rng(3);
  for (int D : {1, 33, 64, 128, 256}) {
    Tensor4 q = make(DType::kBF16, 1, 10, 1, D, false, &rng);
    std::int64_t want = static_cast<std::int64_t>(sizeof(float)) * std::max<std::int64_t>(attention_detail::tile_floats(D, false), 0);
    if (attention_bf16_available())  // one tile of 64 keys, its channel pairs and its values in pairs of keys
      want = std::max<std::int64_t>(
          want, static_cast<std::int64_t>(sizeof(float) * attention_detail::bf16_tile_floats(D)) + 4 * ((D + 1) / 2 * 64 + 32 * ((D + 15) / 16 * 16)));
    EXPECT_EQ(attention_extra_bytes(q.view, q.view, AttentionParams{}, {1, nullptr}), want) << "D " << D;
  }
}

}  // namespace
}  // namespace posenc
