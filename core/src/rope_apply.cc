#include "posenc/rope_apply.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {

RopeApplyParams rope_apply_params(const RopeSchedule& s, RopeLayout layout) {
  return rope_apply_params(s.inv_freq, s.attention_factor, layout);
}

RopeApplyParams rope_apply_params(const std::vector<float>& inv_freq, double attention_factor, RopeLayout layout,
                                  const std::vector<std::uint8_t>& axis_of_freq) {
  if (!axis_of_freq.empty() && axis_of_freq.size() != inv_freq.size())
    throw Error("axis_of_freq has " + std::to_string(axis_of_freq.size()) + " entries for " + std::to_string(inv_freq.size()) +
                " frequencies");
  RopeApplyParams p;
  p.inv_freq = inv_freq.data();
  p.num_freqs = static_cast<int>(inv_freq.size());
  p.axis_of_freq = axis_of_freq.empty() ? nullptr : axis_of_freq.data();
  p.attention_factor = attention_factor;
  p.layout = layout;
  return p;
}

RopeTensor rotated_part(const RopeTensor& x, const RopeApplyParams& p) {
  RopeTensor part = x;
  if (x.data) part.data = static_cast<std::uint8_t*>(x.data) + static_cast<std::size_t>(p.channel_offset) * dtype_size(x.dtype);
  part.head_dim = x.head_dim - p.channel_offset;
  if (p.rotated_heads > 0) part.heads = std::min(x.heads, p.rotated_heads);
  return part;
}

RopeTensor strided(void* data, DType dtype, RopeShape s, RopeStrides st) {
  return {data, dtype, s.batch, s.tokens, s.heads, s.head_dim, st.batch, st.token, st.head};
}

RopeTensor bshd(void* data, DType dtype, RopeShape s) {
  const std::int64_t d = s.head_dim;
  return strided(data, dtype, s, {s.tokens * s.heads * d, s.heads * d, d});
}

RopeTensor bhsd(void* data, DType dtype, RopeShape s) {
  const std::int64_t d = s.head_dim;
  return strided(data, dtype, s, {s.heads * s.tokens * d, d, s.tokens * d});
}

void validate(const RopeTensor& x, const PositionIds& pos, const RopeApplyParams& p) {
  if (!x.data || x.batch < 0 || x.tokens < 0 || x.heads < 0 || x.head_dim < 1)
    throw Error("RoPE view needs data, batch/tokens/heads >= 0 and head_dim >= 1");
  if (p.num_freqs < 1 || 2 * p.num_freqs > x.head_dim)
    throw Error("rotary dim 2*" + std::to_string(p.num_freqs) + " must be in [2, head_dim=" + std::to_string(x.head_dim) + "]");
  if (p.channel_offset < 0 || p.channel_offset > x.head_dim - 2 * p.num_freqs)
    throw Error("channel_offset " + std::to_string(p.channel_offset) + " must be in [0, head_dim " + std::to_string(x.head_dim) +
                " - rotary dim " + std::to_string(2 * p.num_freqs) + "]: the rotated channels must lie inside the head");
  if (p.rotated_heads < 0)
    throw Error("rotated_heads must be >= 0 (0: every head), got " + std::to_string(p.rotated_heads));
  if (p.direction != 1 && p.direction != -1) throw Error("direction must be +1 or -1, got " + std::to_string(p.direction));
  if (pos.axes < 1 || pos.axes > 3) throw Error("position ids need 1, 2 or 3 axes, got " + std::to_string(pos.axes));
  for (int j = 0; p.axis_of_freq && j < p.num_freqs; ++j)
    if (p.axis_of_freq[j] >= pos.axes)
      throw Error("frequency " + std::to_string(j) + " reads position axis " + std::to_string(p.axis_of_freq[j]) +
                  " but the ids have " + std::to_string(pos.axes));
  if (!p.inv_freq) throw Error("RoPE needs inv_freq");
  // A finite factor also keeps every NaN the kernels narrow to bf16 one that came in as data
  // (rope_convert-inl.h, Bf16InHighHalf).
  if (!std::isfinite(p.attention_factor))
    throw Error("RoPE attention_factor must be finite, got " + format_number(p.attention_factor));
  if (p.xpos.enabled() && pos.axes != 1)
    throw Error("xPos scales by one position per token; the ids have " + std::to_string(pos.axes) + " axes");
  std::int64_t largest[3] = {0, 0, 0}, smallest = kMaxPosition;
  for (int a = 0; a < pos.axes; ++a)
    for (int b = 0; b < x.batch; ++b)
      for (int t = 0; t < x.tokens; ++t) {
        const std::int64_t v = pos.at(a, b, t, x.tokens);
        if (v < 0 || v > kMaxPosition)
          throw Error("position " + std::to_string(v) + " (axis " + std::to_string(a) + ", batch " + std::to_string(b) +
                      ", token " + std::to_string(t) + ") must be in [0, 2^31-1]");
        largest[a] = std::max(largest[a], v);
        smallest = std::min(smallest, v);
      }
  validate_xpos(p.xpos, smallest, largest[0]);  // no tokens: smallest > largest, parameters only
  // rope_sincos reduces angles exactly only up to 2^31 radians (kMaxRopeAngle): beyond, cos and
  // sin would be wrong without a word (rope_theta < 1 or factors < 1 get there early).
  for (int j = 0; j < p.num_freqs; ++j) {
    const std::int64_t position = largest[p.axis_of_freq ? p.axis_of_freq[j] : 0];
    const double angle = static_cast<double>(position) * std::fabs(static_cast<double>(p.inv_freq[j]));
    if (!(angle <= kMaxRopeAngle))
      throw Error("position " + std::to_string(position) + " x inv_freq[" + std::to_string(j) + "] = " +
                  format_number(p.inv_freq[j]) + " is an angle of " + format_number(angle) +
                  " radians, beyond 2^31 where posenc's cos/sin are accurate; use shorter positions or a schedule "
                  "with smaller frequencies");
  }
}

void rope_sincos(double angle, double* sin_out, double* cos_out) {
  using namespace rope_sincos_constants;
  const double k = std::nearbyint(angle * kTwoOverPi);
  const double r = ((angle - k * kPio2Hi) - k * kPio2Mid) - k * kPio2Lo;
  const double r2 = r * r;
  double ps = kS[4];
  ps = ps * r2 + kS[3];
  ps = ps * r2 + kS[2];
  ps = ps * r2 + kS[1];
  ps = ps * r2 + kS[0];
  const double sin_r = r + (r * r2) * ps;
  double pc = kC[5];
  pc = pc * r2 + kC[4];
  pc = pc * r2 + kC[3];
  pc = pc * r2 + kC[2];
  pc = pc * r2 + kC[1];
  pc = pc * r2 + kC[0];
  const double cos_r = 1.0 + r2 * pc;
  const double q = k - 4.0 * std::floor(k * 0.25);  // quadrant 0..3
  const bool swap = q == 1.0 || q == 3.0;
  const double s = swap ? cos_r : sin_r, c = swap ? sin_r : cos_r;
  *sin_out = q >= 2.0 ? -s : s;
  *cos_out = q == 1.0 || q == 2.0 ? -c : c;
}

void rope_cos_sin(double inv_freq, std::int64_t position, const RopeApplyParams& p, float* c, float* s) {
  rope_cos_sin_at(inv_freq, static_cast<double>(position), p, c, s);  // exact below 2^53
}

void rope_cos_sin_at(double inv_freq, double position, const RopeApplyParams& p, float* c, float* s) {
  if (p.angles == Numerics::kHfFloat32) {
    const float angle = static_cast<float>(inv_freq) * static_cast<float>(position);
    const float factor = static_cast<float>(p.attention_factor);
    *c = std::cos(angle) * factor;
    *s = std::sin(angle) * factor * static_cast<float>(p.direction);
  } else {
    // p < 2^31 and w a float32: the double product carries ~2^-53 relative error, i.e. < 3e-7
    // radians even at p = 2^31, and cos/sin in double are then exact to float precision.
    const double angle = position * inv_freq;
    double sin_angle, cos_angle;
    rope_sincos(angle, &sin_angle, &cos_angle);
    *c = static_cast<float>(cos_angle * p.attention_factor);
    *s = static_cast<float>(sin_angle * p.attention_factor * p.direction);
  }
}

namespace {

float load(const void* base, DType t, std::int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kBF16: return bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::kF16: return f16_to_float(static_cast<const std::uint16_t*>(base)[i]);
  }
  return 0;
}

void store(void* base, DType t, std::int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(base)[i] = v; break;
    case DType::kBF16: static_cast<std::uint16_t*>(base)[i] = float_to_bf16(v); break;
    case DType::kF16: static_cast<std::uint16_t*>(base)[i] = float_to_f16(v); break;
  }
}

}  // namespace

void rope_rotate_row(const float* in, float* out, const float* cos, const float* sin, int num_freqs, RopeLayout layout,
                     int direction) {
  const int half = num_freqs;
  // DeepSeek-V3 reads pairs and writes halves; its transpose (direction -1) reads halves and
  // writes pairs.
  const bool deepseek_back = layout == RopeLayout::kDeepSeekV3 && direction < 0;
  const bool split_in = layout == RopeLayout::kHalfSplit || deepseek_back;
  const bool interleaved_out = layout == RopeLayout::kInterleaved || deepseek_back;
  for (int j = 0; j < half; ++j) {
    const float c = cos[j], s = sin[j];
    const float xa = split_in ? in[j] : in[2 * j];
    const float xb = split_in ? in[j + half] : in[2 * j + 1];
    out[interleaved_out ? 2 * j : j] = xa * c - xb * s;
    out[interleaved_out ? 2 * j + 1 : j + half] = xb * c + xa * s;
  }
}

void rope_row_reference(const float* in, float* out, const PositionIds& pos, int b, int t, int tokens,
                        const RopeApplyParams& p) {
  // Per-thread scratch: callers rotate row after row (fused attention with per-row ids), and an
  // allocation per row would cost more than the row.
  thread_local std::vector<float> cos, sin;
  cos.resize(static_cast<std::size_t>(p.num_freqs));
  sin.resize(static_cast<std::size_t>(p.num_freqs));
  for (int j = 0; j < p.num_freqs; ++j)
    rope_cos_sin(p.inv_freq[j], pos.at(p.axis_of_freq ? p.axis_of_freq[j] : 0, b, t, tokens), p, &cos[j], &sin[j]);
  rope_rotate_row(in, out, cos.data(), sin.data(), p.num_freqs, p.layout, p.direction);
}

void rope_apply_reference(const RopeTensor& whole, const PositionIds& pos, const RopeApplyParams& p) {
  validate(whole, pos, p);
  const RopeTensor x = rotated_part(whole, p);
  const std::size_t half = static_cast<std::size_t>(p.num_freqs);
  std::vector<float> cos(half), sin(half), query_scale(half), key_scale(half);
  const XPosScales xpos(p.xpos.enabled() ? p.xpos : XPosParams{}, p.xpos.enabled() ? p.num_freqs : 0);
  XPosScales::Block xpos_block;
  for (int b = 0; b < x.batch; ++b)
    for (int t = 0; t < x.tokens; ++t) {
      // The token's cos/sin (rope_row_reference's), then xPos's scale of x's role on each.
      for (int j = 0; j < p.num_freqs; ++j)
        rope_cos_sin(p.inv_freq[j], pos.at(p.axis_of_freq ? p.axis_of_freq[j] : 0, b, t, x.tokens), p,
                     &cos[static_cast<std::size_t>(j)], &sin[static_cast<std::size_t>(j)]);
      if (p.xpos.enabled()) {
        xpos.at(pos.at(0, b, t, x.tokens), query_scale.data(), key_scale.data(), xpos_block);
        const std::vector<float>& scale = p.xpos.first == XPosRole::kKey ? key_scale : query_scale;
        for (std::size_t j = 0; j < half; ++j) {
          cos[j] *= scale[j];
          sin[j] *= scale[j];
        }
      }
      rope_rotate_token(x, b, t, cos.data(), sin.data(), p.num_freqs, p.layout, p.direction);
    }
}

void rope_rotate_token(const RopeTensor& x, int b, int t, const float* cos, const float* sin, int num_freqs,
                       RopeLayout layout, int direction) {
  const int rotary = 2 * num_freqs;
  thread_local std::vector<float> in, out;  // per-thread scratch, as rope_row_reference's
  in.resize(static_cast<std::size_t>(rotary));
  out.resize(static_cast<std::size_t>(rotary));
  for (int h = 0; h < x.heads; ++h) {
    const std::int64_t row = b * x.batch_stride + t * x.token_stride + h * x.head_stride;
    for (int c = 0; c < rotary; ++c) in[static_cast<std::size_t>(c)] = load(x.data, x.dtype, row + c);
    rope_rotate_row(in.data(), out.data(), cos, sin, num_freqs, layout, direction);
    for (int c = 0; c < rotary; ++c) store(x.data, x.dtype, row + c, out[static_cast<std::size_t>(c)]);
  }
}

}  // namespace posenc
