// The mathematics each schedule claims, independent of the golden file.
#include <gtest/gtest.h>

#include <cmath>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

RopeParams make(RopeType type, int head_dim, double theta = 10000.0) {
  RopeParams p;
  p.type = type;
  p.head_dim = head_dim;
  p.theta = theta;
  return p;
}

std::vector<float> default_freqs(int head_dim, double theta = 10000.0) {
  return compute_schedule(make(RopeType::kDefault, head_dim, theta)).inv_freq;
}

TEST(ScheduleProperties, DefaultIsTheGeometricProgression) {
  const auto inv = default_freqs(128);
  ASSERT_EQ(inv.size(), 64u);
  EXPECT_EQ(inv[0], 1.0f);
  for (std::size_t i = 1; i < inv.size(); ++i)
    EXPECT_NEAR(inv[i] / inv[i - 1], std::pow(10000.0, -2.0 / 128), 3e-7) << i;
}

TEST(ScheduleProperties, LinearDividesEveryFrequency) {
  auto p = make(RopeType::kLinear, 64);
  p.factor = 4;
  const auto inv = compute_schedule(p).inv_freq, base = default_freqs(64);
  for (std::size_t i = 0; i < inv.size(); ++i) EXPECT_FLOAT_EQ(inv[i], base[i] / 4) << i;
}

TEST(ScheduleProperties, NtkKeepsTheHighestAndDividesTheLowestByFactor) {
  // base' = theta * s^(d/(d-2)) makes the last frequency exactly 1/s of the original.
  auto p = make(RopeType::kNtk, 128);
  p.factor = 8;
  const RopeSchedule s = compute_schedule(p);
  const auto base = default_freqs(128);
  EXPECT_NEAR(s.base, 10000.0 * std::pow(8.0, 128.0 / 126.0), 1e-6);
  EXPECT_EQ(s.inv_freq.front(), 1.0f);
  EXPECT_NEAR(s.inv_freq.back() / base.back(), 1.0 / 8, 1e-6);
  EXPECT_EQ(s.attention_factor, 1.0);
}

TEST(ScheduleProperties, DynamicIsDefaultUpToItsReferenceLength) {
  auto p = make(RopeType::kDynamic, 64);
  p.factor = 2;
  p.max_position_embeddings = 2048;
  EXPECT_EQ(compute_schedule(p).inv_freq, default_freqs(64));
  EXPECT_EQ(compute_schedule(p, 2048).inv_freq, default_freqs(64));
  EXPECT_EQ(compute_schedule(p, 100).inv_freq, default_freqs(64)) << "L = max(seq_len, max_pos)";
  const RopeSchedule at4k = compute_schedule(p, 4096);
  EXPECT_NEAR(at4k.base, 10000.0 * std::pow(2.0 * 4096 / 2048 - 1, 64.0 / 62.0), 1e-6);
  EXPECT_LT(at4k.inv_freq.back(), default_freqs(64).back());
}

TEST(ScheduleProperties, YarnRampKeepsHighFrequenciesAndInterpolatesLowOnes) {
  auto p = make(RopeType::kYarn, 128, 1e6);
  p.factor = 4;
  p.original_max_position_embeddings = 32768;
  const RopeSchedule s = compute_schedule(p);
  const auto base = default_freqs(128, 1e6);
  const auto [low, high] = *s.correction_range;
  double previous_scale = 1;
  for (std::size_t i = 0; i < s.inv_freq.size(); ++i) {
    const double scale = base[i] / s.inv_freq[i];
    if (i <= low) {
      EXPECT_NEAR(scale, 1.0, 1e-6) << i;
    }
    if (i >= high) {
      EXPECT_NEAR(scale, 4.0, 1e-5) << i;
    }
    EXPECT_GE(scale, previous_scale - 1e-6) << "the interpolation share only grows with i";
    previous_scale = scale;
  }
  EXPECT_NEAR(s.attention_factor, 0.1 * std::log(4.0) + 1, 1e-15);
}

TEST(ScheduleProperties, YarnAttentionFactorRules) {
  auto p = make(RopeType::kYarn, 64);
  p.factor = 40;
  p.original_max_position_embeddings = 4096;
  const double plain = 0.1 * std::log(40.0) + 1;
  p.mscale = 0.707;  // alone: ignored, as HF
  EXPECT_NEAR(compute_schedule(p).attention_factor, plain, 1e-15);
  p.mscale_all_dim = 0.5;  // both: the ratio m(s, mscale) / m(s, mscale_all_dim)
  EXPECT_NEAR(compute_schedule(p).attention_factor,
              (0.0707 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1), 1e-15);
  p.attention_factor = 1.25;  // explicit wins
  EXPECT_EQ(compute_schedule(p).attention_factor, 1.25);
}

TEST(ScheduleProperties, YarnFactorDerivedWhenNull) {
  auto p = make(RopeType::kYarn, 64);
  p.max_position_embeddings = 16384;
  p.original_max_position_embeddings = 4096;
  EXPECT_EQ(resolved_factor(p), 4.0);
  EXPECT_NEAR(compute_schedule(p).attention_factor, 0.1 * std::log(4.0) + 1, 1e-15);
}

TEST(ScheduleProperties, NtkByPartsIsTheYarnRampWithoutTemperature) {
  auto p = make(RopeType::kYarn, 64);
  p.factor = 16;
  p.original_max_position_embeddings = 2048;
  auto q = p;
  q.type = RopeType::kNtkByParts;
  EXPECT_EQ(compute_schedule(q).inv_freq, compute_schedule(p).inv_freq);
  EXPECT_EQ(compute_schedule(q).attention_factor, 1.0);
  EXPECT_GT(compute_schedule(p).attention_factor, 1.0);
}

TEST(ScheduleProperties, YarnTruncateFalseKeepsFractionalRange) {
  auto p = make(RopeType::kYarn, 64, 150000);
  p.factor = 32;
  p.original_max_position_embeddings = 4096;
  p.truncate = false;
  const auto r = *compute_schedule(p).correction_range;
  EXPECT_NE(r[0], std::floor(r[0]));
  p.truncate = true;
  const auto t = *compute_schedule(p).correction_range;
  EXPECT_EQ(t[0], std::floor(r[0]));
  EXPECT_EQ(t[1], std::ceil(r[1]));
}

TEST(ScheduleProperties, Llama3BandsOfLlama31) {
  // hf-reference.md: indices 0..28 unchanged, 29..34 smoothed with these ratios, 35..63 / 8.
  auto p = make(RopeType::kLlama3, 128, 500000);
  p.factor = 8;
  p.low_freq_factor = 1;
  p.high_freq_factor = 4;
  p.original_max_position_embeddings = 8192;
  const auto inv = compute_schedule(p).inv_freq;
  const auto base = default_freqs(128, 500000);
  const double smoothed[] = {1.2075, 1.5534, 2.0263, 2.6945, 3.6843, 5.2573};
  for (int i = 0; i < 64; ++i) {
    const double ratio = base[i] / inv[i];
    const double expected = i <= 28 ? 1.0 : i <= 34 ? smoothed[i - 29] : 8.0;
    EXPECT_NEAR(ratio, expected, 5e-5) << i;
  }
}

TEST(ScheduleProperties, LongRopeAttentionFactorAndFactorSets) {
  auto p = make(RopeType::kLongRope, 8);
  p.max_position_embeddings = 131072;
  p.original_max_position_embeddings = 4096;
  p.short_factor = {1, 1, 2, 2};
  p.long_factor = {1, 4, 8, 16};
  const RopeSchedule s = compute_schedule(p);
  EXPECT_NEAR(s.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-15);
  EXPECT_FALSE(s.uses_long_factors);
  const auto base = default_freqs(8);
  EXPECT_FLOAT_EQ(s.inv_freq[2], base[2] / 2);
  const RopeSchedule l = compute_schedule(p, 4097);
  EXPECT_TRUE(l.uses_long_factors);
  EXPECT_FLOAT_EQ(l.inv_freq[3], base[3] / 16);
  p.factor = 1;  // factor <= 1: no temperature
  EXPECT_EQ(compute_schedule(p).attention_factor, 1.0);
}

TEST(ScheduleProperties, ProportionalSpansHeadDimWithZeroTail) {
  auto p = make(RopeType::kProportional, 256, 1e6);
  p.partial_rotary_factor = 0.25;
  const RopeSchedule s = compute_schedule(p);
  EXPECT_EQ(s.rotary_dim, 256);
  EXPECT_EQ(s.rotated_dim, 64);
  for (int i = 32; i < 128; ++i) EXPECT_EQ(s.inv_freq[i], 0.0f) << i;
  // The exponent runs over head_dim: pair 1 has 1e6^(-2/256), not 1e6^(-2/64).
  EXPECT_NEAR(s.inv_freq[1], std::pow(1e6, -2.0 / 256), 1e-7);
}

TEST(ScheduleProperties, PartialRotaryTruncatesLikeHf) {
  auto p = make(RopeType::kDefault, 96);
  p.partial_rotary_factor = 0.4;  // 38.4 -> 38
  const RopeSchedule s = compute_schedule(p);
  EXPECT_EQ(s.rotary_dim, 38);
  EXPECT_EQ(s.inv_freq.size(), 19u);
  EXPECT_NEAR(s.inv_freq[1], std::pow(10000.0, -2.0 / 38), 1e-7);
}

TEST(ScheduleProperties, HfFloat32AndDoubleAgreeToFloatPrecision) {
  for (RopeType t : {RopeType::kDefault, RopeType::kLinear, RopeType::kNtk, RopeType::kYarn,
                     RopeType::kLlama3, RopeType::kProportional}) {
    auto p = make(t, 128, 500000);
    p.factor = 8;
    p.low_freq_factor = 1;
    p.high_freq_factor = 4;
    p.original_max_position_embeddings = 8192;
    p.partial_rotary_factor = t == RopeType::kProportional ? 0.5 : 1.0;
    const auto a = compute_schedule(p, std::nullopt, Numerics::kAccurate).inv_freq;
    const auto b = compute_schedule(p, std::nullopt, Numerics::kHfFloat32).inv_freq;
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 5e-7 * a[i]) << to_string(t) << " " << i;
  }
}

TEST(ScheduleProperties, SeqLenOutOfRangeIsAnError) {
  const auto p = make(RopeType::kDefault, 64);
  EXPECT_THROW(compute_schedule(p, 0), Error);
  // Positions reach 2^31-1, so a sequence may be 2^31 long (issue 33, F11), not longer.
  EXPECT_THROW(compute_schedule(p, (std::int64_t{1} << 31) + 1), Error);
  EXPECT_NO_THROW(compute_schedule(p, std::int64_t{1} << 31));
}

}  // namespace
}  // namespace posenc
