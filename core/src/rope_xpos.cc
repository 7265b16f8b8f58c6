#include "posenc/rope_xpos.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {

XPosScales::XPosScales(const XPosParams& xpos, int num_freqs)
    : half_(num_freqs),
      log_zeta_(static_cast<std::size_t>(num_freqs)),
      query_within_(static_cast<std::size_t>(kBlock) * static_cast<std::size_t>(num_freqs)),
      key_within_(query_within_.size()),
      center_floor_(std::floor(xpos.center)),
      center_fraction_(xpos.center - std::floor(xpos.center)) {
  if (num_freqs == 0) return;
  // zeta_i = (2i/d + gamma) / (1 + gamma) with d = 2 num_freqs: (i/num_freqs + gamma) / (1 + gamma).
  for (int i = 0; i < num_freqs; ++i)
    log_zeta_[static_cast<std::size_t>(i)] =
        std::log((static_cast<double>(i) / num_freqs + xpos.gamma) / (1 + xpos.gamma)) / xpos.scale_base;
  for (int r = 0; r < kBlock; ++r)
    for (int i = 0; i < num_freqs; ++i) {
      const std::size_t at = static_cast<std::size_t>(r) * static_cast<std::size_t>(num_freqs) + static_cast<std::size_t>(i);
      query_within_[at] = std::exp(r * log_zeta_[static_cast<std::size_t>(i)]);
      key_within_[at] = std::exp(-r * log_zeta_[static_cast<std::size_t>(i)]);
    }
}

XPosScales::Factors XPosScales::factors(std::int64_t position, Block& block) const {
  // m - floor(c) is an integer (validate_xpos bounds it); split it as 64 a + r, 0 <= r < 64.
  const auto offset = static_cast<std::int64_t>(static_cast<double>(position) - center_floor_);
  const std::int64_t a = offset >= 0 ? offset / kBlock : -((-offset + kBlock - 1) / kBlock);
  const std::size_t r = static_cast<std::size_t>(offset - a * kBlock), half = static_cast<std::size_t>(half_);
  if (!block.valid || block.index != a) {
    block.query.resize(half);
    block.key.resize(half);
    const double power = static_cast<double>(a * kBlock) - center_fraction_;
    for (std::size_t i = 0; i < half; ++i) {
      block.query[i] = std::exp(power * log_zeta_[i]);
      block.key[i] = std::exp(-power * log_zeta_[i]);
    }
    block.index = a;
    block.valid = true;
  }
  return {block.query.data(), block.key.data(), query_within_.data() + r * half, key_within_.data() + r * half};
}

void XPosScales::at(std::int64_t position, float* query, float* key, Block& block) const {
  const Factors f = factors(position, block);
  for (std::size_t i = 0; i < static_cast<std::size_t>(half_); ++i) {
    query[i] = static_cast<float>(f.block_query[i] * f.within_query[i]);
    key[i] = static_cast<float>(f.block_key[i] * f.within_key[i]);
  }
}

void validate_xpos(const XPosParams& x, std::int64_t smallest, std::int64_t largest) {
  if (!x.enabled()) return;
  if (!(std::isfinite(x.scale_base) && x.scale_base > 0))
    throw Error("xPos scale_base must be 0 (off) or a finite number > 0, got " + format_number(x.scale_base));
  if (!(std::isfinite(x.gamma) && x.gamma > 0))
    throw Error("xPos gamma must be a finite number > 0, got " + format_number(x.gamma));
  if (!std::isfinite(x.center)) throw Error("xPos center must be finite, got " + format_number(x.center));
  if (smallest > largest) return;
  // zeta_0 = gamma / (1 + gamma) is the smallest: its power is the largest in magnitude.
  const double log_zeta0 = std::fabs(std::log(x.gamma / (1 + x.gamma)));
  const double reach = kMaxXPosExponent * x.scale_base / log_zeta0;  // the |m - c| allowed
  for (const std::int64_t m : {smallest, largest}) {
    const double distance = static_cast<double>(m) - x.center;
    if (std::fabs(distance) > reach)
      throw Error("xPos at position " + std::to_string(m) + " with center " + format_number(x.center) +
                  " and scale_base " + format_number(x.scale_base) + ": zeta_0^((m - c)/B) = e^" +
                  format_number(-log_zeta0 * distance / x.scale_base) + " is beyond float32 (|exponent| <= " +
                  format_number(kMaxXPosExponent) + "); keep |m - c| <= " + format_number(std::floor(reach)) +
                  " (a centre nearer the positions, or a larger scale_base)");
  }
}

}  // namespace posenc
