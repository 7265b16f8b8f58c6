#include "posenc/fire.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {

void validate(const FireParams& p) {
  if (p.heads < 1 || p.width < 1)
    throw Error("FIRE: heads " + std::to_string(p.heads) + " and width " + std::to_string(p.width) + " must be >= 1");
  const std::size_t w = static_cast<std::size_t>(p.width), h = static_cast<std::size_t>(p.heads);
  if (p.w1.size() != w || p.b1.size() != w || p.w2.size() != h * w || p.b2.size() != h)
    throw Error("FIRE: the MLP needs w1, b1 [" + std::to_string(w) + "], w2 [" + std::to_string(h) + " x " +
                std::to_string(w) + "], b2 [" + std::to_string(h) + "]");
  for (const auto& [name, v] : {std::pair{"c", p.c}, std::pair{"threshold", p.threshold}, std::pair{"eps", p.eps}})
    if (!std::isfinite(v)) throw Error(std::string("FIRE: ") + name + " must be finite, got " + format_number(v));
  if (!(p.eps > 0)) throw Error("FIRE: eps must be > 0 (c = 0 would divide 0 by it), got " + format_number(p.eps));
}

double fire_input(const FireParams& p, std::int64_t i, std::int64_t j) {
  validate(p);
  const auto psi = [&](double x) { return std::log(std::fabs(p.c * x) + 1.0); };
  const double normaliser = std::max(static_cast<double>(i), std::fabs(p.threshold));
  return psi(static_cast<double>(i - j)) / (psi(normaliser) + p.eps);
}

std::vector<double> fire_bias(const FireParams& p, std::int64_t i, std::int64_t j) {
  const double x = fire_input(p, i, j);
  std::vector<double> hidden(static_cast<std::size_t>(p.width));
  for (std::size_t k = 0; k < hidden.size(); ++k) hidden[k] = std::max(0.0, p.w1[k] * x + p.b1[k]);
  std::vector<double> out(static_cast<std::size_t>(p.heads));
  for (std::size_t h = 0; h < out.size(); ++h) {
    double sum = p.b2[h];
    for (std::size_t k = 0; k < hidden.size(); ++k) sum += p.w2[h * hidden.size() + k] * hidden[k];
    out[h] = sum;
  }
  return out;
}

bool fire_table_covers(const FireParams& p, std::int64_t largest_query_position) {
  validate(p);
  return static_cast<double>(largest_query_position) < std::fabs(p.threshold);
}

std::vector<float> fire_table(const FireParams& p, std::int64_t length) {
  validate(p);
  if (length < 1) throw Error("FIRE: table length " + std::to_string(length) + " must be >= 1");
  const std::size_t n = static_cast<std::size_t>(length);
  std::vector<float> table(static_cast<std::size_t>(p.heads) * n);
  for (std::int64_t d = 0; d < length; ++d) {
    // Query 0 and key -d: the distance d with the normaliser psi(max(L, 0)) = psi(L) every query below L has.
    const std::vector<double> b = fire_bias(p, 0, -d);
    for (std::size_t h = 0; h < b.size(); ++h) table[h * n + static_cast<std::size_t>(d)] = static_cast<float>(b[h]);
  }
  return table;
}

}  // namespace posenc
