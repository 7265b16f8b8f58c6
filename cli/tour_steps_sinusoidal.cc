// The tour's steps about the sinusoidal table (Vaswani et al. 2017, section 3.5): the table and
// its dot products, the rotation property, a tutorial erratum and float32 angles.
#include <algorithm>
#include <cmath>

#include "posenc/numerics.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_schedule.h"
#include "posenc/sinusoidal.h"
#include "posenc_plot/figures.h"
#include "tour_steps.h"

namespace posenc::cli::tour {
namespace {

constexpr int kDim = 64;

SinusoidalParams vaswani(double base) {
  return {kDim, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, base};
}

std::vector<std::int64_t> positions_upto(std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  return p;
}

double row_dot(const std::vector<float>& table, std::int64_t a, std::int64_t b) {
  double s = 0;
  for (int j = 0; j < kDim; ++j) s += static_cast<double>(table[a * kDim + j]) * table[b * kDim + j];
  return s;
}

}  // namespace

// PE(p).PE(p + k) = sum_i cos(k w_i) (cos a cos b + sin a sin b = cos(a - b)): a function of k.
StepResult sinusoidal_step(const StepContext& context) {
  StepResult r;
  constexpr std::int64_t kPositions = 1024, kMaxK = 256;
  const auto table = sinusoidal_table(vaswani(10000.0), positions_upto(kPositions + kMaxK));
  double spread = 0;
  int rises = 0;  // steps k - 1 -> k where the dot product goes up again
  std::vector<double> ks, dots;
  for (std::int64_t k = 0; k <= kMaxK; ++k) {
    double lo = 1e300, hi = -1e300;
    for (std::int64_t p = 0; p < kPositions; p += 7) {
      const double d = row_dot(table, p, p + k);
      lo = std::min(lo, d), hi = std::max(hi, d);
    }
    spread = std::max(spread, (hi - lo) / (kDim / 2.0));
    ks.push_back(static_cast<double>(k));
    dots.push_back(row_dot(table, 0, k));
    if (k > 0 && dots[k] > dots[k - 1]) ++rises;
  }
  r.lines.push_back({"The sinusoidal table (d = 64): PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)); "
                     "32 frequencies from 1 to " + num(std::pow(10000.0, -62.0 / 64)) + " radians per position.",
                     "正弦位置表（d = 64）：PE(p, 2i) = sin(p / 10000^(2i/d))，PE(p, 2i+1) = cos(p / 10000^(2i/d))；"
                     "32 个频率，从每个位置 1 弧度到 " + num(std::pow(10000.0, -62.0 / 64)) + " 弧度。"});
  r.lines.push_back({"PE(p) . PE(p + k) = sum_i cos(k w_i) depends on the distance k only: PE(0).PE(10) = " +
                     num(row_dot(table, 0, 10)) + ", PE(500).PE(510) = " + num(row_dot(table, 500, 510)) +
                     "; it is largest at k = 0 (" + num(dots[0]) + " = d/2) and falls with k, though not monotonically: it rises "
                     "again on " + std::to_string(rises) + " of the " + std::to_string(kMaxK) + " steps up to k = " +
                     std::to_string(kMaxK) + ".",
                     "PE(p) . PE(p + k) = sum_i cos(k w_i) 只取决于距离 k：PE(0).PE(10) = " + num(row_dot(table, 0, 10)) +
                     "，PE(500).PE(510) = " + num(row_dot(table, 500, 510)) + "；k = 0 时最大（" + num(dots[0]) +
                     " = d/2），随 k 下降，但并不单调：在到 k = " + std::to_string(kMaxK) + " 的 " +
                     std::to_string(kMaxK) + " 步中有 " + std::to_string(rises) + " 步又上升。"});
  r.claims.push_back({"sinusoidal.dot_depends_on_k",
                      {"PE(p).PE(p+k) is the same for every p (largest spread over p, / (d/2))",
                       "PE(p).PE(p+k) 对每个 p 都相同（随 p 的最大变化 / (d/2)）"},
                      spread, 1e-5, true});
  plot::HeatmapRequest heat;
  heat.scheme = "sinusoidal";
  heat.dim = kDim;
  heat.count = 128;
  draw_heatmap(context, r, "sinusoidal-table.svg", plot::heatmap_data(heat));
  draw_chart(context, r, "sinusoidal-dot.svg", {{"PE(0) . PE(k)", ks, dots}},
             chart_options("PE(0) . PE(k): a function of the distance k only (d = 64)", "distance k", "dot product"));
  return r;
}

// PE(p + k) = R(k) PE(p): each (sin, cos) pair turns by k w_i, a linear map that depends only on
// k -- the hypothesis of Vaswani et al. (section 3.5) that the model can attend by relative position.
StepResult rotation_step(const StepContext& context) {
  StepResult r;
  const SinusoidalParams p = vaswani(10000.0);
  const auto rows = sinusoidal_table(p, {3, 5});
  const double w = sinusoidal_frequencies(p)[0];  // pair 0: w = 1
  const double s3 = rows[0], c3 = rows[1];
  // The pair (sin, cos) at p turned by the angle 2w gives the pair at p + 2.
  const double s5 = s3 * std::cos(2 * w) + c3 * std::sin(2 * w), c5 = c3 * std::cos(2 * w) - s3 * std::sin(2 * w);
  r.lines.push_back({"Pair 0 of PE(3) is (sin 3, cos 3) = (" + num(s3) + ", " + num(c3) + "); turned by 2 radians it is (" +
                     num(s5) + ", " + num(c5) + "), which is pair 0 of PE(5): (" + num(rows[kDim]) + ", " +
                     num(rows[kDim + 1]) + ").",
                     "PE(3) 的第 0 对是 (sin 3, cos 3) = (" + num(s3) + ", " + num(c3) + ")；旋转 2 弧度后为 (" + num(s5) +
                     ", " + num(c5) + ")，正是 PE(5) 的第 0 对：(" + num(rows[kDim]) + ", " + num(rows[kDim + 1]) + ")。"});
  r.lines.push_back({"So PE(p + k) = R(k) PE(p) with R(k) the same for every p: posenc check measures it over the whole table, "
                     "and builds tables by this rotation.",
                     "因此 PE(p + k) = R(k) PE(p)，且 R(k) 对每个 p 都相同：posenc check 在整张表上测量它，并用这个旋转生成表。"});
  r.claims.push_back(from_check(context, "sinusoidal.rotation",
                                {"PE(p+k) = R(k) PE(p), a linear map that depends only on k",
                                 "PE(p+k) = R(k) PE(p)，一个只取决于 k 的线性变换"}));
  r.claims.push_back(from_check(context, "sinusoidal.generated",
                                {"the table generated by rotation matches direct evaluation", "用旋转生成的表与直接计算一致"}));
  return r;
}

// A common tutorial loop: for i in range(0, d, 2): PE[p, i] = sin(p / 10000 ** (2 * i / d)),
// PE[p, i+1] = cos(...). With i already even, 2i/d = 4j/d for pair j: 10000^(4j/d) = (10^8)^(2j/d).
StepResult erratum_base_step(const StepContext& context) {
  StepResult r;
  constexpr std::int64_t kPositions = 512;
  std::vector<float> loop(static_cast<std::size_t>(kPositions * kDim));
  for (std::int64_t pos = 0; pos < kPositions; ++pos)
    for (int i = 0; i < kDim; i += 2) {  // the tutorial's loop as written, in double
      const double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * i / kDim);
      loop[pos * kDim + i] = static_cast<float>(std::sin(angle));
      loop[pos * kDim + i + 1] = static_cast<float>(std::cos(angle));
    }
  auto max_diff = [&](double base) {
    const auto t = sinusoidal_table(vaswani(base), positions_upto(kPositions));
    double m = 0;
    for (std::size_t i = 0; i < t.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(t[i]) - loop[i]));
    return m;
  };
  const auto w4 = sinusoidal_frequencies(vaswani(1e4)), w8 = sinusoidal_frequencies(vaswani(1e8));
  std::vector<double> pair, wl4, wl8;
  for (std::size_t j = 0; j < w4.size(); ++j)
    pair.push_back(static_cast<double>(j)), wl4.push_back(2 * kPi / w4[j]), wl8.push_back(2 * kPi / w8[j]);
  r.lines.push_back({"A loop many tutorials print: for i in range(0, d, 2): PE[p, i] = sin(p / 10000^(2i/d)). Here i is "
                     "already 0, 2, 4, ..., so pair j gets 10000^(4j/d) = (10^8)^(2j/d): the table of base 10^8, not 10^4.",
                     "许多教程给出的循环：for i in range(0, d, 2): PE[p, i] = sin(p / 10000^(2i/d))。这里 i 已经是 0, 2, 4, ...，"
                     "所以第 j 对得到 10000^(4j/d) = (10^8)^(2j/d)：这是底数 10^8 的表，而不是 10^4。"});
  r.lines.push_back({"Its slowest pair has wavelength " + num(wl8.back()) + " positions instead of " + num(wl4.back()) +
                     " (d = 64): half the channels barely move within any real context. A test against a reference "
                     "table catches this at once; a heatmap by eye does not.",
                     "它最慢的一对波长为 " + num(wl8.back()) + " 个位置，而不是 " + num(wl4.back()) +
                     "（d = 64）：一半的通道在任何实际上下文中几乎不动。与参考表对比的测试立刻能发现这个错误，用眼睛看热图却看不出。"});
  r.claims.push_back({"erratum.is_base_1e8",
                      {"the loop's table equals posenc's table at base 10^8", "该循环的表等于 posenc 底数 10^8 的表"},
                      max_diff(1e8), 1e-6, true});
  r.claims.push_back({"erratum.is_not_base_1e4",
                      {"and differs from the base-10^4 table", "而与底数 10^4 的表不同"}, max_diff(1e4), 0.5, false});
  draw_chart(context, r, "erratum-base.svg", {{"base 10^4 (Vaswani)", pair, wl4}, {"the loop: base 10^8", pair, wl8}},
             chart_options("wavelength of each sin/cos pair (d = 64)", "pair j", "wavelength (positions)", false, true));
  return r;
}

// PyTorch tutorials compute div_term = exp(arange(0, d, 2) * (-ln(10000) / d)) and the angle
// position * div_term in float32 (as HF's RoPE does: numerics.h kHfFloat32): the angle's rounding
// grows with the position. posenc's accurate angles are reduced in double.
StepResult float32_angles_step(const StepContext& context) {
  StepResult r;
  RopeParams rp;
  rp.head_dim = kDim;
  const RopeSchedule s = compute_schedule(rp);
  RopeApplyParams hf = rope_apply_params(s), accurate = rope_apply_params(s);
  hf.angles = Numerics::kHfFloat32;
  double div_term_error = 0;  // the tutorial's float32 exp against the schedule (double, rounded once)
  for (int i = 0; i < kDim / 2; ++i) {
    const float dt = std::exp(static_cast<float>(2 * i) * (-std::log(10000.0f) / static_cast<float>(kDim)));
    div_term_error = std::max(div_term_error, std::fabs(dt - static_cast<double>(s.inv_freq[i])) / s.inv_freq[i]);
  }
  std::vector<double> xs, hf_err, acc_err;
  for (double e = 1; e <= 6.001; e += 0.25) {
    const auto p = static_cast<std::int64_t>(std::llround(std::pow(10.0, e)));
    double eh = 0, ea = 0;
    for (int i = 0; i < kDim / 2; ++i) {
      const long double exact = std::sin(static_cast<long double>(p) * static_cast<long double>(s.inv_freq[i]));
      float c, sn;
      rope_cos_sin(s.inv_freq[i], p, hf, &c, &sn);
      eh = std::max(eh, static_cast<double>(std::fabs(sn - exact)));
      rope_cos_sin(s.inv_freq[i], p, accurate, &c, &sn);
      ea = std::max(ea, static_cast<double>(std::fabs(sn - exact)));
    }
    xs.push_back(static_cast<double>(p)), hf_err.push_back(eh), acc_err.push_back(ea);
  }
  r.lines.push_back({"div_term in float32 (exp(2i * -ln(10000)/d)) is within " + num(div_term_error, 2) +
                     " (relative) of 10000^(-2i/d): the frequencies are fine. The angle p * w in float32 is not: its "
                     "rounding is ~6e-8 * p radians.",
                     "float32 的 div_term（exp(2i * -ln(10000)/d)）与 10000^(-2i/d) 的相对差在 " + num(div_term_error, 2) +
                     " 以内：频率没问题。float32 的角度 p * w 则不然：它的舍入误差约为 6e-8 * p 弧度。"});
  r.lines.push_back({"Largest error of sin(p w) over the 32 frequencies: at p = 1000 float32 " + num(hf_err[8], 2) +
                     ", at p = 100000 " + num(hf_err[16], 2) + ", at p = 1000000 " + num(hf_err.back(), 2) +
                     "; posenc's angles stay below 1e-6 at every one of these positions.",
                     "32 个频率上 sin(p w) 的最大误差：p = 1000 时 float32 为 " + num(hf_err[8], 2) + "，p = 100000 时为 " +
                     num(hf_err[16], 2) + "，p = 1000000 时为 " + num(hf_err.back(), 2) +
                     "；posenc 的角度在这些位置上都低于 1e-6。"});
  r.claims.push_back({"float32.angle_error_grows",
                      {"float32 angles are off by more than 1e-3 at position 100000", "float32 角度在位置 100000 处误差超过 1e-3"},
                      hf_err[16], 1e-3, false});
  r.claims.push_back({"float32.accurate_angles",
                      {"posenc's angles are within 1e-6 up to position 10^6", "posenc 的角度在 10^6 以内误差不超过 1e-6"},
                      *std::max_element(acc_err.begin(), acc_err.end()), 1e-6, true});
  draw_chart(context, r, "float32-angles.svg", {{"float32 angle (tutorials, HF)", xs, hf_err}, {"posenc accurate", xs, acc_err}},
             chart_options("largest |sin(p w) error| over the frequencies (d = 64)", "position p", "error", true, true));
  return r;
}

}  // namespace posenc::cli::tour
