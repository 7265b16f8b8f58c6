#include "posenc/rope_schedule.h"

#include "inv_freq.h"
#include "posenc/seq_len.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {


// YaRN correction dimension for `rotations` full turns within `orig` tokens (double, as HF).
double correction_dim(double rotations, int d, double theta, double orig) {
  return d * std::log(orig / (rotations * 2 * kPi)) / (2 * std::log(theta));
}

std::array<double, 2> correction_range(const RopeParams& p, int d) {
  const double orig = static_cast<double>(resolved_original_max(p));
  double low = correction_dim(p.beta_fast, d, p.theta, orig);
  double high = correction_dim(p.beta_slow, d, p.theta, orig);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  // Clipped to d-1 although i runs to d/2-1: exactly as the YaRN reference code.
  return {std::max(low, 0.0), std::min(high, static_cast<double>(d - 1))};
}

template <typename T>
std::vector<T> yarn_inv_freq(const RopeParams& p, int d, double factor, std::array<double, 2> range) {
  const int half = d / 2;
  double low = range[0], high = range[1];
  if (low == high) high += 0.001;  // HF: prevents a zero-width ramp
  std::vector<T> inv(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    const T pos = std::pow(static_cast<T>(p.theta), static_cast<T>(2 * i) / static_cast<T>(d));
    const T extrapolation = T(1) / pos;
    const T interpolation = T(1) / (static_cast<T>(factor) * pos);
    const T ramp = std::clamp((static_cast<T>(i) - static_cast<T>(low)) / static_cast<T>(high - low), T(0), T(1));
    const T keep = T(1) - ramp;  // weight of the original frequency
    inv[static_cast<std::size_t>(i)] = interpolation * (T(1) - keep) + extrapolation * keep;
  }
  return inv;
}

template <typename T>
std::vector<T> llama3_inv_freq(const RopeParams& p, int d, double factor) {
  std::vector<T> inv = default_inv_freq<T>(p.theta, d, d / 2);
  const double orig = static_cast<double>(resolved_original_max(p));
  const double lff = *p.low_freq_factor, hff = *p.high_freq_factor;
  const T low_wavelen = static_cast<T>(orig / lff);   // longer than this: divided by factor
  const T high_wavelen = static_cast<T>(orig / hff);  // shorter than this: unchanged
  for (T& f : inv) {
    const T wavelen = static_cast<T>(2 * kPi) / f;
    const T scaled = wavelen > low_wavelen ? f / static_cast<T>(factor) : f;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);  // closed band
    if (medium) {
      const T smooth = (static_cast<T>(orig) / wavelen - static_cast<T>(lff)) / static_cast<T>(hff - lff);
      f = (T(1) - smooth) * scaled / static_cast<T>(factor) + smooth * scaled;
    } else {
      f = scaled;
    }
  }
  return inv;
}

template <typename T>
std::vector<T> longrope_inv_freq(const RopeParams& p, int d, const std::vector<double>& ext) {
  std::vector<T> inv(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) {
    const T pos = std::pow(static_cast<T>(p.theta), static_cast<T>(2 * i) / static_cast<T>(d));
    inv[static_cast<std::size_t>(i)] = T(1) / (static_cast<T>(ext[static_cast<std::size_t>(i)]) * pos);
  }
  return inv;
}

// NTK-aware base: theta * s^(d/(d-2)) (static), or with s replaced by the dynamic length ratio.
double ntk_base(double theta, double scale, int d) {
  return theta * std::pow(scale, static_cast<double>(d) / (d - 2));
}

template <typename T>
std::vector<T> divide(std::vector<T> v, double factor) {
  for (T& x : v) x = x / static_cast<T>(factor);
  return v;
}

template <typename T>
void fill_schedule(const RopeParams& p, std::optional<std::int64_t> seq_len, RopeSchedule& s) {
  const int d = p.rotated_dim();
  std::vector<T> inv;
  s.base = p.theta;
  switch (p.type) {
    case RopeType::kDefault:
      inv = default_inv_freq<T>(p.theta, d, d / 2);
      break;
    case RopeType::kLinear:
      inv = divide(default_inv_freq<T>(p.theta, d, d / 2), *p.factor);
      break;
    case RopeType::kNtk:
      s.base = ntk_base(p.theta, *p.factor, d);
      inv = default_inv_freq<T>(s.base, d, d / 2);
      break;
    case RopeType::kDynamic: {
      // HF: L = max(seq_len, max_position_embeddings); at L = max_pos this is the default RoPE.
      const double max_pos = static_cast<double>(*p.max_position_embeddings);
      const double len = std::max(static_cast<double>(seq_len.value_or(0)), max_pos);
      const double f = *p.factor;
      s.base = ntk_base(p.theta, f * len / max_pos - (f - 1), d);
      // HunYuan (modeling_hunyuan_v1_dense.py HunYuanDenseV1RotaryEmbedding.__init__, :311-341):
      // base = theta * alpha^(d/(d-2)), attention 1. Its forward keeps @dynamic_rope_update, which
      // past max_position_embeddings recomputes RU _compute_dynamic_ntk_parameters: no alpha.
      if (p.alpha && len <= max_pos) s.base = ntk_base(p.theta, *p.alpha, d);
      inv = default_inv_freq<T>(s.base, d, d / 2);
      break;
    }
    case RopeType::kYarn:
    case RopeType::kNtkByParts: {
      const double factor = resolved_factor(p);
      s.correction_range = correction_range(p, d);
      inv = yarn_inv_freq<T>(p, d, factor, *s.correction_range);
      if (p.type == RopeType::kYarn) {
        if (p.attention_factor) {
          s.attention_factor = *p.attention_factor;
        } else if (p.mscale.value_or(0) != 0 && p.mscale_all_dim.value_or(0) != 0) {
          // Both truthy (DeepSeek): the ratio. mscale alone is ignored, as in HF.
          s.attention_factor = yarn_get_mscale(factor, *p.mscale) / yarn_get_mscale(factor, *p.mscale_all_dim);
        } else {
          s.attention_factor = yarn_get_mscale(factor);
        }
      }
      break;
    }
    case RopeType::kLlama3:
      inv = llama3_inv_freq<T>(p, d, *p.factor);
      break;
    case RopeType::kLongRope: {
      const double factor = resolved_factor(p);
      const double orig = static_cast<double>(resolved_original_max(p));
      s.uses_long_factors = seq_len && static_cast<double>(*seq_len) > orig;
      inv = longrope_inv_freq<T>(p, d, s.uses_long_factors ? p.long_factor : p.short_factor);
      s.attention_factor = p.attention_factor ? *p.attention_factor
                           : factor <= 1      ? 1.0
                                              : std::sqrt(1 + std::log(factor) / std::log(orig));
      break;
    }
    case RopeType::kProportional: {
      // The exponent runs over head_dim, not the rotated dim; the rest are zero frequencies
      // (identity rotations), so the table always spans head_dim.
      const int rotated = static_cast<int>(p.partial_rotary_factor * p.head_dim / 2);
      inv = default_inv_freq<T>(p.theta, p.head_dim, rotated);
      inv.resize(static_cast<std::size_t>(p.head_dim / 2), T(0));
      inv = divide(std::move(inv), resolved_factor(p));
      s.rotated_dim = 2 * rotated;
      break;
    }
  }
  s.inv_freq.assign(inv.begin(), inv.end());
}

// Every frequency finite (HF would compute inf or NaN: float32 overflow of 1/theta^(2i/d) for
// rope_theta near 0 or of inv_freq/factor for a factor near 0; llama3 with equal bands when a
// wavelength sits exactly on the band edge, 0/0 in the smooth interpolation).
void require_finite(const RopeParams& p, const RopeSchedule& s) {
  for (std::size_t i = 0; i < s.inv_freq.size(); ++i) {
    if (std::isfinite(s.inv_freq[i])) continue;
    std::string why = "rope_theta " + format_number(p.theta) +
                      (p.factor ? " and factor " + format_number(*p.factor) : std::string()) +
                      " make a frequency overflow float32";
    if (std::isnan(s.inv_freq[i]) && p.type == RopeType::kLlama3 && p.low_freq_factor == p.high_freq_factor)
      why = "low_freq_factor == high_freq_factor and this wavelength lies exactly on the band edge: the smooth "
            "interpolation divides 0 by 0, as in HF";
    throw Error("inv_freq[" + std::to_string(i) + "] is " + format_number(s.inv_freq[i]) + ", not a finite frequency: " +
                why + " (" + std::string("rope_type '") + to_string(p.type) + "')");
  }
}

// Clipped RoPE (Li et al. 2026, arXiv 2602.05258, the soft and hard clipping of the lowest
// frequencies): the last n of the `frequencies` rotated ones, inv_freq[F - n + k], k = 0 .. n-1,
// times (1 + cos(pi k / (n - 1))) / 2 (computed in double, rounded once to float32), or 0 when
// hard. The taper ends at 0, so soft clipping zeroes one frequency and hard clipping n; the
// zeros leave the rotated prefix (rotated_dim), as proportional's do.
void clip_low_frequencies(const RopeParams& p, RopeSchedule& s, int frequencies) {
  const int n = p.clip_low;
  if (n == 0) return;
  for (int k = 0; k < n; ++k) {
    float& w = s.inv_freq[static_cast<std::size_t>(frequencies - n + k)];
    const double taper = p.clip_hard || k == n - 1 ? 0.0 : 0.5 * (1 + std::cos(kPi * k / (n - 1)));
    w = static_cast<float>(static_cast<double>(w) * taper);
  }
  s.rotated_dim = 2 * (frequencies - (p.clip_hard ? n : 1));
}

}  // namespace

std::int64_t max_accurate_position(const RopeSchedule& s) {
  double fastest = 0;
  for (float w : s.inv_freq) fastest = std::max(fastest, static_cast<double>(w));
  if (!(fastest > 0)) return kMaxPosition;
  const double limit = std::floor(kMaxRopeAngle / fastest);
  return limit >= static_cast<double>(kMaxPosition) ? kMaxPosition : static_cast<std::int64_t>(limit);
}

void check_angle_range(const RopeSchedule& s, std::int64_t max_position) {
  const std::int64_t limit = max_accurate_position(s);
  if (max_position <= limit) return;
  std::size_t fastest = 0;
  for (std::size_t i = 1; i < s.inv_freq.size(); ++i)
    if (s.inv_freq[i] > s.inv_freq[fastest]) fastest = i;
  const double w = s.inv_freq[fastest];
  throw Error("position " + std::to_string(max_position) + " x inv_freq[" + std::to_string(fastest) + "] = " +
              format_number(w) + " is an angle of " + format_number(static_cast<double>(max_position) * w) +
              " radians, beyond the 2^31 whose cos/sin posenc computes accurately; this schedule (rope_theta < 1 or "
              "a factor < 1 make frequencies above 1) is accurate up to position " + std::to_string(limit));
}

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double deepseek_softmax_scale_multiplier(const RopeParams& p) {
  if (p.type == RopeType::kDefault || p.mscale_all_dim.value_or(0) == 0) return 1.0;
  const double m = yarn_get_mscale(resolved_factor(p), *p.mscale_all_dim);
  return m * m;
}

double wavelength(double inv_freq) { return inv_freq > 0 ? 2 * kPi / inv_freq : std::numeric_limits<double>::infinity(); }

RopeSchedule compute_schedule(const RopeParams& params, std::optional<std::int64_t> seq_len,
                              Numerics numerics) {
  validate(params);
  // A sequence's length is its last position + 1: positions reach kMaxPosition, so lengths reach
  // 2^31 (golden and RopeRuntime at position 2^31-1 asked for a length the user never gave).
  if (seq_len) check_seq_len(*seq_len, "seq_len");
  RopeSchedule s;
  s.type = params.type;
  s.head_dim = params.head_dim;
  s.seq_len = seq_len;
  s.rotated_dim = params.type == RopeType::kProportional ? 0 : params.rotated_dim();
  if (numerics == Numerics::kHfFloat32)
    fill_schedule<float>(params, seq_len, s);
  else
    fill_schedule<double>(params, seq_len, s);
  s.rotary_dim = 2 * static_cast<int>(s.inv_freq.size());

  const int d = params.type == RopeType::kProportional ? params.head_dim : params.rotated_dim();
  const auto base = default_inv_freq<double>(params.theta, d, s.rotary_dim / 2);
  s.base_inv_freq.assign(base.begin(), base.end());
  if (params.type == RopeType::kProportional)
    std::fill(s.base_inv_freq.begin() + s.rotated_dim / 2, s.base_inv_freq.end(), 0.0f);
  clip_low_frequencies(params, s, s.rotated_dim / 2);  // base_inv_freq stays unclipped: the table's scale column
  require_finite(params, s);
  return s;
}

}  // namespace posenc
