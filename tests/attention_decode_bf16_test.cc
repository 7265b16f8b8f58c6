// Decode attention (S = 1) on the CPU's bf16 dot products (attention_decode.h, DecodeBf16): each
// output element against attention_reference (double) on the same inputs, within the bf16
// prefill's bound (posenc/attention_bf16.h; attention_bf16_bound.h computes it from the
// reference's scores and weights). The bound holds for decode's products: q rounded to bf16 once
// (u a_j per score, as the prefill rounds its query tile), K's bf16 pairs exact, f32 sums of at
// most D + 1 terms per score; each weight P rounded to bf16 (relative u) over the f32 sum of the
// unrounded weights, which moves an output by at most u sum_j pi_j |v_jc|, inside the bound's
// (1 + u) / (1 - u). Also: which products a call takes, and the f32 path bit for bit without the
// instruction or the option.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "attention_backward_support.h"
#include "attention_bf16_bound.h"
#include "attention_decode.h"
#include "attention_test_support.h"
#include "posenc/attention.h"
#include "posenc/attention_bf16.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

// The products decode takes for these operands with the option on.
attention_detail::DecodeBf16 products(const Tensor4& k, const Tensor4& v, const AttentionParams& p) {
  return attention_detail::decode_bf16_products(k.view, v.view, p, AttentionOptions{});
}

// One decode step (batch 2, S = 1) within the bound; over more than one key the rounding is
// visible (a test that passes with the f32 path in its place checks nothing of the bf16 one; one
// key's weight is exactly 1, so its output is v exactly).
// Returns the largest error / bound.
double expect_within_bound(const Tensor4& q, const Tensor4& k, const Tensor4& v, const AttentionParams& p, int threads) {
  const Outcome o = bf16_vs_reference(q, k, v, p, DType::kF32, threads);
  if (k.view.tokens > 1) {
    EXPECT_GT(o.worst_error, 1e-5);
  }
  return o.worst_ratio;
}

TEST(AttentionDecodeBf16, EveryGroupTailAndHeadDimWithinTheBf16Bound) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16 (the fallback test covers it)";
  // Groups of 1, 2, 4 and 8 (the key-by-key scores, the four-key blocks, several blocks), 3 and 5
  // (blocks and single rows); 6 over 6 (groups of 1: the values of four kv heads together, then
  // two kv heads alone); T from one key to 19 tiles and 21 keys (odd, and not a multiple of
  // the four-key blocks), T < a tile; D 64 (whole vectors), 40 (a half vector of scores, a partial
  // block of values), 33 (odd: the last channel pair half padding). Token- and head-major K and
  // V, 1 and 2 threads (1237 keys on 2 threads: split and merged).
  std::mt19937 rng(29);
  const std::pair<int, int> kHeads[] = {{8, 8}, {8, 4}, {8, 2}, {8, 1}, {6, 2}, {5, 1}, {6, 6}};
  const AttentionPositions kPositions[] = {AttentionPositions::kAlibi, AttentionPositions::kNone, AttentionPositions::kT5};
  const MaskCase kDecodeMasks[] = {MaskCase::kCausal, MaskCase::kSlidingWindow, MaskCase::kPadding};
  int cases = 0;
  double worst = 0;
  for (const auto& [Hq, Hk] : kHeads)
    for (int T : {1, 3, 63, 65, 1237})
      for (int D : {64, 40, 33}) {
        const AttentionPositions positions = kPositions[cases % 3];
        const MaskCase mask = kDecodeMasks[cases / 3 % 3];
        const int threads = 1 + cases % 2;
        SCOPED_TRACE("Hq " + std::to_string(Hq) + " Hk " + std::to_string(Hk) + " T " + std::to_string(T) + " D " + std::to_string(D) + " " +
                     to_string(positions) + " " + name(mask) + " threads " + std::to_string(threads));
        BiasInputs setup;
        const RopeSchedule sched = testing::plain_schedule(D - D % 2);  // unused: no RoPE here
        const AttentionParams p = params_for_case(positions, mask, setup, sched, Hq, 2, 1, T, rng);
        Tensor4 q = make(DType::kBF16, 2, 1, Hq, D, false, &rng), k = make(DType::kBF16, 2, T, Hk, D, cases % 4 == 1, &rng),
                v = make(DType::kBF16, 2, T, Hk, D, cases % 4 == 2, &rng);
        const attention_detail::DecodeBf16 taken = products(k, v, p);
        EXPECT_TRUE(taken.scores && taken.values);
        worst = std::max(worst, expect_within_bound(q, k, v, p, threads));
        ++cases;
      }
  EXPECT_EQ(cases, 7 * 5 * 3);
  std::printf("decode on bf16 dot products: %d cases within the bound, worst error / bound %.3f\n", cases, worst);
}

TEST(AttentionDecodeBf16, KeysAndValuesOfDifferentDtypesTakeTheProductsOfTheirOwn) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  // bf16 keys over f32/f16 values: bf16 scores, f32 P.V; f32/f16 keys over bf16 values: f32
  // scores (q not rounded), bf16 P.V. Each half alone must show its rounding within the bound.
  // Groups read key by key (8 over 8) and four keys per kv head (8 over 2); q f32.
  std::mt19937 rng(30);
  const std::pair<DType, DType> kPairs[] = {{DType::kBF16, DType::kF32}, {DType::kBF16, DType::kF16},
                                            {DType::kF32, DType::kBF16}, {DType::kF16, DType::kBF16}};
  int cases = 0;
  for (const auto& [kd, vd] : kPairs)
    for (const auto& [Hq, Hk] : {std::pair<int, int>{8, 8}, {8, 2}}) {
      SCOPED_TRACE(std::string(to_string(kd)) + " keys, " + to_string(vd) + " values, Hk " + std::to_string(Hk));
      const int D = 40, T = 1237;
      BiasInputs setup;
      const RopeSchedule sched = testing::plain_schedule(D);
      const AttentionParams p = params_for_case(AttentionPositions::kAlibi, MaskCase::kCausal, setup, sched, Hq, 2, 1, T, rng);
      Tensor4 q = make(DType::kF32, 2, 1, Hq, D, false, &rng), k = make(kd, 2, T, Hk, D, false, &rng), v = make(vd, 2, T, Hk, D, false, &rng);
      const attention_detail::DecodeBf16 taken = products(k, v, p);
      EXPECT_EQ(taken.scores, kd == DType::kBF16);
      EXPECT_EQ(taken.values, vd == DType::kBF16);
      expect_within_bound(q, k, v, p, 2);
      ++cases;
    }
  EXPECT_EQ(cases, 4 * 2);
}

TEST(AttentionDecodeBf16, RotatedKeysScoreInF32AndTheValuesTakeBf16) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  // RoPE rotates each key in f32 (Plan::load_key): those scores stay f32, the values still bf16.
  std::mt19937 rng(31);
  for (const auto& [Hq, Hk] : {std::pair<int, int>{8, 8}, {8, 2}}) {
    SCOPED_TRACE("Hk " + std::to_string(Hk));
    const int D = 64, T = 300;
    BiasInputs setup;
    const RopeSchedule sched = testing::plain_schedule(D);  // p.rope points into it
    const AttentionParams p = params_for_case(AttentionPositions::kRope, MaskCase::kCausal, setup, sched, Hq, 2, 1, T, rng);
    Tensor4 q = make(DType::kBF16, 2, 1, Hq, D, false, &rng), k = make(DType::kBF16, 2, T, Hk, D, false, &rng),
            v = make(DType::kBF16, 2, T, Hk, D, false, &rng);
    const attention_detail::DecodeBf16 taken = products(k, v, p);
    EXPECT_FALSE(taken.scores);
    EXPECT_TRUE(taken.values);
    expect_within_bound(q, k, v, p, 1);
  }
}

TEST(AttentionDecodeBf16, WithoutTheInstructionOrTheOptionTheF32PathRunsBitForBit) {
  // A CPU without AVX512-BF16 (forced) takes no bf16 products: the same bits as the option off,
  // which is the f32 path attention_decode_test.cc checks against the reference.
  std::mt19937 rng(32);
  const int B = 2, T = 1237, Hq = 8, Hk = 2, D = 64;
  BiasInputs setup;
  const RopeSchedule sched = testing::plain_schedule(D);
  const AttentionParams p = params_for_case(AttentionPositions::kAlibi, MaskCase::kCausal, setup, sched, Hq, B, 1, T, rng);
  Tensor4 q = make(DType::kBF16, B, 1, Hq, D, false, &rng), k = make(DType::kBF16, B, T, Hk, D, false, &rng),
          v = make(DType::kBF16, B, T, Hk, D, false, &rng);
  expect_f32_bits_without_the_instruction(q, k, v, p, [&](const AttentionOptions& options) {
    const attention_detail::DecodeBf16 forced = attention_detail::decode_bf16_products(k.view, v.view, p, options);
    EXPECT_FALSE(forced.scores || forced.values);
  });
  AttentionOptions off;
  off.bf16_dot_products = false;
  const attention_detail::DecodeBf16 option_off = attention_detail::decode_bf16_products(k.view, v.view, p, off);
  EXPECT_FALSE(option_off.scores || option_off.values);
}

}  // namespace
}  // namespace posenc
