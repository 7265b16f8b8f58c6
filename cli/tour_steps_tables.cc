// The tour's steps about position tables with a fixed size: a learned absolute table has no row
// past its length (and what resizing it does), and DeBERTa's log-bucketed relative positions.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/learned.h"
#include "posenc/sinusoidal.h"
#include "tour_steps.h"

namespace posenc::cli::tour {
namespace {

// Mean L2 distance between rows p and p + 1 of a learned table.
double mean_step(const LearnedTable& t) {
  double s = 0;
  for (int p = 0; p + 1 < t.num_positions; ++p) {
    double d2 = 0;
    for (int c = 0; c < t.dim; ++c) {
      const double diff = static_cast<double>(t.weight[(p + 1) * t.dim + c]) - t.weight[p * t.dim + c];
      d2 += diff * diff;
    }
    s += std::sqrt(d2);
  }
  return s / (t.num_positions - 1);
}

}  // namespace

plot::HeatmapSpec table_heatmap(const LearnedTable& t, std::string title) {
  plot::HeatmapSpec h;
  h.rows = t.num_positions;
  h.cols = t.dim;
  h.values.assign(t.weight.begin(), t.weight.end());
  h.title = std::move(title);
  h.row_label = "position (table row)";
  h.col_label = "dimension";
  return h;
}

// A learned table (GPT-2's wpe, BERT's position_embeddings) is an nn.Embedding of max_positions
// rows: position max_positions has no row to look up (GPT-2 fails with an index error). Vision
// models resize the table instead (timm resample_abs_pos_embed, HF ViT interpolate_pos_encoding:
// F.interpolate; 1-D here, linear with half-pixel centres as learned.h documents), which stretches
// the learned positions over the longer length rather than teaching new ones.
StepResult learned_length_step(const StepContext& context) {
  StepResult r;
  constexpr int kTrained = 16, kLonger = 32, d = 32;
  const LearnedTable table = learned_init(kTrained, d, kLearnedInitStd, 5);
  std::string refusal;
  std::vector<float> row(d);
  const std::int64_t past_end = kTrained;
  try {
    learned_lookup(table, &past_end, 1, 0, row.data());
  } catch (const Error& e) {
    refusal = e.what();
  }
  const LearnedTable longer = learned_interpolate(table, kLonger);
  double ends = 0;  // half-pixel centres keep the first and last rows exactly
  for (int c = 0; c < d; ++c)
    ends = std::max({ends, std::fabs(static_cast<double>(longer.weight[c]) - table.weight[c]),
                     std::fabs(static_cast<double>(longer.weight[(kLonger - 1) * d + c]) - table.weight[(kTrained - 1) * d + c])});
  const double step_ratio = mean_step(longer) / mean_step(table);
  const auto sinus = sinusoidal_table({d}, {0, kTrained, 4 * kTrained});
  r.lines.push_back({"A learned table trained at length 16 (16 rows, d = 32) has no row for position 16: posenc's lookup "
                     "refuses it (\"" + refusal + "\"), as GPT-2's wpe raises an index error. Nothing was ever trained "
                     "there, so there is nothing to extrapolate.",
                     "在长度 16 上训练的可学习位置表（16 行，d = 32）没有位置 16 这一行：posenc 的查表拒绝它（\"" + refusal +
                     "\"），就像 GPT-2 的 wpe 会报索引错误。那里从未被训练过，所以无从外推。"});
  r.lines.push_back({"The sinusoid has a row for any position (PE(16) and PE(64) are computed like PE(0): |PE(64)| = " +
                     num(std::sqrt(std::inner_product(sinus.begin() + 2 * d, sinus.end(), sinus.begin() + 2 * d, 0.0)), 4) +
                     "); whether a trained model uses them well is an experiment: the learned-vs-sinusoidal step runs it.",
                     "正弦编码对任何位置都有一行（PE(16)、PE(64) 与 PE(0) 的算法相同：|PE(64)| = " +
                     num(std::sqrt(std::inner_product(sinus.begin() + 2 * d, sinus.end(), sinus.begin() + 2 * d, 0.0)), 4) +
                     "）；训练后的模型能否用好它们是一个实验问题：learned-vs-sinusoidal 一步会运行它。"});
  r.lines.push_back({"Resizing the table to 32 rows the way ViT and timm do (linear, half-pixel centres) keeps the first "
                     "and last rows and fills the rest by blending neighbours: adjacent rows are now " + num(step_ratio, 3) +
                     " times as far apart as before (0.5 for a smooth table; less for these random rows, where a blend "
                     "crosses a row). Row 2p now holds about what row p held: the learned positions are stretched "
                     "(position interpolation), no new ones are learned, which is why resized models are fine-tuned.",
                     "像 ViT 和 timm 那样把表线性插值到 32 行（半像素中心）：首行和末行不变，其余由相邻行混合而成；相邻行之间的距离变为原来的 " +
                     num(step_ratio, 3) + " 倍（平滑的表为 0.5；这些随机行更小，因为混合会跨过一行）。第 2p 行现在大约是原来第 p "
                     "行的内容：学到的位置被拉伸了（位置插值），并没有学到新的位置，所以这样缩放后的模型需要微调。"});
  r.claims.push_back({"learned.no_row_past_length",
                      {"the lookup of position 16 in a 16-row table is refused", "在 16 行的表中查位置 16 被拒绝"},
                      refusal.find("position 16") != std::string::npos ? 1.0 : 0.0, 1, false});
  r.claims.push_back({"learned.resize_keeps_ends",
                      {"the resized table keeps the first and last rows", "缩放后的表保留首行和末行"}, ends, 0, true});
  r.claims.push_back({"learned.resize_closer_rows",
                      {"resized to twice the length, adjacent rows are at most about half as far apart",
                       "缩放到两倍长度后，相邻行的距离至多约为原来的一半"},
                      step_ratio, 0.55, true});
  draw_heatmap(context, r, "learned-16.svg", table_heatmap(table, "A learned table of 16 positions (initial values, N(0, 0.02))"));
  draw_heatmap(context, r, "learned-resized-32.svg",
               table_heatmap(longer, "The same table resized to 32 positions (linear, half-pixel centres)"));
  return r;
}

// DeBERTa (He et al. 2021; HF DeBERTa-v2's make_log_bucket_position): delta = i - j is kept as
// it is up to mid = position_buckets / 2, then log-spaced up to max_relative_positions, so far
// distances share a bucket (deberta.h has the formula).
StepResult deberta_buckets_step(const StepContext& context) {
  StepResult r;
  constexpr int kLength = 128;
  const DebertaRelativeParams params{16, 128};
  const auto rel = deberta_relative_positions(kLength, kLength, params);
  const int mid = params.position_buckets / 2;
  std::int64_t exact_error = 0, odd_error = 0;
  std::set<std::int64_t> distinct;
  plot::HeatmapSpec heat;
  heat.rows = heat.cols = kLength;
  for (int i = 0; i < kLength; ++i)
    for (int j = 0; j < kLength; ++j) {
      const std::int64_t b = rel[i * kLength + j], delta = i - j;
      if (std::abs(delta) <= mid) exact_error = std::max(exact_error, std::abs(b - delta));
      odd_error = std::max(odd_error, std::abs(b + rel[j * kLength + i]));
      distinct.insert(b);
      heat.values.push_back(static_cast<double>(b));
    }
  auto bucket = [&](std::int64_t delta) {
    return std::to_string(deberta_log_bucket(delta, params.position_buckets, params.max_relative_positions));
  };
  auto v3 = [](std::int64_t delta) { return std::to_string(deberta_log_bucket(delta, 256, 512)); };
  heat.title = "DeBERTa relative position of query i to key j (16 buckets, max 128)";
  heat.row_label = "query i";
  heat.col_label = "key j";
  r.lines.push_back({"DeBERTa scores content with relative position delta = i - j, kept exact up to " + std::to_string(mid) +
                     " (position_buckets 16, max_relative_positions 128) and log-bucketed beyond: delta 8 -> " + bucket(8) +
                     ", 16 -> " + bucket(16) + ", 32 -> " + bucket(32) + ", 64 -> " + bucket(64) + ", 127 -> " + bucket(127) +
                     "; 128 x 128 token pairs use " + std::to_string(distinct.size()) + " distinct values.",
                     "DeBERTa 用相对位置 delta = i - j 给内容打分，|delta| <= " + std::to_string(mid) +
                     " 时保持精确（position_buckets 16，max_relative_positions 128），更远处按对数分桶：delta 8 -> " + bucket(8) +
                     "，16 -> " + bucket(16) + "，32 -> " + bucket(32) + "，64 -> " + bucket(64) + "，127 -> " + bucket(127) +
                     "；128 x 128 个词元对只用到 " + std::to_string(distinct.size()) + " 个不同的值。"});
  r.lines.push_back({"DeBERTa-v3's own settings (256 buckets, 512) keep every distance up to 128 exact and put delta 1000 in "
                     "bucket " + v3(1000) + " and 10000 in " + v3(10000) + ": far tokens are told apart only coarsely.",
                     "DeBERTa-v3 自己的设置（256 个桶，512）让 128 以内的距离都精确，delta 1000 落在桶 " + v3(1000) +
                     "，10000 落在桶 " + v3(10000) + "：远处的词元只能被粗略地区分。"});
  r.claims.push_back({"deberta.exact_near",
                      {"|delta| <= position_buckets / 2 is kept exactly", "|delta| <= position_buckets / 2 时保持精确"},
                      static_cast<double>(exact_error), 0, true});
  r.claims.push_back({"deberta.odd_symmetric",
                      {"the bucket of j - i is minus the bucket of i - j", "j - i 的桶等于 i - j 的桶取负"},
                      static_cast<double>(odd_error), 0, true});
  r.claims.push_back({"deberta.fits_span",
                      {"every pair falls in one of the 2 x 16 rows of the relative table", "每个词元对都落在相对表的 2 x 16 行之一"},
                      static_cast<double>(distinct.size()), 2.0 * params.position_buckets, true});
  draw_heatmap(context, r, "deberta-buckets.svg", heat);
  return r;
}

}  // namespace posenc::cli::tour
