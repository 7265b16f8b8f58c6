#include "posenc/rope_params.h"

#include <cmath>
#include <numeric>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

std::string type_name(const RopeParams& p) { return std::string("rope_type '") + to_string(p.type) + "'"; }

void require_positive(const char* key, double value) {
  if (!(std::isfinite(value) && value > 0))
    throw Error(std::string(key) + " must be a finite number > 0, got " + format_number(value));
}

void require_length(const char* key, std::int64_t value) {
  if (value < 1 || value > kMaxPosition)
    throw Error(std::string(key) + " must be in [1, 2^31-1], got " + std::to_string(value));
}

void require_factor_list(const char* key, const std::vector<double>& list, int expected) {
  if (static_cast<int>(list.size()) != expected)
    throw Error(std::string(key) + " must have rotary_dim/2 = " + std::to_string(expected) +
                " entries, got " + std::to_string(list.size()));
  for (std::size_t i = 0; i < list.size(); ++i)
    if (!(std::isfinite(list[i]) && list[i] > 0))
      throw Error(std::string(key) + "[" + std::to_string(i) + "] must be > 0, got " +
                  format_number(list[i]));
}


}  // namespace

int RopeParams::rotated_dim() const {
  if (rotary_dim) return *rotary_dim;
  // HF: int(head_dim * partial_rotary_factor) — truncation, so 96 * 0.4 gives 38.
  return static_cast<int>(static_cast<double>(head_dim) * partial_rotary_factor);
}

double resolved_factor(const RopeParams& p) {
  if (p.factor) return *p.factor;
  switch (p.type) {
    case RopeType::kYarn:
    case RopeType::kLongRope: {
      // HF: a missing (longrope) or null (yarn) factor is max_position_embeddings / original.
      if (!p.max_position_embeddings)
        throw Error(type_name(p) + " without factor needs max_position_embeddings to derive it");
      return static_cast<double>(*p.max_position_embeddings) /
             static_cast<double>(resolved_original_max(p));
    }
    case RopeType::kProportional:
    case RopeType::kDefault:
      return 1.0;
    default:
      throw Error(type_name(p) + " requires factor");
  }
}

std::int64_t resolved_original_max(const RopeParams& p) {
  if (p.original_max_position_embeddings) return *p.original_max_position_embeddings;
  if (p.max_position_embeddings) return *p.max_position_embeddings;
  throw Error(type_name(p) + " requires original_max_position_embeddings (or max_position_embeddings)");
}

void advise(const RopeParams& p, std::vector<std::string>& warnings, std::vector<std::string>& notes) {
  if (p.type == RopeType::kLlama3 && p.low_freq_factor && p.high_freq_factor) {
    const double low = *p.low_freq_factor, high = *p.high_freq_factor;
    if (low == high)
      notes.push_back("llama3 low_freq_factor == high_freq_factor = " + format_number(low) +
                      ": no smooth band; wavelengths above original_max_position_embeddings / " + format_number(low) +
                      " are divided by factor, the rest unchanged (as HF computes)");
    else if (low > high)
      warnings.push_back("llama3 low_freq_factor " + format_number(low) + " > high_freq_factor " + format_number(high) +
                         ": the smooth band is inverted and empty; wavelengths above original_max_position_embeddings / " +
                         format_number(low) + " are divided by factor, the rest unchanged (HF computes the same and "
                         "warns; Llama 3 uses low < high)");
  }
  if ((p.type == RopeType::kYarn || p.type == RopeType::kNtkByParts) && p.beta_fast < p.beta_slow)
    warnings.push_back("beta_fast " + format_number(p.beta_fast) + " < beta_slow " + format_number(p.beta_slow) +
                       ": the YaRN correction range is inverted (its ramp runs backwards); HF computes the same "
                       "numbers, but YaRN means beta_fast > beta_slow (32 and 1)");
}

void validate(const RopeParams& p) {
  if (p.head_dim < 1 || p.head_dim > kMaxHeadDim)
    throw Error("head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " +
                std::to_string(p.head_dim));
  if (!(p.partial_rotary_factor > 0 && p.partial_rotary_factor <= 1))
    throw Error("partial_rotary_factor must be in (0, 1], got " + format_number(p.partial_rotary_factor));
  if (p.type == RopeType::kProportional) {
    // The table spans head_dim; the rotated part is int(prf * head_dim // 2) frequencies.
    if (p.head_dim % 2 != 0)
      throw Error("rope_type 'proportional' needs an even head_dim, got " + std::to_string(p.head_dim));
    if (p.rotary_dim) throw Error("rope_type 'proportional' takes partial_rotary_factor, not rotary_dim");
    if (static_cast<int>(p.partial_rotary_factor * p.head_dim / 2) < 1)
      throw Error("partial_rotary_factor " + format_number(p.partial_rotary_factor) + " of head_dim " +
                  std::to_string(p.head_dim) + " rotates no frequency");
  } else {
    const int d = p.rotated_dim();
    if (p.rotary_dim && (d < 2 || d > p.head_dim))
      throw Error("rotary_dim must be in [2, head_dim=" + std::to_string(p.head_dim) + "], got " +
                  std::to_string(d));
    if (d < 2 || d % 2 != 0)
      throw Error("rotary dim = int(head_dim " + std::to_string(p.head_dim) + " * partial_rotary_factor " +
                  format_number(p.partial_rotary_factor) + ") = " + std::to_string(d) +
                  " must be even and >= 2 (RoPE rotates channel pairs)");
    if ((p.type == RopeType::kNtk || p.type == RopeType::kDynamic) && d <= 2)
      throw Error(type_name(p) + " needs a rotary dim > 2 (the NTK exponent is d/(d-2)), got " +
                  std::to_string(d));
  }
  require_positive("rope_theta", p.theta);
  // HF divides by ln(theta) here (a ZeroDivisionError in Python at exactly 1); theta in (0, 1)
  // flips the range's sign but stays finite, and HF computes it.
  if ((p.type == RopeType::kYarn || p.type == RopeType::kNtkByParts) && p.theta == 1)
    throw Error(type_name(p) + " needs rope_theta != 1 (the correction range divides by ln theta), got 1");
  if (p.factor) require_positive("factor", *p.factor);
  if (rope_type_traits(p.type).needs_factor && !p.factor) throw Error(type_name(p) + " requires factor");
  if (p.max_position_embeddings) require_length("max_position_embeddings", *p.max_position_embeddings);
  if (p.original_max_position_embeddings)
    require_length("original_max_position_embeddings", *p.original_max_position_embeddings);
  if (p.type == RopeType::kDynamic && !p.max_position_embeddings)
    throw Error("rope_type 'dynamic' requires max_position_embeddings (its reference length)");
  if (rope_type_traits(p.type).needs_original_max) resolved_original_max(p);
  if (p.type == RopeType::kYarn || p.type == RopeType::kLongRope) require_positive("factor", resolved_factor(p));
  if (p.attention_factor) require_positive("attention_factor", *p.attention_factor);
  require_positive("beta_fast", p.beta_fast);
  require_positive("beta_slow", p.beta_slow);
  if (p.alpha) {
    require_positive("alpha", *p.alpha);
    // modeling_hunyuan_v1_dense.py's NTK-alpha rotary spans config.head_dim: no partial rotary.
    if (p.rotated_dim() != p.head_dim)
      throw Error("alpha (HunYuan NTK-alpha) rotates the whole head (HF uses head_dim " + std::to_string(p.head_dim) +
                  "), got a rotary dim of " + std::to_string(p.rotated_dim()));
  }
  if (p.mscale && !std::isfinite(*p.mscale)) throw Error("mscale must be finite");
  if (p.mscale_all_dim && !std::isfinite(*p.mscale_all_dim)) throw Error("mscale_all_dim must be finite");

  if (p.type == RopeType::kLlama3) {
    if (!p.low_freq_factor) throw Error("rope_type 'llama3' requires low_freq_factor");
    if (!p.high_freq_factor) throw Error("rope_type 'llama3' requires high_freq_factor");
    require_positive("low_freq_factor", *p.low_freq_factor);
    require_positive("high_freq_factor", *p.high_freq_factor);
    // low_freq_factor >= high_freq_factor is accepted, as HF accepts it (Llama-4-Scout ships
    // 1 and 1): the smooth band [orig/high, orig/low] is then a single wavelength or empty, so
    // the division by high - low is never taken -- except by a wavelength exactly on that edge,
    // which compute_schedule refuses as non-finite. advise() says so.
  }
  if (p.type == RopeType::kLongRope) {
    const int half = p.rotated_dim() / 2;
    if (p.short_factor.empty()) throw Error("rope_type 'longrope' requires short_factor");
    if (p.long_factor.empty()) throw Error("rope_type 'longrope' requires long_factor");
    require_factor_list("short_factor", p.short_factor, half);
    require_factor_list("long_factor", p.long_factor, half);
  }
  if (p.clip_low != 0) {
    // F: the rotated frequencies (proportional's zero tail is not among them).
    const int frequencies =
        p.type == RopeType::kProportional ? static_cast<int>(p.partial_rotary_factor * p.head_dim / 2) : p.rotated_dim() / 2;
    if (p.clip_low < 0 || p.clip_low > frequencies)
      throw Error("clip_low must be in [0, " + std::to_string(frequencies) + "] (the rotated frequencies), got " +
                  std::to_string(p.clip_low));
    if (p.clip_low == 1 && !p.clip_hard)
      throw Error("clip_low 1 with soft clipping: the taper (1 + cos(pi k/(n-1)))/2 divides by n - 1 = 0; give "
                  "clip_low >= 2, or clip_hard to zero the one lowest frequency");
  }
  if (!p.mrope_section.empty()) {
    // M-RoPE reads T, H, W; XD-RoPE (modeling_hunyuan_vl.py get_rope_index) needs at least 3 axes,
    // its config documents 3 (width, height, image index) or 4 (position first).
    const std::size_t n = p.mrope_section.size();
    if (p.mrope_xdrope ? n < 3 || n > 4 : n != 3)
      throw Error("mrope_section has " + std::to_string(n) + " entries; expected " +
                  (p.mrope_xdrope ? "3 or 4 (XD-RoPE's position axes)" : "3 (T, H, W; 4 only for HunYuan-VL's XD-RoPE)"));
    if (p.mrope_xdrope && p.mrope_interleaved)
      throw Error("mrope_interleaved and XD-RoPE (HunYuan-VL) are two different axis layouts; give one");
    long sum = 0;
    for (int s : p.mrope_section) {
      if (s < 0) throw Error("mrope_section entries must be >= 0, got " + std::to_string(s));
      sum += s;
    }
    const int half = p.type == RopeType::kProportional ? p.head_dim / 2 : p.rotated_dim() / 2;
    if (sum != half)
      throw Error("mrope_section must sum to rotary_dim/2 = " + std::to_string(half) + ", sums to " +
                  std::to_string(sum));
  }
}

}  // namespace posenc
