// Decode attention (S = 1: core/src/attention_decode.h), which attention() takes for one query
// per sequence: against attention_reference on every Highway target, for every position scheme
// (none, RoPE, ALiBi, T5, a distance table, FoX's gate), every mask, f32/bf16/f16 K and V, GQA
// groups that fill the 4-row blocks and groups that do not, T = 1 and T not a multiple of the
// key tile, and thread counts that split the keys (and leave some splits empty); each row's
// log-sum-exp too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope_schedule.h"

#include "attention_backward_support.h"
#include "attention_plan.h"
#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

// The reference's tolerance in the other attention tests (attention_test.cc).
constexpr double kTolerance = 2e-5;

constexpr AttentionPositions kEveryPosition[] = {AttentionPositions::kNone,  AttentionPositions::kRope,
                                                 AttentionPositions::kAlibi, AttentionPositions::kT5,
                                                 AttentionPositions::kDistanceTable, AttentionPositions::kForgetGate};

// Parameters for one decode case: params_for_case's masks and positions, plus a random signed
// distance table (every |Delta| <= T - 1 with its offsets) or FoX's c (decreasing, as FoX's
// log-sigmoid gates make it). values: the table's or c's storage.
AttentionParams decode_params(AttentionPositions positions, MaskCase mask, BiasInputs& setup, std::vector<float>& values,
                              const RopeSchedule& sched, int Hq, int B, int T, std::mt19937& rng) {
  AttentionParams p = params_for_case(positions, mask, setup, sched, Hq, B, 1, T, rng);
  if (positions == AttentionPositions::kDistanceTable) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    values.resize(static_cast<std::size_t>(Hq) * (2 * T - 1));
    for (float& x : values) x = normal(rng);
    p.distance_table = {values.data(), T, DistanceSide::kSigned};
  }
  if (positions == AttentionPositions::kForgetGate) {
    std::uniform_real_distribution<float> gate(-0.3f, 0.0f);
    values.resize(static_cast<std::size_t>(B) * Hq * T);
    for (std::size_t row = 0; row < values.size() / T; ++row) {
      double c = 0;
      for (int t = 0; t < T; ++t) values[row * T + t] = static_cast<float>(c += gate(rng));
    }
    p.gate_cumulative = values.data();
    // FoX reads the query's own c at key index past: a past beyond the cache (kPast at T = 1) is
    // refused, so the query sits on the last key instead.
    if (p.mask.past >= T) p.mask.past = T - 1;
  }
  return p;
}

TEST(AttentionDecode, EveryTargetSchemeMaskAndDtypeEqualsTheReference) {
  std::mt19937 rng(11);
  const int B = 2, D = 40;  // 40: whole vectors and a scalar tail on every target
  const RopeSchedule sched = testing::plain_schedule(D);
  // (query heads, kv heads): one head per group, a group of 4 (one register block), a group of 6
  // (a block and two single rows).
  const std::pair<int, int> kHeads[] = {{4, 4}, {8, 2}, {6, 1}};
  int cases = 0;
  const std::size_t targets = on_every_target([&] {
    for (int T : {1, 65, 1237})  // one key; one key past a tile; 19 tiles and a partial one
      for (AttentionPositions positions : kEveryPosition)
        for (MaskCase mask : kMasks)
          for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
            const auto [Hq, Hk] = kHeads[cases / 3 % 3];  // every shape meets every dtype (across the masks)
            SCOPED_TRACE("T " + std::to_string(T) + " " + to_string(positions) + " " + name(mask) + " " + to_string(dtype) + " Hq " +
                         std::to_string(Hq) + " Hk " + std::to_string(Hk));
            BiasInputs setup;
            std::vector<float> values;
            const AttentionParams p = decode_params(positions, mask, setup, values, sched, Hq, B, T, rng);
            Tensor4 q = make(dtype, B, 1, Hq, D, false, &rng), k = make(dtype, B, T, Hk, D, cases % 2, &rng),
                    v = make(dtype, B, T, Hk, D, cases % 3 == 0, &rng);
            EXPECT_LE(tiled_vs_reference(q, k, v, p, 3, cases % 2 == 1), kTolerance);
            ++cases;
          }
  });
  EXPECT_EQ(cases, static_cast<int>(targets) * 3 * 6 * 6 * 3);
  std::printf("attention decode: %d cases on %zu targets match the reference\n", cases, targets);
}

TEST(AttentionDecode, GroupsHeadDimsAndSplitsOfEveryShape) {
  // GQA from one group of 8 to MQA, head dims below, at and above a vector multiple, key counts
  // around the 64-key tile, and thread counts from 1 to more than the work items (some splits
  // empty under a sliding window). ALiBi causal and RoPE, bf16 K/V, token-major. Groups of 1, 2
  // and 3 (blocks of 4 query heads over 4, 2 and mixed kv heads) read a token-major K key by key;
  // groups of 4 and more, one kv head, or fewer than 4 query heads, four keys per kv head.
  std::mt19937 rng(12);
  const std::pair<int, int> kHeads[] = {{8, 8}, {8, 4}, {6, 2}, {8, 2}, {8, 1}, {5, 1}, {3, 3}};
  int cases = 0;
  for (int D : {8, 64, 130})
    for (const auto& [Hq, Hk] : kHeads)
      for (int T : {1, 2, 63, 64, 65, 1000, 4099})
        for (int threads : {1, 2, 5, 16})
          for (AttentionPositions positions : {AttentionPositions::kAlibi, AttentionPositions::kRope}) {
            SCOPED_TRACE("D " + std::to_string(D) + " Hq " + std::to_string(Hq) + " Hk " + std::to_string(Hk) + " T " + std::to_string(T) +
                         " threads " + std::to_string(threads) + " " + to_string(positions));
            const RopeSchedule sched = testing::plain_schedule(D);
            BiasInputs setup;
            std::vector<float> values;
            const MaskCase mask = cases % 4 == 3 ? MaskCase::kSlidingWindow : MaskCase::kCausal;
            const AttentionParams p = decode_params(positions, mask, setup, values, sched, Hq, 1, T, rng);
            Tensor4 q = make(DType::kF32, 1, 1, Hq, D, false, &rng), k = make(DType::kBF16, 1, T, Hk, D, false, &rng),
                    v = make(DType::kBF16, 1, T, Hk, D, true, &rng);
            EXPECT_LE(tiled_vs_reference(q, k, v, p, threads), kTolerance);
            ++cases;
          }
  EXPECT_EQ(cases, 3 * 7 * 7 * 4 * 2);
}

TEST(AttentionDecode, SplitsPastTheLastKeyAreEmptyAndTheRestMerge) {
  // 81 key tiles on 3 threads: 10 splits of 9 tiles, so the last split starts at tile 81, past the
  // last key (T 5121: its first key beyond the cache; T 5184: exactly at its end). Its work item
  // has no key: the pipelined loop must end at once, and the merge must skip it. By head (8 over 2)
  // and by key (8 over 8).
  std::mt19937 rng(16);
  int cases = 0;
  for (const auto& [Hq, Hk] : {std::pair<int, int>{8, 2}, {8, 8}})
    for (int T : {5121, 5184})
      for (int threads : {3, 16})
        for (DType dtype : {DType::kF32, DType::kBF16}) {
          SCOPED_TRACE("Hq " + std::to_string(Hq) + " Hk " + std::to_string(Hk) + " T " + std::to_string(T) + " threads " +
                       std::to_string(threads) + " " + to_string(dtype));
          const int D = 16;
          const RopeSchedule sched = testing::plain_schedule(D);
          BiasInputs setup;
          std::vector<float> values;
          const AttentionParams p = decode_params(AttentionPositions::kAlibi, MaskCase::kCausal, setup, values, sched, Hq, 1, T, rng);
          Tensor4 q = make(DType::kF32, 1, 1, Hq, D, false, &rng), k = make(dtype, 1, T, Hk, D, false, &rng),
                  v = make(dtype, 1, T, Hk, D, false, &rng);
          EXPECT_LE(tiled_vs_reference(q, k, v, p, threads), kTolerance);
          ++cases;
        }
  EXPECT_EQ(cases, 2 * 2 * 2 * 2);
}

TEST(AttentionDecode, MoreQueryHeadsThanAPrefillTileHasRows) {
  // Decode's softmax takes every query head as a row of one tile (SoftmaxTile), which handles
  // kPaddedRows rows at a time: 136 heads go in two passes.
  std::mt19937 rng(15);
  int cases = 0;
  for (const auto& [Hq, Hk] : {std::pair<int, int>{136, 8}, {136, 136}})
    for (int T : {65, 300})
      for (int threads : {1, 3})
        for (AttentionPositions positions : {AttentionPositions::kAlibi, AttentionPositions::kRope}) {
          SCOPED_TRACE("Hq " + std::to_string(Hq) + " Hk " + std::to_string(Hk) + " T " + std::to_string(T) + " threads " +
                       std::to_string(threads) + " " + to_string(positions));
          const int D = 16;
          const RopeSchedule sched = testing::plain_schedule(D);
          BiasInputs setup;
          std::vector<float> values;
          const AttentionParams p = decode_params(positions, MaskCase::kCausal, setup, values, sched, Hq, 1, T, rng);
          Tensor4 q = make(DType::kF32, 1, 1, Hq, D, false, &rng), k = make(DType::kF32, 1, T, Hk, D, false, &rng),
                  v = make(DType::kF32, 1, T, Hk, D, false, &rng);
          EXPECT_LE(tiled_vs_reference(q, k, v, p, threads), kTolerance);
          ++cases;
        }
  EXPECT_EQ(cases, 2 * 2 * 2 * 2);
  static_assert(136 > attention_detail::kPaddedRows, "two passes");
}

TEST(AttentionDecode, AQueryOfNaNGivesZerosWhateverItsKeyCount) {
  // A NaN score weighs 0 and so does a NaN correction (SoftmaxWeight): one key tile or several,
  // decode or a prefill row, the same zeros (a review found NaN from the second tile on, where the
  // correction was exp of a NaN difference).
  std::mt19937 rng(16);
  const int H = 2, D = 16;
  for (int T : {64, 65, 200})
    for (int S : {1, T}) {
      SCOPED_TRACE("T " + std::to_string(T) + " S " + std::to_string(S));
      Tensor4 q = make(DType::kF32, 1, S, H, D, false, &rng), k = make(DType::kF32, 1, T, H, D, false, &rng),
              v = make(DType::kF32, 1, T, H, D, false, &rng), out = make(DType::kF32, 1, S, H, D, false, nullptr);
      const int row = S - 1;  // the last query sees every key
      for (int c = 0; c < D; ++c) static_cast<float*>(q.view.data)[q.view.token_stride * row + c] = std::nanf("");
      AttentionOptions options;
      options.threads = 1;
      attention(q.view, k.view, v.view, out.view, AttentionParams{}, options);
      for (int c = 0; c < D; ++c) {
        ASSERT_EQ(at(out.view, 0, row, 0, c), 0.0f) << "channel " << c;
        ASSERT_TRUE(std::isfinite(at(out.view, 0, row, 1, c))) << "the other head, channel " << c;
      }
    }
}

TEST(AttentionDecode, KeysAndValuesOfDifferentDtypes) {
  // K and V are read each in its own dtype (a review found V read as K's: f32 keys over bf16 values
  // read past the end of V). Groups read key by key and by head, RoPE and ALiBi, split keys.
  std::mt19937 rng(14);
  const DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
  int cases = 0;
  for (DType kd : kDtypes)
    for (DType vd : kDtypes)
      for (const auto& [Hq, Hk] : {std::pair<int, int>{8, 8}, {8, 4}, {6, 2}, {8, 2}})  // by key (groups of 1, 2, 3), by head
        for (AttentionPositions positions : {AttentionPositions::kAlibi, AttentionPositions::kRope}) {
          if (kd == vd) continue;
          SCOPED_TRACE(std::string(to_string(kd)) + " keys, " + to_string(vd) + " values, Hq " + std::to_string(Hq) + " Hk " + std::to_string(Hk) + " " +
                       to_string(positions));
          const int D = 40, T = 1237;
          const RopeSchedule sched = testing::plain_schedule(D);
          BiasInputs setup;
          std::vector<float> values;
          const AttentionParams p = decode_params(positions, MaskCase::kCausal, setup, values, sched, Hq, 1, T, rng);
          Tensor4 q = make(DType::kF32, 1, 1, Hq, D, false, &rng), k = make(kd, 1, T, Hk, D, false, &rng), v = make(vd, 1, T, Hk, D, false, &rng);
          EXPECT_LE(tiled_vs_reference(q, k, v, p, 2), kTolerance);
          ++cases;
        }
  EXPECT_EQ(cases, 6 * 4 * 2);
}

TEST(AttentionDecode, CommonHeadWidthsTakeTheirOwnKernels) {
  // D = 64 and 128 with K and V of one dtype compile the products with D a constant (AVX2 and
  // wider: DecodeKeysOfWidth), on every target: by key (groups of 1, 2 and 3; 12 over 4 crosses a
  // block of 4 query heads mid-group), by head (4, 6), RoPE (rotated rows) and ALiBi, 20 key tiles
  // and a partial one, on one thread and split across two.
  std::mt19937 rng(15);
  const std::pair<int, int> kHeads[] = {{8, 8}, {8, 4}, {12, 4}, {8, 2}, {6, 1}};
  int cases = 0;
  const std::size_t targets = on_every_target([&] {
    for (int D : {64, 128})
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (const auto& [Hq, Hk] : kHeads)
          for (AttentionPositions positions : {AttentionPositions::kAlibi, AttentionPositions::kRope}) {
            const int threads = 1 + (cases / 10) % 2;  // each shape on both counts across the dtypes
            SCOPED_TRACE("D " + std::to_string(D) + " " + to_string(dtype) + " Hq " + std::to_string(Hq) + " Hk " + std::to_string(Hk) +
                         " " + to_string(positions) + " threads " + std::to_string(threads));
            const int T = 1237;
            const RopeSchedule sched = testing::plain_schedule(D);
            BiasInputs setup;
            std::vector<float> values;
            const AttentionParams p = decode_params(positions, MaskCase::kCausal, setup, values, sched, Hq, 1, T, rng);
            Tensor4 q = make(DType::kF32, 1, 1, Hq, D, false, &rng), k = make(dtype, 1, T, Hk, D, false, &rng),
                    v = make(dtype, 1, T, Hk, D, false, &rng);
            EXPECT_LE(tiled_vs_reference(q, k, v, p, threads), kTolerance);
            ++cases;
          }
  });
  EXPECT_EQ(cases, static_cast<int>(targets) * 2 * 3 * 5 * 2);
}

TEST(AttentionDecode, ExtraBytesCountTheWorkspaceAndThePartials) {
  // attention_extra_bytes reports the decode path's buffers: per-thread workspace, and the
  // partial softmaxes when the keys are split (more threads: more bytes).
  std::mt19937 rng(13);
  const int T = 32768, Hq = 8, Hk = 2, D = 64;
  Tensor4 q = make(DType::kF32, 1, 1, Hq, D, false, nullptr), k = make(DType::kBF16, 1, T, Hk, D, false, nullptr);
  AttentionParams p;
  KernelOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const std::int64_t single = attention_extra_bytes(q.view, k.view, p, one), split = attention_extra_bytes(q.view, k.view, p, two);
  // One thread: Q and accumulators (2 x 8 x 64), Q as bf16 pairs (8 x 32 words), two score tiles
  // 8 x 64 (one tile's scores while the last one's weights are summed), max, sum, four key rows
  // and a scratch row (no copy of the values: they are read in place).
  EXPECT_EQ(single, static_cast<std::int64_t>((2 * 8 * 64 + 8 * 32 + 2 * 8 * 64 + 2 * 8 + 5 * 64) * sizeof(float)));
  // Two threads: twice that, plus 8 splits (4 items per thread) x 8 heads x (64 + 2) floats.
  EXPECT_EQ(split, 2 * single + static_cast<std::int64_t>(8 * 8 * 66 * sizeof(float)));
}

}  // namespace
}  // namespace posenc
