#include "posenc/kerple.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "posenc/error.h"

namespace posenc {

void validate(const KerpleParams& p) {
  if (p.r1.empty() || p.r1.size() != p.r2.size())
    throw Error("kerple: r1 and r2 need one value per head, the same count; got " + std::to_string(p.r1.size()) + " and " +
                std::to_string(p.r2.size()));
  const bool power = p.kind == KerpleKind::kPower;
  for (std::size_t h = 0; h < p.r1.size(); ++h) {
    if (!(p.r1[h] > 0) || !std::isfinite(p.r1[h]))
      throw Error("kerple: r1 of head " + std::to_string(h) + " is " + format_number(p.r1[h]) + "; expected a finite number > 0");
    if (!(p.r2[h] > 0) || !std::isfinite(p.r2[h]) || (power && p.r2[h] > 2))
      throw Error("kerple: r2 of head " + std::to_string(h) + " is " + format_number(p.r2[h]) +
                  (power ? "; the power variant expects 0 < r2 <= 2" : "; the log variant expects a finite number > 0"));
  }
}

double kerple_bias_reference(const KerpleParams& p, int head, std::int64_t delta) {
  const double r1 = p.r1.at(static_cast<std::size_t>(head)), r2 = p.r2.at(static_cast<std::size_t>(head));
  const double distance = static_cast<double>(std::llabs(delta));
  if (p.kind == KerpleKind::kLog) return -r1 * std::log(1.0 + r2 * distance);
  return -r1 * std::pow(distance, r2);
}

std::vector<float> kerple_table(const KerpleParams& p, std::int64_t length) {
  validate(p);
  if (length < 1) throw Error("kerple: table length " + std::to_string(length) + " must be >= 1");
  const std::size_t heads = p.r1.size();
  std::vector<float> table(heads * static_cast<std::size_t>(length));
  for (std::size_t h = 0; h < heads; ++h)
    for (std::int64_t d = 0; d < length; ++d) {
      const double distance = static_cast<double>(d);
      // log1p keeps small r2 * |Delta| exact where log(1 + x) would round 1 + x first.
      const double b = p.kind == KerpleKind::kLog ? -p.r1[h] * std::log1p(p.r2[h] * distance) : -p.r1[h] * std::pow(distance, p.r2[h]);
      table[h * static_cast<std::size_t>(length) + static_cast<std::size_t>(d)] = static_cast<float>(b);
    }
  return table;
}

}  // namespace posenc
