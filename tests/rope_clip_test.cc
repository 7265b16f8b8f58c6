// Clipped RoPE (Li et al. 2026, arXiv 2602.05258): the schedule option clip_low / clip_hard
// against a double reference, its identity at n = 0 and its refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

// The paper's soft taper of the k-th of the n lowest frequencies, in long double.
long double soft_taper(int k, int n) {
  const long double pi = 3.141592653589793238462643383279502884L;
  return 0.5L * (1 + std::cos(pi * k / (n - 1)));
}

// Default RoPE's 1/theta^(2i/d) in long double, clipped as the paper says, for the last n of F.
std::vector<long double> clipped_reference(int head_dim, double theta, int n, bool hard) {
  const int F = head_dim / 2;
  std::vector<long double> inv(static_cast<std::size_t>(F));
  for (int i = 0; i < F; ++i) inv[static_cast<std::size_t>(i)] = std::pow(static_cast<long double>(theta), -2.0L * i / head_dim);
  for (int k = 0; k < n; ++k) inv[static_cast<std::size_t>(F - n + k)] *= hard ? 0 : soft_taper(k, n);
  return inv;
}

RopeParams clipped(int head_dim, int n, bool hard) {
  RopeParams p;
  p.head_dim = head_dim;
  p.clip_low = n;
  p.clip_hard = hard;
  return p;
}

// Each frequency within half a float32 ulp of the double reference plus the reference's own
// rounding of 1/theta^(2i/d) (posenc rounds the unclipped value once, then once more after the
// taper): 2^-23 relative covers both roundings.
void expect_matches(const std::vector<float>& got, const std::vector<long double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (want[i] == 0) {
      EXPECT_EQ(got[i], 0.0f) << i;
    } else {
      EXPECT_NEAR(got[i] / want[i], 1.0L, 0x1p-23L) << i << ": " << got[i] << " vs " << static_cast<double>(want[i]);
    }
  }
}

TEST(ClippedRope, SoftClippingTapersTheLowestFrequenciesAsThePaper) {
  for (int n : {2, 3, 7, 32}) {
    SCOPED_TRACE(n);
    const RopeSchedule s = compute_schedule(clipped(64, n, false));
    expect_matches(s.inv_freq, clipped_reference(64, 10000.0, n, false));
    EXPECT_EQ(s.inv_freq[static_cast<std::size_t>(32 - n)], compute_schedule(clipped(64, 0, false)).inv_freq[32 - n])
        << "k = 0 keeps its frequency";
    EXPECT_EQ(s.rotated_dim, 64 - 2) << "the taper ends at 0: one pair stops rotating";
  }
}

TEST(ClippedRope, HardClippingZeroesTheLowestFrequencies) {
  for (int n : {1, 5, 32}) {
    SCOPED_TRACE(n);
    const RopeSchedule s = compute_schedule(clipped(64, n, true));
    expect_matches(s.inv_freq, clipped_reference(64, 10000.0, n, true));
    EXPECT_EQ(s.rotated_dim, 64 - 2 * n);
  }
}

TEST(ClippedRope, NoneClippedIsTheIdentity) {
  RopeParams plain;
  plain.head_dim = 64;
  for (bool hard : {false, true}) {
    const RopeSchedule s = compute_schedule(clipped(64, 0, hard)), base = compute_schedule(plain);
    expect_matches(s.inv_freq, clipped_reference(64, 10000.0, 0, hard));
    EXPECT_EQ(s.inv_freq, base.inv_freq);
    EXPECT_EQ(s.rotated_dim, base.rotated_dim);
  }
}

TEST(ClippedRope, ClipsTheScheduleOfAnyTypeAfterItsScaling) {
  // YaRN's frequencies, then the taper: the clipped schedule is the unclipped one times it.
  RopeParams yarn = clipped(128, 6, false);
  yarn.type = RopeType::kYarn;
  yarn.factor = 4;
  yarn.original_max_position_embeddings = 4096;
  const RopeSchedule s = compute_schedule(yarn);
  yarn.clip_low = 0;
  const RopeSchedule unclipped = compute_schedule(yarn);
  for (int i = 0; i < 64; ++i) {
    const long double taper = i < 58 ? 1.0L : i == 63 ? 0.0L : soft_taper(i - 58, 6);
    EXPECT_NEAR(s.inv_freq[static_cast<std::size_t>(i)], unclipped.inv_freq[static_cast<std::size_t>(i)] * taper,
                unclipped.inv_freq[static_cast<std::size_t>(i)] * 0x1p-24)
        << i;
  }
  EXPECT_EQ(s.base_inv_freq, unclipped.base_inv_freq) << "the unscaled column stays unclipped";
  EXPECT_EQ(s.attention_factor, unclipped.attention_factor);
}

TEST(ClippedRope, ProportionalClipsItsRotatedFrequenciesNotItsZeroTail) {
  RopeParams p = clipped(64, 2, true);
  p.type = RopeType::kProportional;
  p.partial_rotary_factor = 0.25;  // 8 rotated frequencies, 24 zeros
  const RopeSchedule s = compute_schedule(p);
  ASSERT_EQ(s.inv_freq.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(s.inv_freq[static_cast<std::size_t>(i)] == 0, i >= 6) << i;
  EXPECT_EQ(s.rotated_dim, 12);
}

void expect_refused(const RopeParams& p, const std::string& says) {
  try {
    compute_schedule(p);
    ADD_FAILURE() << "clip_low " << p.clip_low << " accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(ClippedRope, RefusesMoreThanTheRotatedFrequenciesAndOneSoftFrequency) {
  expect_refused(clipped(64, 33, false), "clip_low must be in [0, 32] (the rotated frequencies), got 33");
  expect_refused(clipped(64, -1, true), "got -1");
  RopeParams partial = clipped(64, 9, true);
  partial.partial_rotary_factor = 0.25;
  expect_refused(partial, "clip_low must be in [0, 8]");
  expect_refused(clipped(64, 1, false), "clip_low 1 with soft clipping");
}

}  // namespace
}  // namespace posenc
