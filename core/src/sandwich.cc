#include "posenc/sandwich.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

// 1 / 10000^(2k/d') for k = 1 .. d'/2.
std::vector<double> sandwich_frequencies(int dim) {
  std::vector<double> freq(static_cast<std::size_t>(dim / 2));
  for (int k = 1; k <= dim / 2; ++k) freq[static_cast<std::size_t>(k - 1)] = std::pow(10000.0, -2.0 * k / dim);
  return freq;
}

double head_scale(const SandwichParams& p, int head) { return static_cast<double>(p.heads) / (8.0 * (head + 1)); }

}  // namespace

void validate(const SandwichParams& p) {
  if (p.heads < 1) throw Error("sandwich: heads " + std::to_string(p.heads) + " must be >= 1");
  if (p.dim < 2 || p.dim % 2 != 0) throw Error("sandwich: dim d' " + std::to_string(p.dim) + " must be even and >= 2");
}

double sandwich_bias_reference(const SandwichParams& p, int head, std::int64_t delta) {
  validate(p);
  if (head < 0 || head >= p.heads) throw Error("sandwich: head " + std::to_string(head) + " must be in [0, " + std::to_string(p.heads) + ")");
  double sum = 0;
  for (const double f : sandwich_frequencies(p.dim)) sum += std::cos(static_cast<double>(delta) * f);
  return (sum - p.dim / 2.0) * head_scale(p, head);
}

std::vector<float> sandwich_table(const SandwichParams& p, std::int64_t length) {
  validate(p);
  if (length < 1) throw Error("sandwich: table length " + std::to_string(length) + " must be >= 1");
  const std::vector<double> freq = sandwich_frequencies(p.dim);
  std::vector<float> table(static_cast<std::size_t>(p.heads) * static_cast<std::size_t>(length));
  for (std::int64_t d = 0; d < length; ++d) {
    double sum = 0;  // sum_k (cos(d f_k) - 1)
    for (const double f : freq) {
      const double s = std::sin(0.5 * static_cast<double>(d) * f);
      sum -= 2.0 * s * s;
    }
    for (int h = 0; h < p.heads; ++h)
      table[static_cast<std::size_t>(h) * static_cast<std::size_t>(length) + static_cast<std::size_t>(d)] = static_cast<float>(sum * head_scale(p, h));
  }
  return table;
}

}  // namespace posenc
