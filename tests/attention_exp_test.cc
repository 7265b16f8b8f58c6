// The softmax's exp (ExpNonPositive, attention_softmax-inl.h) against double exp on every SIMD
// target this CPU runs: within one unit in the last place of exp rounded to float (so within about
// 1.5 of the exact value) over [ln FLT_MIN, 0].
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention_exp_test.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "attention_softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {

// The worst error in units in the last place of ExpNonPositive at `count` arguments x[i], each
// against exp(x) in double rounded to float; *at: the argument where it is worst; *target: the
// Highway target that ran.
double WorstExpUlps(const float* x, std::size_t count, float* at, std::int64_t* target) {
  *target = HWY_TARGET;
  const hn::ScalableTag<float> d;
  const std::size_t N = hn::Lanes(d);
  HWY_ALIGN float out[hn::MaxLanes(d)];
  double worst = 0;
  for (std::size_t i = 0; i + N <= count; i += N) {
    hn::Store(ExpNonPositive(d, hn::LoadU(d, x + i)), d, out);
    for (std::size_t lane = 0; lane < N; ++lane) {
      const float want = static_cast<float>(std::exp(static_cast<double>(x[i + lane])));
      const double ulp = std::nextafter(want, 2.0f * want) - want;
      const double error = std::abs(static_cast<double>(out[lane]) - want) / ulp;
      if (error > worst) worst = error, *at = x[i + lane];
    }
  }
  return worst;
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "attention_test_support.h"

namespace posenc {
HWY_EXPORT(WorstExpUlps);
namespace {

using attention_detail::kLeastNormalExponent;

float float_of(std::uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

TEST(AttentionExp, WithinOneUlpOfExpOverTheSoftmaxRangeOnEveryTarget) {
  // One float in 1024 of [-1, 0] (their bits step by 1024 from -0 to -1), a million uniform
  // draws over the whole range, its ends, and the points where n (the nearest integer to
  // x / ln 2) steps: the reduction's seams.
  std::vector<float> x;
  for (std::uint32_t bits = 0x80000000u; bits <= 0xbf800000u; bits += 1024) x.push_back(float_of(bits));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> any(kLeastNormalExponent, 0.0f);
  for (int i = 0; i < 1000000; ++i) x.push_back(any(rng));
  for (int n = 0; n <= 126; ++n) {
    const float seam = static_cast<float>(-(n + 0.5) * std::log(2.0));
    for (float v : {std::nextafter(seam, -1.0f), seam, std::nextafter(seam, 1.0f)})
      if (v >= kLeastNormalExponent) x.push_back(v);
  }
  for (float v : {0.0f, -0.0f, kLeastNormalExponent, -1e-30f, -1e-7f}) x.push_back(v);
  while (x.size() % 64) x.push_back(0.0f);
  const std::size_t targets = attention_test::on_every_target([&] {
    float at = 0;
    std::int64_t target = 0;
    const double worst = HWY_DYNAMIC_DISPATCH(WorstExpUlps)(x.data(), x.size(), &at, &target);
    EXPECT_LE(worst, 1.0) << "at x = " << at;
    std::printf("%s: worst %.2f ulp at x = %.9g\n", hwy::TargetName(target), worst, at);
  });
  EXPECT_GE(targets, 1u);
}

}  // namespace
}  // namespace posenc
#endif  // HWY_ONCE
