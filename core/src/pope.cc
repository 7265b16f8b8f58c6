#include "posenc/pope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/rope_params.h"

namespace posenc {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr int kMaxDim = 65536;

// softplus(x) = log(1 + e^x), as torch's (threshold 20: x itself above it, where log1p(e^x) and x
// agree to double rounding).
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

double clamped_delta(const double* delta, int j) { return delta ? std::clamp(delta[j], -kTwoPi, 0.0) : 0.0; }

}  // namespace

void validate(const PopeParams& p) {
  if (p.dim < 1 || p.dim > kMaxDim) throw Error("PoPE dim must be in [1, 65536], got " + std::to_string(p.dim));
  if (!(std::isfinite(p.base) && p.base > 0)) throw Error("PoPE base must be a finite number > 0, got " + format_number(p.base));
}

std::vector<double> pope_frequencies(const PopeParams& p) {
  validate(p);
  std::vector<double> w(static_cast<std::size_t>(p.dim));
  for (int j = 0; j < p.dim; ++j) w[static_cast<std::size_t>(j)] = 1.0 / std::pow(p.base, static_cast<double>(j) / p.dim);
  return w;
}

void pope_row(const PopeParams& p, const double* x, std::int64_t position, const double* delta, double* out) {
  const std::vector<double> w = pope_frequencies(p);
  if (position < 0 || position > kMaxPosition)
    throw Error("PoPE position must be in [0, 2^31-1], got " + std::to_string(position));
  for (int j = 0; j < p.dim; ++j) {
    if (!std::isfinite(x[j])) throw Error("PoPE input channel " + std::to_string(j) + " is not finite: " + format_number(x[j]));
    if (delta && !std::isfinite(delta[j]))
      throw Error("PoPE delta channel " + std::to_string(j) + " is not finite: " + format_number(delta[j]));
    // p w_j to double rounding, reduced before the bias is added, as Python's and the libtorch
    // module's phases are.
    const double phase = std::fmod(static_cast<double>(position) * w[static_cast<std::size_t>(j)], kTwoPi) + clamped_delta(delta, j);
    const double magnitude = softplus(x[j]);
    out[j] = magnitude * std::cos(phase);
    out[p.dim + j] = magnitude * std::sin(phase);
  }
}

double pope_score(const PopeParams& p, const double* q, std::int64_t m, const double* k, std::int64_t n, const double* delta) {
  const std::vector<double> w = pope_frequencies(p);
  double sum = 0;
  for (int j = 0; j < p.dim; ++j)
    sum += softplus(q[j]) * softplus(k[j]) *
           std::cos(std::fmod(static_cast<double>(m - n) * w[static_cast<std::size_t>(j)], kTwoPi) - clamped_delta(delta, j));
  return sum;
}

}  // namespace posenc
