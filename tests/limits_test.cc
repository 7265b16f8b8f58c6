// Numerical limits and thread safety: every rope type at positions up to 2^31-1 in every dtype,
// the accurate-angle error against long double, extreme but valid parameters, and concurrent
// callers sharing one cos/sin table.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <cstring>
#include <thread>

#include "posenc/error.h"
#include "posenc/rope_kernels.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

std::vector<RopeParams> every_type(int head_dim, double theta, double factor) {
  std::vector<RopeParams> out;
  for (RopeType t : {RopeType::kDefault, RopeType::kLinear, RopeType::kNtk, RopeType::kDynamic, RopeType::kYarn,
                     RopeType::kNtkByParts, RopeType::kLlama3, RopeType::kLongRope, RopeType::kProportional}) {
    if ((t == RopeType::kNtk || t == RopeType::kDynamic) && head_dim <= 2) continue;
    RopeParams p;
    p.type = t;
    p.head_dim = head_dim;
    p.theta = theta;
    p.factor = factor;
    p.max_position_embeddings = 4096;
    p.original_max_position_embeddings = 4096;
    p.low_freq_factor = 1;
    p.high_freq_factor = 4;
    if (t == RopeType::kLongRope) {
      p.short_factor.assign(static_cast<std::size_t>(head_dim / 2), 1.0);
      p.long_factor.assign(static_cast<std::size_t>(head_dim / 2), factor);
    }
    if (t == RopeType::kProportional) p.partial_rotary_factor = head_dim > 2 ? 0.5 : 1.0;  // 0.5 of 2 rotates nothing
    out.push_back(p);
  }
  return out;
}

TEST(Limits, FiniteCosSinAndOutputsAtEveryPositionTypeAndDtype) {
  const std::vector<std::int64_t> positions = {0, 1, 4095, 4096, 1 << 24, (std::int64_t{1} << 31) - 1};
  int cases = 0;
  for (int head_dim : {2, 128, 1024})
    for (double theta : {10000.0, 1e9})
      for (double factor : {1.0, 8.0, 1000.0})
        for (const RopeParams& p : every_type(head_dim, theta, factor)) {
          SCOPED_TRACE(std::string(to_string(p.type)) + " head_dim " + std::to_string(head_dim) + " theta " + format_number(theta) +
                       " factor " + format_number(factor));
          const RopeSchedule s = compute_schedule(p, (std::int64_t{1} << 31) - 1);
          for (float f : s.inv_freq) ASSERT_TRUE(std::isfinite(f) && f >= 0);
          for (Numerics mode : {Numerics::kAccurate, Numerics::kHfFloat32}) {
            RopeApplyParams ap = rope_apply_params(s);
            ap.angles = mode;
            for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
              std::vector<std::uint8_t> x(positions.size() * static_cast<std::size_t>(s.rotary_dim) * dtype_size(dtype));
              for (std::size_t i = 0; i + 1 < x.size(); i += 2) x[i + 1] = 0x3c;  // ~1.0 in every dtype
              rope_rotate(bshd(x.data(), dtype, {1, static_cast<int>(positions.size()), 1, s.rotary_dim}), nullptr,
                          {positions.data(), 1, 0}, ap);
              for (std::size_t i = 0; i < positions.size() * static_cast<std::size_t>(s.rotary_dim); ++i) {
                float v;
                if (dtype == DType::kF32) std::memcpy(&v, &x[4 * i], 4);
                else v = dtype == DType::kBF16 ? bf16_to_float(static_cast<std::uint16_t>(x[2 * i] | x[2 * i + 1] << 8))
                                               : f16_to_float(static_cast<std::uint16_t>(x[2 * i] | x[2 * i + 1] << 8));
                ASSERT_TRUE(std::isfinite(v)) << i;
              }
            }
          }
          ++cases;
        }
  EXPECT_GT(cases, 100);
}

TEST(Limits, AccurateAngleErrorAgainstLongDouble) {
  // Documented bound: |cos, sin error| <= 1e-6 up to 2^24 (measured ~6e-8: the float32 rounding
  // of the result); beyond, the double product p * w adds up to p * w * 2^-53 (< 3e-7 at 2^31).
  const RopeSchedule s = testing::plain_schedule(128);
  const RopeApplyParams ap = rope_apply_params(s);
  std::mt19937_64 rng(9);
  double worst_small = 0, worst_large = 0;
  for (int k = 0; k < 4000; ++k) {
    const std::int64_t pos = k < 2000 ? std::uniform_int_distribution<std::int64_t>(0, 1 << 24)(rng)
                                      : std::uniform_int_distribution<std::int64_t>(1 << 24, (std::int64_t{1} << 31) - 1)(rng);
    for (int j = 0; j < 64; j += 7) {
      const long double angle = static_cast<long double>(pos) * static_cast<long double>(s.inv_freq[static_cast<std::size_t>(j)]);
      float c, sn;
      rope_cos_sin(s.inv_freq[static_cast<std::size_t>(j)], pos, ap, &c, &sn);
      const double err = std::max(std::fabs(c - static_cast<double>(cosl(angle))), std::fabs(sn - static_cast<double>(sinl(angle))));
      (k < 2000 ? worst_small : worst_large) = std::max(k < 2000 ? worst_small : worst_large, err);
    }
  }
  EXPECT_LE(worst_small, 1e-6);
  EXPECT_LE(worst_large, 1e-6);
  std::printf("accurate angles: max error %.2g up to 2^24, %.2g up to 2^31-1\n", worst_small, worst_large);
}

TEST(ThreadSafety, ConcurrentCallersShareOneGrowingTable) {
  const RopeSchedule s = testing::plain_schedule(64);
  const RopeApplyParams ap = rope_apply_params(s);
  RopeTable table(ap, 8);  // tiny: every thread's call makes it grow
  auto job = [&](int id, std::vector<float>* out) {
    std::vector<std::int64_t> ids(32);
    for (int t = 0; t < 32; ++t) ids[static_cast<std::size_t>(t)] = (id + 1) * 1000 + t * 37;
    out->assign(32 * 2 * 64, 0.5f);
    RopeKernelOptions o;
    o.table = &table;
    o.threads = 1;
    for (int repeat = 0; repeat < 20; ++repeat) rope_rotate(bshd(out->data(), {1, 32, 2, 64}), nullptr, {ids.data(), 1, 32}, ap, o);
  };
  std::vector<std::vector<float>> results(6), expected(6);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) threads.emplace_back(job, i, &results[static_cast<std::size_t>(i)]);
  for (auto& t : threads) t.join();
  for (int i = 0; i < 6; ++i) job(i, &expected[static_cast<std::size_t>(i)]);  // one at a time
  for (int i = 0; i < 6; ++i) EXPECT_EQ(results[static_cast<std::size_t>(i)], expected[static_cast<std::size_t>(i)]) << i;
  EXPECT_GE(table.ensure(0)->positions, 6037);
}

}  // namespace
}  // namespace posenc
