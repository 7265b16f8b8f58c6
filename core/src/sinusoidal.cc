#include "posenc/sinusoidal.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

int pair_count(const SinusoidalParams& p) {
  return p.freqs == SinusoidalFreqs::kVaswani ? (p.dim + 1) / 2 : p.dim / 2;
}

// Column of sin_k and cos_k; cos of the last Vaswani pair does not exist for odd d (-1).
struct Columns {
  int sin, cos;
};

Columns columns(const SinusoidalParams& p, int k) {
  if (p.layout == SinusoidalLayout::kInterleaved) {
    const int c = 2 * k + 1;
    return {2 * k, c < p.dim ? c : -1};
  }
  const int sin_cols = pair_count(p);
  const int c = sin_cols + k;
  return {k, c < (p.freqs == SinusoidalFreqs::kVaswani ? p.dim : 2 * sin_cols) ? c : -1};
}

}  // namespace

void validate(const SinusoidalParams& p) {
  if (p.dim < 1 || p.dim > 1 << 20) throw Error("sinusoidal dim must be in [1, 2^20], got " + std::to_string(p.dim));
  if (p.freqs == SinusoidalFreqs::kFairseq && p.dim < 4)
    throw Error("fairseq frequencies exp(-k ln(base)/(d/2-1)) need dim >= 4, got " + std::to_string(p.dim));
  if (!(std::isfinite(p.base) && p.base > 0))
    throw Error("sinusoidal base must be a finite number > 0, got " + format_number(p.base));
}

std::vector<double> sinusoidal_frequencies(const SinusoidalParams& p) {
  validate(p);
  const int n = pair_count(p);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    w[static_cast<std::size_t>(k)] = p.freqs == SinusoidalFreqs::kVaswani
                                         ? std::pow(p.base, -2.0 * k / p.dim)
                                         : std::exp(-k * std::log(p.base) / (p.dim / 2 - 1));
  }
  return w;
}

namespace {

void fill_row(const SinusoidalParams& p, const std::vector<double>& w, double position, float* out) {
  for (int c = 0; c < p.dim; ++c) out[c] = 0.0f;  // fairseq's odd-d pad column stays 0
  for (int k = 0; k < static_cast<int>(w.size()); ++k) {
    const double angle = position * w[static_cast<std::size_t>(k)];
    const Columns col = columns(p, k);
    out[col.sin] = static_cast<float>(std::sin(angle));
    if (col.cos >= 0) out[col.cos] = static_cast<float>(std::cos(angle));
  }
}

}  // namespace

void sinusoidal_row(const SinusoidalParams& p, double position, float* out) {
  fill_row(p, sinusoidal_frequencies(p), position, out);
}

std::vector<float> sinusoidal_table(const SinusoidalParams& p, const std::vector<std::int64_t>& positions) {
  const auto w = sinusoidal_frequencies(p);
  std::vector<float> out(positions.size() * static_cast<std::size_t>(p.dim));
  for (std::size_t r = 0; r < positions.size(); ++r)
    fill_row(p, w, static_cast<double>(positions[r]), out.data() + r * static_cast<std::size_t>(p.dim));
  return out;
}

std::vector<float> sinusoidal_table_by_rotation(const SinusoidalParams& p, std::int64_t start, std::int64_t count,
                                                int reanchor) {
  const auto w = sinusoidal_frequencies(p);
  if (count < 0) throw Error("row count must be >= 0, got " + std::to_string(count));
  if (reanchor < 1) throw Error("reanchor interval must be >= 1, got " + std::to_string(reanchor));
  const std::size_t n = w.size(), d = static_cast<std::size_t>(p.dim);
  std::vector<float> out(static_cast<std::size_t>(count) * d);
  // (s, c) of the current row per pair, in double; R(1) = rotation by w_k.
  std::vector<double> s(n), c(n), step_s(n), step_c(n);
  for (std::size_t k = 0; k < n; ++k) {
    step_s[k] = std::sin(w[k]);
    step_c[k] = std::cos(w[k]);
  }
  for (std::int64_t r = 0; r < count; ++r) {
    const double position = static_cast<double>(start + r);
    if (r % reanchor == 0) {
      for (std::size_t k = 0; k < n; ++k) {
        s[k] = std::sin(position * w[k]);
        c[k] = std::cos(position * w[k]);
      }
    } else {
      for (std::size_t k = 0; k < n; ++k) {  // PE(p+1) = R(1) PE(p): angle addition
        const double s_next = s[k] * step_c[k] + c[k] * step_s[k];
        c[k] = c[k] * step_c[k] - s[k] * step_s[k];
        s[k] = s_next;
      }
    }
    float* row = out.data() + static_cast<std::size_t>(r) * d;
    for (std::size_t c_i = 0; c_i < d; ++c_i) row[c_i] = 0.0f;
    for (std::size_t k = 0; k < n; ++k) {
      const Columns col = columns(p, static_cast<int>(k));
      row[col.sin] = static_cast<float>(s[k]);
      if (col.cos >= 0) row[col.cos] = static_cast<float>(c[k]);
    }
  }
  return out;
}

}  // namespace posenc
