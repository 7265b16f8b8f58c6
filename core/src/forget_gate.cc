#include "posenc/forget_gate.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

void check(const float* logits, const ForgetGateShape& s) {
  if (s.batch < 0 || s.heads < 0 || s.tokens < 0)
    throw Error("forget gate: shape [B, H, T] = [" + std::to_string(s.batch) + ", " + std::to_string(s.heads) + ", " +
                std::to_string(s.tokens) + "] must not be negative");
  const std::int64_t n = std::int64_t{s.batch} * s.heads * s.tokens;
  if (n > 0 && !logits) throw Error("forget gate: no logits for a non-empty [B, H, T]");
  for (std::int64_t x = 0; x < n; ++x)
    if (!std::isfinite(logits[x]))
      throw Error("forget gate: logit " + std::to_string(x) + " is " + format_number(logits[x]) + "; expected a finite number");
}

// log sigmoid(z) = -softplus(-z), without overflow for either sign.
double log_sigmoid(double z) { return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }

}  // namespace

void forget_gate_cumulative(const float* logits, const ForgetGateShape& s, float* c) {
  check(logits, s);
  const std::int64_t rows = std::int64_t{s.batch} * s.heads;
  for (std::int64_t row = 0; row < rows; ++row) {
    double sum = 0;
    for (int t = 0; t < s.tokens; ++t) {
      sum += log_sigmoid(logits[row * s.tokens + t]);
      c[row * s.tokens + t] = static_cast<float>(sum);
    }
  }
}

void forget_gate_cumulative_backward(const float* logits, const float* dc, const ForgetGateShape& s, float* dlogits) {
  check(logits, s);
  const std::int64_t rows = std::int64_t{s.batch} * s.heads;
  for (std::int64_t row = 0; row < rows; ++row) {
    double suffix = 0;  // sum_{t >= s} dc_t
    for (int t = s.tokens - 1; t >= 0; --t) {
      suffix += dc[row * s.tokens + t];
      const double z = logits[row * s.tokens + t];
      dlogits[row * s.tokens + t] = static_cast<float>(suffix / (1.0 + std::exp(z)));  // sigmoid(-z)
    }
  }
}

double forget_gate_bias_reference(const float* logits, const ForgetGateShape& s, int b, int h, int i, int j) {
  if (b < 0 || b >= s.batch || h < 0 || h >= s.heads || j < 0 || i < j || i >= s.tokens)
    throw Error("forget gate: (b, h, i, j) = (" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(i) + ", " +
                std::to_string(j) + ") must be inside [B, H, T] with j <= i");
  const float* z = logits + (std::int64_t{b} * s.heads + h) * s.tokens;
  double sum = 0;
  for (int t = j + 1; t <= i; ++t) sum += std::log(1.0 / (1.0 + std::exp(-static_cast<double>(z[t]))));
  return sum;
}

}  // namespace posenc
