// The tour's steps about attention itself: without positions it cannot see order, and with
// absolute positions added to the embeddings the score mixes content and position.
#include <algorithm>
#include <cmath>

#include "posenc/attention.h"
#include "posenc/rope_schedule.h"
#include "posenc/sinusoidal.h"
#include "tour_steps.h"

namespace posenc::cli::tour {
namespace {

constexpr int kTokens = 12, kHeads = 2, kHeadDim = 16;

// Non-causal self-attention of [1, kTokens, kHeads, kHeadDim] q, k, v by the core's fused kernel.
std::vector<float> attend(std::vector<float> q, std::vector<float> k, const std::vector<float>& v, bool rope) {
  const RopeShape shape{1, kTokens, kHeads, kHeadDim};
  std::vector<float> v_copy = v, out(v.size());
  AttentionParams params;
  params.mask.causal = false;
  RopeParams rp;
  rp.head_dim = kHeadDim;
  const RopeSchedule schedule = compute_schedule(rp);
  if (rope) {
    params.positions = AttentionPositions::kRope;
    params.q_positions = params.k_positions = PositionIds::implicit(0);  // token i at position i
    params.rope = rope_apply_params(schedule);
  }
  attention(bshd(q.data(), shape), bshd(k.data(), shape), bshd(v_copy.data(), shape), bshd(out.data(), shape), params);
  return out;
}

// Token i of the result is token perm[i] of x ([kTokens][kHeads * kHeadDim]).
std::vector<float> permuted(const std::vector<float>& x, const std::vector<int>& perm) {
  const int row = kHeads * kHeadDim;
  std::vector<float> out(x.size());
  for (int i = 0; i < kTokens; ++i) std::copy_n(x.begin() + perm[i] * row, row, out.begin() + i * row);
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

// Vaswani et al. 2017, section 3.5 ("since our model contains no recurrence and no convolution,
// ... we must inject some information about the position"): attention is a function of a set.
StepResult permutation_step(const StepContext&) {
  StepResult r;
  std::mt19937_64 rng(32);
  const std::size_t n = static_cast<std::size_t>(kTokens) * kHeads * kHeadDim;
  const auto q = uniform_values(rng, n), k = uniform_values(rng, n), v = uniform_values(rng, n);
  std::vector<int> perm(kTokens);
  for (int i = 0; i < kTokens; ++i) perm[i] = (5 * i + 3) % kTokens;  // 5 is prime to 12: a permutation
  const double plain = max_abs_diff(attend(permuted(q, perm), permuted(k, perm), permuted(v, perm), false),
                                    permuted(attend(q, k, v, false), perm));
  const double rope = max_abs_diff(attend(permuted(q, perm), permuted(k, perm), permuted(v, perm), true),
                                   permuted(attend(q, k, v, true), perm));
  r.lines.push_back({"Shuffle the 12 tokens of a sentence (token i moves to place (5i + 3) mod 12) and run the same "
                     "self-attention (posenc's fused attention(), 2 heads of 16, no mask, no positions).",
                     "把一句话的 12 个词元打乱（第 i 个移到 (5i + 3) mod 12），用同一个自注意力计算（posenc 的融合 "
                     "attention()，2 个头，每头 16 维，无掩码，无位置）。"});
  r.lines.push_back({"Without positions every output row is the same as before, only moved with its token: attention "
                     "sees a set, not a sequence (largest difference " + under(plain) + ").",
                     "没有位置时，每一行输出与打乱前相同，只是跟着自己的词元换了位置：注意力看到的是集合，而不是序列"
                     "（最大差 " + under(plain) + "）。"});
  r.lines.push_back({"With RoPE at positions 0..11 the outputs change (largest difference " + num(rope, 3) +
                     "): positions are what tells \"dog bites man\" from \"man bites dog\".",
                     "加上位置 0..11 的 RoPE 后输出改变了（最大差 " + num(rope, 3) +
                     "）：正是位置区分了“狗咬人”和“人咬狗”。"});
  r.claims.push_back({"permutation.no_positions",
                      {"without positions, shuffled inputs give the same outputs shuffled",
                       "没有位置时，打乱输入得到的就是打乱后的原输出"},
                      plain, 1e-5, true});
  r.claims.push_back({"permutation.rope_breaks_it",
                      {"with RoPE the shuffled outputs differ", "加上 RoPE 后，打乱后的输出不同"}, rope, 1e-2, false});
  return r;
}

// (e + p) W_Q W_K^T (e + p)^T expands into four terms (Ke et al. 2021, TUPE, eq. 3); the last,
// p_m W_Q W_K^T p_n, no longer depends on m - n alone once W_Q, W_K are not the identity (Yan et
// al. 2019, TENER, section 3.2 and its figure 3).
StepResult cross_terms_step(const StepContext& context) {
  StepResult r;
  constexpr int d = 64, kPositions = 256, kMaxK = 32;
  std::mt19937_64 rng(7);
  const auto pe = sinusoidal_table({d, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, 10000.0}, [] {
    std::vector<std::int64_t> p(kPositions + kMaxK);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::int64_t>(i);
    return p;
  }());
  const auto wq = uniform_values(rng, d * d), wk = uniform_values(rng, d * d), e = uniform_values(rng, 2 * d);
  const double w_scale = std::sqrt(3.0 / d);  // uniform [-1, 1) has variance 1/3: rows of variance 1/d
  auto project = [&](const std::vector<double>& x, const std::vector<float>& w) {  // x W, [d]
    std::vector<double> out(d, 0.0);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) out[j] += x[i] * w[i * d + j] * w_scale;
    return out;
  };
  auto row = [&](const float* x) { return std::vector<double>(x, x + d); };
  auto score = [&](const std::vector<double>& x, const std::vector<double>& y) {
    const auto a = project(x, wq), b = project(y, wk);
    double s = 0;
    for (int j = 0; j < d; ++j) s += a[j] * b[j];
    return s;
  };
  auto plus = [](std::vector<double> a, const std::vector<double>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
  };
  // Tokens m = 3 and n = 7: the full score against the sum of its four terms.
  const auto em = row(e.data()), en = row(e.data() + d), pm = row(&pe[3 * d]), pn = row(&pe[7 * d]);
  const double ee = score(em, en), ep = score(em, pn), pe_ = score(pm, en), pp = score(pm, pn);
  const double full = score(plus(em, pm), plus(en, pn));
  // p_m . p_{m+k} raw and through W_Q, W_K, over m in [0, 256) and k in [0, 32].
  double raw_spread = 0, proj_spread = 0, raw_scale = 0, proj_scale = 0;
  std::vector<double> raw0, raw100, proj0, proj100, ks;
  for (int k = 0; k <= kMaxK; ++k) {
    double raw_lo = 1e300, raw_hi = -1e300, proj_lo = 1e300, proj_hi = -1e300;
    for (int m = 0; m < kPositions; m += 5) {
      const auto a = row(&pe[m * d]), b = row(&pe[(m + k) * d]);
      double raw = 0;
      for (int j = 0; j < d; ++j) raw += a[j] * b[j];
      const double proj = score(a, b);
      raw_lo = std::min(raw_lo, raw), raw_hi = std::max(raw_hi, raw);
      proj_lo = std::min(proj_lo, proj), proj_hi = std::max(proj_hi, proj);
      raw_scale = std::max(raw_scale, std::fabs(raw)), proj_scale = std::max(proj_scale, std::fabs(proj));
      if (m == 0) raw0.push_back(raw), proj0.push_back(proj);
      if (m == 100) raw100.push_back(raw), proj100.push_back(proj);
    }
    raw_spread = std::max(raw_spread, raw_hi - raw_lo);
    proj_spread = std::max(proj_spread, proj_hi - proj_lo);
    ks.push_back(k);
  }
  raw_spread /= raw_scale, proj_spread /= proj_scale;
  int first_rise = 0;  // the raw product falls with k only at first: the first k where it rises
  for (std::size_t k = 1; k < raw0.size() && !first_rise; ++k)
    if (raw0[k] > raw0[k - 1]) first_rise = static_cast<int>(k);
  r.lines.push_back({"Add a sinusoidal position p to a token embedding e (d = 64), project with random W_Q, W_K: the "
                     "score of tokens 3 and 7 is " + num(full) + " = e.e " + num(ee) + " + e.p " + num(ep) + " + p.e " +
                     num(pe_) + " + p.p " + num(pp) + ". Two of the four terms mix content with position.",
                     "把正弦位置 p 加到词嵌入 e 上（d = 64），再用随机的 W_Q、W_K 投影：词元 3 和 7 的分数 " + num(full) +
                     " = e.e " + num(ee) + " + e.p " + num(ep) + " + p.e " + num(pe_) + " + p.p " + num(pp) +
                     "。四项中有两项把内容和位置混在一起。"});
  r.lines.push_back({"Raw, p_m . p_(m+k) depends on k only (spread over m " + under(raw_spread) +
                     " of its size); through W_Q W_K^T the same product changes with m by " + num(proj_spread, 3) +
                     " of its size: the clean relative form the tutorials draw is gone after the projections.",
                     "未投影时 p_m . p_(m+k) 只取决于 k（随 m 的变化为其大小的 " + under(raw_spread) +
                     "）；经过 W_Q W_K^T 后，同一乘积随 m 变化达其大小的 " + num(proj_spread, 3) +
                     "：教程里画的干净的相对形式在投影后就没有了。"});
  r.lines.push_back({"Nor is the raw product the monotone decay some tutorials describe: p_0 . p_k falls from k = 0 and "
                     "first rises again at k = " + std::to_string(first_rise) + " (d = 64; the chart shows both).",
                     "未投影的乘积也不是一些教程所说的单调衰减：p_0 . p_k 从 k = 0 开始下降，在 k = " +
                     std::to_string(first_rise) + " 处第一次回升（d = 64；图中两者都有）。"});
  r.claims.push_back({"cross_terms.sum",
                      {"the score equals the sum of its four terms", "分数等于四项之和"},
                      std::fabs(full - (ee + ep + pe_ + pp)) / std::fabs(full), 1e-12, true});
  r.claims.push_back({"cross_terms.raw_relative",
                      {"raw p_m . p_(m+k) depends on k only", "未投影的 p_m . p_(m+k) 只取决于 k"}, raw_spread, 1e-5, true});
  r.claims.push_back({"cross_terms.projected_not_relative",
                      {"after W_Q, W_K the product depends on m too", "投影后乘积也取决于 m"}, proj_spread, 0.1, false});
  auto scaled = [](std::vector<double> v, double s) {
    for (double& x : v) x /= s;
    return v;
  };
  draw_chart(context, r, "cross-terms.svg",
             {{"p_0 . p_k", ks, scaled(raw0, raw_scale)}, {"p_100 . p_(100+k)", ks, scaled(raw100, raw_scale)},
              {"p_0 W_Q W_K^T p_k", ks, scaled(proj0, proj_scale)},
              {"p_100 W_Q W_K^T p_(100+k)", ks, scaled(proj100, proj_scale)}},
             chart_options("position products before and after W_Q, W_K (each divided by its largest value)",
                           "distance k", "product / largest"));
  return r;
}

}  // namespace posenc::cli::tour
