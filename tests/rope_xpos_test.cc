// xPos (rope_xpos.h; Sun et al. 2022) in the RoPE kernels: every SIMD target equals the scalar
// reference bit for bit; the forward equals a long-double reference of the definition; q.k
// depends on m - n only (and not on the centre); the backward (direction -1) is the gradient,
// checked against central finite differences of the long-double forward; the refusals.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_kernels.h"
#include "expect_error.h"
#include "rope_kernels_test_support.h"

namespace posenc {
namespace {

using namespace rope_kernels_test;
using Real = long double;

RopeSchedule schedule(int head_dim, double partial = 1.0) {
  RopeParams rp;
  rp.head_dim = head_dim;
  rp.partial_rotary_factor = partial;
  return compute_schedule(rp);
}

XPosParams xpos_params(double center, XPosRole first = XPosRole::kQuery) {
  XPosParams x;
  x.scale_base = 512;
  x.center = center;
  x.first = first;
  return x;
}

// The definition, in long double: rotary-embedding-torch's and x-transformers'
// scale = (arange(0, dim, 2) + 0.4 dim) / (1.4 dim), to the power (m - c)/B for queries and
// -(m - c)/B for keys, on both channels of pair i; then R(m). Input channels of pair i by layout
// (deepseek_v3 reads pairs and writes halves). One head, f32 inputs widened.
std::vector<Real> xpos_forward(const std::vector<Real>& x, std::int64_t m, const std::vector<float>& inv_freq,
                               const XPosParams& xp, XPosRole role, RopeLayout layout) {
  const int half = static_cast<int>(inv_freq.size()), dim = 2 * half;
  std::vector<Real> out = x;
  const Real power = (static_cast<Real>(m) - xp.center) / xp.scale_base * (role == XPosRole::kQuery ? 1 : -1);
  for (int i = 0; i < half; ++i) {
    const Real zeta = (2.0L * i + xp.gamma * dim) / ((1 + xp.gamma) * dim);
    const Real scale = std::pow(zeta, power);
    const Real angle = static_cast<Real>(m) * inv_freq[static_cast<std::size_t>(i)];
    const bool split_in = layout == RopeLayout::kHalfSplit, split_out = layout != RopeLayout::kInterleaved;
    const Real a = x[static_cast<std::size_t>(split_in ? i : 2 * i)], b = x[static_cast<std::size_t>(split_in ? i + half : 2 * i + 1)];
    out[static_cast<std::size_t>(split_out ? i : 2 * i)] = scale * (a * std::cos(angle) - b * std::sin(angle));
    out[static_cast<std::size_t>(split_out ? i + half : 2 * i + 1)] = scale * (b * std::cos(angle) + a * std::sin(angle));
  }
  return out;
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (auto& e : v) e = normal(rng);
  return v;
}

// One head at position m through rope_rotate (f32), with the role as its first tensor's.
std::vector<float> kernel_rotate(std::vector<float> x, std::int64_t m, const RopeSchedule& s, const XPosParams& xp,
                                 XPosRole role, RopeLayout layout, int direction = 1) {
  RopeApplyParams p = rope_apply_params(s, layout);
  p.xpos = xp;
  p.xpos.first = role;
  p.direction = direction;
  rope_rotate(bshd(x.data(), {1, 1, 1, static_cast<int>(x.size())}), nullptr, PositionIds::implicit(m), p);
  return x;
}

TEST_F(RopeKernels, XPosEveryTargetEqualsTheReferenceBitForBit) {
  const int batch = 2, tokens = 5, q_heads = 3, k_heads = 2, head_dim = 40;
  std::mt19937 rng(11);
  std::vector<std::int64_t> ids(batch * tokens);
  std::uniform_int_distribution<std::int64_t> any_position(0, 4000);
  for (auto& v : ids) v = any_position(rng);
  const auto targets = hwy::SupportedAndGeneratedTargets();
  int combinations = 0;
  for (const auto target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (double prf : {1.0, 0.5}) {
      const RopeSchedule s = schedule(head_dim, prf);
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
          for (int direction : {1, -1})
            for (bool table : {false, true})
              for (bool explicit_ids : {false, true}) {
                  const bool head_major = explicit_ids;  // both storage orders, half the combinations
                  RopeApplyParams p = rope_apply_params(s, layout);
                  p.direction = direction;
                  p.attention_factor = 1.125;
                  p.xpos = xpos_params(2000.5);
                  PositionIds pos = explicit_ids ? PositionIds::explicit_ids(ids.data()) : PositionIds::implicit(1000);
                  Buffer q = random_buffer(dtype, std::size_t{batch} * tokens * q_heads * head_dim, rng);
                  Buffer k = random_buffer(dtype, std::size_t{batch} * tokens * k_heads * head_dim, rng);
                  Buffer q_ref = q, k_ref = k, k_alone = k;
                  const auto view = [&](Buffer& b, int heads) {
                    return head_major ? bhsd(b.data(), dtype, {batch, tokens, heads, head_dim})
                                      : bshd(b.data(), dtype, {batch, tokens, heads, head_dim});
                  };
                  rope_apply_reference(view(q_ref, q_heads), pos, p);
                  RopeApplyParams as_key = p;
                  as_key.xpos.first = XPosRole::kKey;
                  rope_apply_reference(view(k_ref, k_heads), pos, as_key);
                  RopeTable cache(p, 16);
                  RopeKernelOptions options;
                  options.table = table ? &cache : nullptr;
                  options.threads = 2;
                  const RopeTensor kv = view(k, k_heads);
                  rope_rotate(view(q, q_heads), &kv, pos, p, options);
                  rope_rotate(view(k_alone, k_heads), nullptr, pos, as_key, options);  // cached keys alone
                  ASSERT_EQ(q.bytes, q_ref.bytes) << to_string(dtype) << " layout " << to_string(layout) << " dir "
                                                  << direction << " table " << table << " ids " << explicit_ids;
                  ASSERT_EQ(k.bytes, k_ref.bytes) << to_string(dtype) << " layout " << to_string(layout);
                  ASSERT_EQ(k_alone.bytes, k_ref.bytes) << to_string(dtype) << " layout " << to_string(layout);
                  ++combinations;
                }
    }
  }
  EXPECT_EQ(combinations, static_cast<int>(targets.size()) * 2 * 3 * 3 * 2 * 2 * 2);
}

TEST_F(RopeKernels, XPosForwardEqualsTheLongDoubleDefinition) {
  std::mt19937 rng(3);
  const RopeSchedule s = schedule(64);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
    for (XPosRole role : {XPosRole::kQuery, XPosRole::kKey})
      for (std::int64_t m : {0, 1, 700, 4095}) {
        const auto x = random_floats(64, rng);
        const auto got = kernel_rotate(x, m, s, xpos_params(2048), role, layout);
        const auto want = xpos_forward(std::vector<Real>(x.begin(), x.end()), m, s.inv_freq, xpos_params(2048), role, layout);
        for (std::size_t i = 0; i < x.size(); ++i)
          EXPECT_NEAR(got[i], static_cast<double>(want[i]), 2e-6 * (1 + std::fabs(static_cast<double>(want[i]))))
              << to_string(layout) << " m " << m << " channel " << i;
      }
}

TEST_F(RopeKernels, XPosScoresDependOnTheDistanceOnlyAndDecayWithIt) {
  std::mt19937 rng(5);
  const RopeSchedule s = schedule(64);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    const auto q = random_floats(64, rng), k = random_floats(64, rng);
    const auto score = [&](std::int64_t m, std::int64_t n, double center) {
      const auto qm = kernel_rotate(q, m, s, xpos_params(center), XPosRole::kQuery, layout);
      const auto kn = kernel_rotate(k, n, s, xpos_params(center), XPosRole::kKey, layout);
      double sum = 0;
      for (std::size_t i = 0; i < q.size(); ++i) sum += static_cast<double>(qm[i]) * kn[i];
      return sum;
    };
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{5, 2}, {100, 0}, {2000, 1500}, {9, 9}}) {
      const double base = score(m, n, 1024);
      EXPECT_NEAR(score(m + 1000, n + 1000, 1024), base, 2e-5 * (1 + std::fabs(base))) << m << " " << n;
      EXPECT_NEAR(score(m, n, 0), base, 2e-5 * (1 + std::fabs(base))) << "the centre cancels";
    }
  }
  // The decay: q and k on the slowest pair (31) alone score zeta_31^((m-n)/B) times plain RoPE's.
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    std::vector<float> q(64, 0.0f), k(64, 0.0f);
    const std::size_t a = layout == RopeLayout::kHalfSplit ? 31 : 62, b = layout == RopeLayout::kHalfSplit ? 63 : 63;
    q[a] = 0.75f, q[b] = -0.5f, k[a] = 1.25f, k[b] = 0.25f;
    const auto dot_at = [&](const XPosParams& xp) {
      const auto qm = kernel_rotate(q, 4000, s, xp, XPosRole::kQuery, layout);
      const auto kn = kernel_rotate(k, 0, s, xp, XPosRole::kKey, layout);
      double sum = 0;
      for (std::size_t i = 0; i < q.size(); ++i) sum += static_cast<double>(qm[i]) * kn[i];
      return sum;
    };
    const double zeta31 = (62.0 + 0.4 * 64) / (1.4 * 64);
    EXPECT_NEAR(dot_at(xpos_params(2000)) / dot_at(XPosParams{}), std::pow(zeta31, 4000.0 / 512), 1e-5);
    EXPECT_LT(std::pow(zeta31, 4000.0 / 512), 0.9);
  }
}

// d/dx of L(x) = sum_i g_i f(x)_i, f the long-double forward: central differences (f is linear,
// so they are exact up to rounding) against the kernel's direction -1 applied to g.
TEST_F(RopeKernels, XPosBackwardIsTheGradientByFiniteDifferences) {
  std::mt19937 rng(9);
  const RopeSchedule s = schedule(32);
  const XPosParams xp = xpos_params(300);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
    for (XPosRole role : {XPosRole::kQuery, XPosRole::kKey})
      for (std::int64_t m : {0, 37, 1200}) {
        const auto x = random_floats(32, rng), g = random_floats(32, rng);
        const auto loss = [&](const std::vector<Real>& at) {
          const auto y = xpos_forward(at, m, s.inv_freq, xp, role, layout);
          Real sum = 0;
          for (std::size_t i = 0; i < y.size(); ++i) sum += g[i] * y[i];
          return sum;
        };
        const auto grad = kernel_rotate(g, m, s, xp, role, layout, -1);
        const Real h = 1e-4L;
        for (std::size_t i = 0; i < x.size(); ++i) {
          std::vector<Real> up(x.begin(), x.end()), down(x.begin(), x.end());
          up[i] += h;
          down[i] -= h;
          const double numeric = static_cast<double>((loss(up) - loss(down)) / (2 * h));
          EXPECT_NEAR(grad[i], numeric, 2e-6 * (1 + std::fabs(numeric))) << to_string(layout) << " m " << m << " channel " << i;
        }
      }
}

void expect_refused(const RopeApplyParams& p, const PositionIds& pos, const std::string& says) {
  std::vector<float> x(64, 1.0f);
  expect_error([&] { rope_rotate(bshd(x.data(), {1, 1, 1, 64}), nullptr, pos, p); }, says);
}

TEST_F(RopeKernels, XPosRefusesWhatItCannotScale) {
  const RopeSchedule s = schedule(64);
  RopeApplyParams p = rope_apply_params(s);
  p.xpos = xpos_params(0);
  p.xpos.scale_base = -512;
  expect_refused(p, PositionIds::implicit(0), "xPos scale_base must be 0 (off) or a finite number > 0, got -512");
  p.xpos = xpos_params(0);
  p.xpos.gamma = 0;
  expect_refused(p, PositionIds::implicit(0), "xPos gamma must be a finite number > 0, got 0");
  p.xpos = xpos_params(0);
  // ln(1.4/0.4) = 1.2528: |m - c| <= 80 * 512 / 1.2528 = 32695.
  expect_refused(p, PositionIds::implicit(40000), "keep |m - c| <= 32695");
  const std::int64_t ids[3] = {1, 2, 3};
  expect_refused(p, PositionIds::explicit_ids(ids, 3, 1), "xPos scales by one position per token; the ids have 3 axes");
  p.xpos.center = 40000;
  std::vector<float> x(64, 1.0f);
  EXPECT_NO_THROW(rope_rotate(bshd(x.data(), {1, 1, 1, 64}), nullptr, PositionIds::implicit(40000), p));
}

}  // namespace
}  // namespace posenc
