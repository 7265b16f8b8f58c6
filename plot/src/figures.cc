#include "posenc_plot/figures.h"

#include <cmath>
#include <limits>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/learned.h"
#include "posenc/properties.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_xpos.h"
#include "posenc/sinusoidal.h"
#include "posenc/transformer_xl.h"
#include "posenc_plot/bias_curves.h"

namespace posenc::plot {
namespace {

constexpr std::int64_t kMaxTableValues = std::int64_t{1} << 26;  // 256 MiB of float32

}  // namespace

HeatmapSpec heatmap_data(const HeatmapRequest& r) {
  if (r.count < 1 || r.count > 4096 || r.first < 0 || r.first + r.count > kMaxPosition)
    throw Error("heatmap positions: count must be in [1, 4096] and positions in [0, 2^31-1]");
  if (r.dim < 1 || r.dim > 4096) throw Error("heatmap dim must be in [1, 4096], got " + std::to_string(r.dim));
  HeatmapSpec s;
  s.row_first = static_cast<double>(r.first);
  const std::int64_t n = r.count;
  std::vector<std::int64_t> positions;
  for (std::int64_t i = 0; i < n; ++i) positions.push_back(r.first + i);
  if (r.scheme == "sinusoidal" || r.scheme == "learned" || r.scheme == "xl") {
    // learned and xl build their table from row 0 up to the last row shown.
    if ((r.scheme == "learned" || r.scheme == "xl") && (r.first + n) * r.dim > kMaxTableValues)
      throw Error("heatmap --scheme " + r.scheme + " builds rows 0 .. " + std::to_string(r.first + n - 1) + " of dim " +
                  std::to_string(r.dim) + ": more than " + std::to_string(kMaxTableValues) +
                  " values (2^26); start the positions lower or use a smaller --dim");
    std::vector<float> t;
    if (r.scheme == "sinusoidal") {
      t = sinusoidal_table({r.dim, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, r.base}, positions);
      s.title = "Sinusoidal encoding (interleaved sin/cos, base " + format_number(r.base) + ")";
    } else if (r.scheme == "learned") {
      const LearnedTable table = learned_init(static_cast<int>(r.first + n), r.dim, 0.02, r.seed);
      t.assign(table.weight.begin() + r.first * r.dim, table.weight.end());
      s.title = "Learned positions at initialisation (N(0, 0.02), seed " + std::to_string(r.seed) + ")";
    } else {
      // Rows of xl_relative_sinusoid run from distance first+n-1 down to 0; show first .. first+n-1.
      const auto table = xl_relative_sinusoid(r.dim, static_cast<int>(r.first + n));
      for (std::int64_t d = 0; d < n; ++d) {
        const auto row = table.begin() + (n - 1 - d) * r.dim;
        t.insert(t.end(), row, row + r.dim);
      }
      s.title = "Transformer-XL relative sinusoid R (halves: sin | cos)";
    }
    s.rows = static_cast<int>(n);
    s.cols = r.dim;
    s.values.assign(t.begin(), t.end());
    s.row_label = r.scheme == "xl" ? "relative distance" : "position";
    s.col_label = "dimension";
    return s;
  }
  if (r.scheme == "rope") {
    RopeParams p;
    p.head_dim = r.dim;
    p.theta = r.base;
    const RopeSchedule sched = compute_schedule(p);
    check_angle_range(sched, r.first + n - 1);
    const RopeApplyParams ap = rope_apply_params(sched);
    const int half = static_cast<int>(sched.inv_freq.size());
    s.rows = static_cast<int>(n);
    s.cols = 2 * half;
    for (std::int64_t pos : positions)
      for (int j = 0; j < 2 * half; ++j) {
        float c, sn;
        rope_cos_sin(sched.inv_freq[static_cast<std::size_t>(j % half)], pos, ap, &c, &sn);
        s.values.push_back(j < half ? c : sn);
      }
    s.title = "RoPE: cos (left) and sin (right) of p * w_j, base " + format_number(r.base);
    s.row_label = "position";
    s.col_label = "frequency (cos | sin)";
    return s;
  }
  if (r.scheme == "alibi" || r.scheme == "t5") {
    if (r.head < 0 || r.head >= r.heads) throw Error("--head must be in [0, heads), got " + std::to_string(r.head));
    s.rows = s.cols = static_cast<int>(n);
    s.col_first = static_cast<double>(r.first);
    const double slope = r.scheme == "alibi" ? alibi_slopes(r.heads)[static_cast<std::size_t>(r.head)] : 0;
    if (r.scheme == "t5") validate(r.t5);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        if (r.scheme == "alibi")
          s.values.push_back(j > i ? std::numeric_limits<double>::quiet_NaN() : -slope * static_cast<double>(i - j));
        else
          s.values.push_back(t5_bucket(j - i, r.t5));
      }
    s.title = r.scheme == "alibi" ? "ALiBi bias, head " + std::to_string(r.head) + " of " + std::to_string(r.heads) +
                                        " (slope " + format_number(slope) + "; future keys masked)"
                                  : std::string("T5 bucket of key - query (") + (r.t5.bidirectional ? "bidirectional" : "causal") +
                                        ", " + std::to_string(r.t5.num_buckets) + " buckets, max distance " +
                                        std::to_string(r.t5.max_distance) + ")";
    s.row_label = "query position";
    s.col_label = "key position";
    return s;
  }
  throw Error("plot heatmap: --scheme '" + r.scheme + "' must be sinusoidal, learned, rope, alibi, t5 or xl");
}

WavelengthData wavelength_data(const RopeParams& params, const std::string& title) {
  const RopeSchedule s = compute_schedule(params);
  WavelengthData w;
  w.title = title;
  for (std::size_t i = 0; i < s.inv_freq.size(); ++i) {
    w.index.push_back(static_cast<double>(i));
    // NaN, not infinity, for a channel that does not rotate: the chart leaves a gap.
    w.base.push_back(s.base_inv_freq[i] > 0 ? wavelength(s.base_inv_freq[i]) : std::nan(""));
    w.scaled.push_back(s.inv_freq[i] > 0 ? wavelength(s.inv_freq[i]) : std::nan(""));
  }
  if (params.original_max_position_embeddings) w.original_context = static_cast<double>(*params.original_max_position_embeddings);
  else if (params.max_position_embeddings) w.original_context = static_cast<double>(*params.max_position_embeddings);
  if (s.correction_range) w.bands.push_back({(*s.correction_range)[0], (*s.correction_range)[1], "YaRN ramp"});
  if (params.type == RopeType::kLlama3) {
    const double orig = static_cast<double>(resolved_original_max(params));
    const double low_wl = orig / *params.low_freq_factor, high_wl = orig / *params.high_freq_factor;
    double from = -1, to = -1;
    for (std::size_t i = 0; i < w.base.size(); ++i)
      if (w.base[i] >= high_wl && w.base[i] <= low_wl) {
        if (from < 0) from = static_cast<double>(i);
        to = static_cast<double>(i);
      }
    if (from >= 0) w.bands.push_back({from, to, "llama3 smooth band"});
  }
  return w;
}

std::string wavelength_svg(const WavelengthData& w) {
  std::vector<Series> series = {{"before scaling", w.index, w.base}};
  bool scaled_differs = false;
  for (std::size_t i = 0; i < w.base.size(); ++i) scaled_differs = scaled_differs || std::fabs(w.scaled[i] - w.base[i]) > 1e-6 * w.base[i];
  if (scaled_differs) series.push_back({"after scaling", w.index, w.scaled});
  ChartOptions o;
  o.title = w.title;
  o.x_label = "frequency index i (pair of channels)";
  o.y_label = "wavelength 2 pi / w_i (tokens, log scale)";
  o.log_y = true;
  o.vbands = w.bands;
  if (w.original_context > 0) o.hlines.push_back({w.original_context, "training context " + format_number(w.original_context)});
  return svg_line_chart(series, o);
}

std::vector<Series> decay_data(const DecayRequest& r) {
  if (is_bias_scheme(r.scheme)) return bias_chart(r).series;
  if (r.max_distance < 2 || r.max_distance > 1 << 20) throw Error("decay max distance must be in [2, 2^20]");
  std::vector<double> d;
  for (std::int64_t x = 1; x <= r.max_distance; x = std::max(x + 1, static_cast<std::int64_t>(x * 1.05))) d.push_back(static_cast<double>(x));
  std::vector<Series> out;
  if (r.scheme == "rope") {
    RopeParams p;
    p.head_dim = r.dim;
    p.theta = r.base;
    const RopeSchedule s = compute_schedule(p);
    Series bound{"RoFormer bound, d=" + std::to_string(r.dim), d, {}};
    for (double x : d) bound.y.push_back(rope_decay_bound(s.inv_freq, x));
    out.push_back(bound);
  } else if (r.scheme == "xpos") {
    // q = k = ones: each pair adds 2 zeta_i^(d/B) cos(d w_i) (RoPE's without the zeta), over the
    // rotary dim d_h: the mean score per channel. zeta_i^(d/B) is the core's query scale at
    // position d with centre 0 (XPosScales), the scale base B = 512 and gamma 0.4 of the paper.
    RopeParams p;
    p.head_dim = r.dim;
    p.theta = r.base;
    const RopeSchedule s = compute_schedule(p);
    const int half = static_cast<int>(s.inv_freq.size());
    const XPosScales scales(XPosParams{512, 0.4, 0}, half);
    XPosScales::Block block;
    std::vector<float> query(static_cast<std::size_t>(half)), key(static_cast<std::size_t>(half));
    Series rope{"RoPE", d, {}}, xpos{"xPos (B = 512, gamma = 0.4)", d, {}};
    for (double x : d) {
      scales.at(static_cast<std::int64_t>(x), query.data(), key.data(), block);
      double plain = 0, scaled = 0;
      for (int i = 0; i < half; ++i) {
        const double c = std::cos(x * s.inv_freq[static_cast<std::size_t>(i)]);
        plain += c;
        scaled += c * query[static_cast<std::size_t>(i)];
      }
      rope.y.push_back(plain / half);
      xpos.y.push_back(scaled / half);
    }
    out.push_back(rope);
    out.push_back(xpos);
  } else if (r.scheme == "alibi") {
    const auto slopes = alibi_slopes(r.heads);
    for (int h = 0; h < r.heads; h += std::max(1, r.heads / 4)) {
      Series line{"head " + std::to_string(h) + " (slope " + format_number(slopes[static_cast<std::size_t>(h)]) + ")", d, {}};
      for (double x : d) line.y.push_back(-slopes[static_cast<std::size_t>(h)] * x);
      out.push_back(line);
    }
  } else if (r.scheme == "sinusoidal") {
    const SinusoidalParams p{r.dim, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, r.base};
    validate(p);  // before sizing rows by r.dim
    std::vector<float> origin(static_cast<std::size_t>(r.dim)), row(static_cast<std::size_t>(r.dim));
    sinusoidal_row(p, 0, origin.data());
    Series dot{"PE(0) . PE(d) / (d_model/2)", d, {}};
    for (double x : d) {
      sinusoidal_row(p, x, row.data());
      double s = 0;
      for (int c = 0; c < r.dim; ++c) s += static_cast<double>(origin[static_cast<std::size_t>(c)]) * row[static_cast<std::size_t>(c)];
      dot.y.push_back(s / (r.dim / 2.0));
    }
    out.push_back(dot);
  } else if (r.scheme == "t5") {
    validate(r.t5);
    Series b{"bucket of -d (learned score per bucket)", d, {}};
    for (double x : d) b.y.push_back(t5_bucket(-static_cast<std::int64_t>(x), r.t5));
    out.push_back(b);
  } else {
    throw Error("plot decay: --scheme '" + r.scheme + "' must be rope, xpos, alibi, t5, sinusoidal, kerple or sandwich");
  }
  return out;
}

std::string decay_svg(const DecayRequest& r) {
  ChartOptions o;
  if (is_bias_scheme(r.scheme)) {  // b(0) = 0 is part of the curve: a linear distance axis from 0
    BiasChart c = bias_chart(r);
    o.title = c.title;
    o.x_label = "relative distance d (tokens)";
    o.y_label = c.y_label;
    return svg_line_chart(c.series, o);
  }
  o.log_x = true;
  o.x_label = "relative distance d (tokens, log scale)";
  o.y_label = r.scheme == "t5" ? "bucket" : r.scheme == "alibi" ? "bias added to the score" : r.scheme == "rope" ? "relative upper bound of the score"
              : r.scheme == "xpos" ? "score of q = k = 1 per channel" : "score";
  // Each title says what is drawn: the x axis is logarithmic, so ALiBi's lines -slope * d are curves here.
  o.title = r.scheme == "rope" ? "RoPE: RoFormer's bound on the score against distance (section 3.4.3)"
            : r.scheme == "xpos" ? "xPos: the score of q = k = 1 against distance, RoPE's beside it (Sun et al. 2022)"
            : r.scheme == "alibi" ? "ALiBi: bias -slope * d, one curve per head (linear in d, log d axis)"
            : r.scheme == "t5" ? "T5: log-spaced buckets beyond the exact range"
                               : "Sinusoidal: dot product of encodings d apart";
  return svg_line_chart(decay_data(r), o);
}

}  // namespace posenc::plot
