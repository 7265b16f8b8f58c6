// The tour's steps about relative schemes: RoPE's score and the sine term tutorials drop, ALiBi's
// slopes, and RoPE over two position axes (the vision towers' 2-D RoPE).
#include <algorithm>
#include <cmath>

#include "posenc/alibi.h"
#include "posenc/mrope.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_schedule.h"
#include "posenc/vision_rope.h"
#include "posenc_plot/figures.h"
#include "tour_steps.h"

namespace posenc::cli::tour {
namespace {

// One head rotated by the core's reference kernel at the given ids (axes 1 or 2).
std::vector<float> rotated(std::vector<float> x, const std::vector<std::int64_t>& ids, int axes,
                           const RopeApplyParams& params) {
  const PositionIds positions = PositionIds::explicit_ids(ids.data(), axes, 1);
  rope_apply_reference(bshd(x.data(), {1, 1, 1, static_cast<int>(x.size())}), positions, params);
  return x;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

}  // namespace

// RoFormer (Su et al. 2021), eq. 16 / section 3.4.2: per pair i, with h = d/2 and the half-split
// pairs (i, i + h), R(m)q . R(n)k = sum_i (q_i k_i + q_{i+h} k_{i+h}) cos((m - n) w_i)
//                                        + (q_i k_{i+h} - q_{i+h} k_i) sin((m - n) w_i).
StepResult rope_sine_term_step(const StepContext& context) {
  StepResult r;
  constexpr int d = 32, h = d / 2, kMaxDistance = 128;
  RopeParams rp;
  rp.head_dim = d;
  const RopeSchedule s = compute_schedule(rp);
  const RopeApplyParams params = rope_apply_params(s);
  std::mt19937_64 rng(16);
  const auto q = uniform_values(rng, d), k = uniform_values(rng, d);
  double formula_error = 0, cos_only_error = 0, scale = 0;
  std::vector<double> xs, rotated_scores, cos_only_scores;
  const std::int64_t n = 5;
  for (int delta = 0; delta <= kMaxDistance; ++delta) {
    const double score = dot(rotated(q, {n + delta}, 1, params), rotated(k, {n}, 1, params));
    double cos_terms = 0, sin_terms = 0;
    for (int i = 0; i < h; ++i) {
      const double angle = delta * static_cast<double>(s.inv_freq[i]);
      cos_terms += (static_cast<double>(q[i]) * k[i] + static_cast<double>(q[i + h]) * k[i + h]) * std::cos(angle);
      sin_terms += (static_cast<double>(q[i]) * k[i + h] - static_cast<double>(q[i + h]) * k[i]) * std::sin(angle);
    }
    formula_error = std::max(formula_error, std::fabs(score - (cos_terms + sin_terms)));
    cos_only_error = std::max(cos_only_error, std::fabs(score - cos_terms));
    scale = std::max(scale, std::fabs(score));
    xs.push_back(delta), rotated_scores.push_back(score), cos_only_scores.push_back(cos_terms);
  }
  formula_error /= scale, cos_only_error /= scale;
  r.lines.push_back({"RoPE turns q at position m and k at position n; their score is sum_i (q_i k_i + q_(i+h) k_(i+h)) "
                     "cos((m-n) w_i) + (q_i k_(i+h) - q_(i+h) k_i) sin((m-n) w_i): a function of m - n only.",
                     "RoPE 把位置 m 的 q 和位置 n 的 k 旋转；它们的分数为 sum_i (q_i k_i + q_(i+h) k_(i+h)) cos((m-n) w_i) "
                     "+ (q_i k_(i+h) - q_(i+h) k_i) sin((m-n) w_i)：只取决于 m - n。"});
  r.lines.push_back({"Written with the cosine term only, as some tutorials state it, the score is wrong by up to " +
                     num(cos_only_error, 3) + " of its size (head_dim 32, distances 0..128); with the sine term it "
                     "equals the rotated vectors' dot product (difference " + under(formula_error) + ").",
                     "若像一些教程那样只写余弦项，分数的误差最大可达其大小的 " + num(cos_only_error, 3) +
                     "（head_dim 32，距离 0..128）；加上正弦项后，它与旋转后向量的点积一致（差 " + under(formula_error) + "）。"});
  r.claims.push_back({"rope.score_formula",
                      {"the formula with its sine term equals the rotated dot product", "带正弦项的公式等于旋转后的点积"},
                      formula_error, 1e-5, true});
  r.claims.push_back({"rope.cos_only_is_wrong",
                      {"dropping the sine term changes the score by more than 10%", "去掉正弦项后分数变化超过 10%"},
                      cos_only_error, 0.1, false});
  r.claims.push_back(from_check(context, "rope.relative",
                                {"<RoPE(q, m), RoPE(k, n)> depends only on m - n", "<RoPE(q, m), RoPE(k, n)> 只取决于 m - n"}));
  draw_chart(context, r, "rope-sine-term.svg",
             {{"R(m)q . R(n)k", xs, rotated_scores}, {"cosine term only", xs, cos_only_scores}},
             chart_options("RoPE score against distance m - n: the whole formula and the cosine term alone", "m - n",
                           "score"));
  return r;
}

// ALiBi (Press et al. 2022): head h adds -slope_h (i - j); slopes a geometric sequence from
// 2^(-8/H) (alibi.h has the rule for H not a power of two, Bloom's build_alibi_tensor).
StepResult alibi_step(const StepContext& context) {
  StepResult r;
  const auto eight = alibi_slopes(8), twelve = alibi_slopes(12);
  auto list = [](const std::vector<double>& v) {
    std::string out;
    for (double x : v) out += (out.empty() ? "" : ", ") + num(x, 4);
    return out;
  };
  double f32_error = 0;  // Bloom's float32 slopes against the exact ones, H = 1..64
  for (int heads = 1; heads <= 64; ++heads) {
    const auto exact = alibi_slopes(heads);
    const auto f32 = alibi_slopes_bloom_f32(heads);
    for (std::size_t i = 0; i < exact.size(); ++i) f32_error = std::max(f32_error, std::fabs(f32[i] - exact[i]) / exact[i]);
  }
  r.lines.push_back({"ALiBi adds no vector: head h subtracts slope_h * (i - j) from the score of query i and key j. "
                     "8 heads: slopes " + list(eight) + ".",
                     "ALiBi 不加任何向量：第 h 个头从查询 i 与键 j 的分数中减去 slope_h * (i - j)。8 个头的斜率：" + list(eight) + "。"});
  r.lines.push_back({"12 heads (not a power of two): the 8 slopes of 8 heads, then every other slope of 16 heads: " +
                     list(twelve) + ". Bloom computes them in float32, within " + num(f32_error, 2) + " of these.",
                     "12 个头（不是 2 的幂）：先取 8 个头的 8 个斜率，再取 16 个头斜率中隔一个的那些：" + list(twelve) +
                     "。Bloom 用 float32 计算，与这些值相差在 " + num(f32_error, 2) + " 以内。"});
  r.claims.push_back({"alibi.bloom_float32",
                      {"Bloom's float32 slopes are the paper's, H = 1..64 (relative)", "Bloom 的 float32 斜率与论文一致，H = 1..64（相对）"},
                      f32_error, 5e-7, true});
  r.claims.push_back(from_check(context, "alibi.translation",
                                {"ALiBi bias(i + s, j + s) = bias(i, j)", "ALiBi bias(i + s, j + s) = bias(i, j)"}));
  plot::HeatmapRequest heat;
  heat.scheme = "alibi";
  heat.count = 32;
  heat.heads = 8;
  draw_heatmap(context, r, "alibi-head0.svg", plot::heatmap_data(heat));
  return r;
}

// 2-D RoPE of the vision towers (Qwen2-VL's VisionRotaryEmbedding, vision_rope.h): half the
// frequencies turn with the patch row, half with the column, so the score depends on (dh, dw).
StepResult rope_2d_step(const StepContext& context) {
  StepResult r;
  constexpr int d = 32, kGrid = 16;
  VisionRopeParams vp;
  vp.head_dim = d;
  const VisionRope vision = vision_rope(vp);
  const RopeApplyParams params = rope_apply_params(vision.inv_freq, 1.0, vision.layout, vision.axis_of_freq);
  std::mt19937_64 rng(2);
  const auto q = uniform_values(rng, d), k = uniform_values(rng, d);
  auto score = [&](std::int64_t qh, std::int64_t qw, std::int64_t kh, std::int64_t kw) {
    return dot(rotated(q, {qh, qw}, 2, params), rotated(k, {kh, kw}, 2, params));
  };
  double shift_error = 0, scale = 0;
  plot::HeatmapSpec heat;
  heat.rows = heat.cols = kGrid;
  for (int kh = 0; kh < kGrid; ++kh)
    for (int kw = 0; kw < kGrid; ++kw) {
      const double here = score(8, 8, kh, kw);
      shift_error = std::max(shift_error, std::fabs(here - score(8 + 5, 8 + 9, kh + 5, kw + 9)));
      scale = std::max(scale, std::fabs(here));
      heat.values.push_back(here);
    }
  shift_error /= scale;
  const double along_w = score(8, 8, 8, 11), along_h = score(8, 8, 11, 8);
  heat.title = "2-D RoPE score of a query at patch (8, 8) with a key at each patch";
  heat.row_label = "key patch row";
  heat.col_label = "key patch column";
  r.lines.push_back({"In a vision tower each patch has two positions, its row and its column. 2-D RoPE gives " +
                     std::to_string(d / 4) + " frequencies to the row and " + std::to_string(d / 4) +
                     " to the column (head_dim 32), so a query and a key 3 patches apart across (score " + num(along_w) +
                     ") or down (score " + num(along_h) + ") are told apart.",
                     "视觉模型中每个图块有两个位置：行和列。2-D RoPE 把 " + std::to_string(d / 4) + " 个频率给行，" +
                     std::to_string(d / 4) + " 个给列（head_dim 32），所以横向相隔 3 个图块（分数 " + num(along_w) +
                     "）和纵向相隔 3 个图块（分数 " + num(along_h) + "）的查询与键可以区分。"});
  r.lines.push_back({"Move both by (5, 9) patches and every score stays (largest change " + under(shift_error) +
                     " of the largest score): the score depends on (row difference, column difference) only.",
                     "把两者同时移动 (5, 9) 个图块，每个分数都不变（最大变化为最大分数的 " + num(shift_error, 2) +
                     "）：分数只取决于（行差，列差）。"});
  r.lines.push_back({"Each tower's own rule (which frequencies read the row, how channels pair, Qwen2-VL, Pixtral, "
                     "Llama 4, Gemma 4, MoonViT): `posenc freqs --vision qwen2_vl --head-dim 80`, or `--vision --config "
                     "config.json` for a model's vision_config.",
                     "每个视觉塔自己的规则（哪些频率读行、通道如何配对；Qwen2-VL、Pixtral、Llama 4、Gemma 4、MoonViT）："
                     "`posenc freqs --vision qwen2_vl --head-dim 80`，或用 `--vision --config config.json` 读取模型的 vision_config。"});
  r.claims.push_back({"rope2d.relative",
                      {"the 2-D score is unchanged when both patches move together", "两个图块一起移动时二维分数不变"},
                      shift_error, 1e-5, true});
  r.claims.push_back(from_check(context, "mrope.text",
                                {"M-RoPE with equal T, H, W ids is 1-D RoPE", "T、H、W 位置相同时 M-RoPE 即一维 RoPE"}));
  draw_heatmap(context, r, "rope-2d.svg", heat);
  return r;
}

}  // namespace posenc::cli::tour
