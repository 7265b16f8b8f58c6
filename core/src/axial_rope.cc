#include "posenc/axial_rope.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {

void validate(const AxialRopeParams& p) {
  if (p.axes < 1) throw Error("axial RoPE needs axes >= 1, got " + std::to_string(p.axes));
  if (p.axis_dim < 2 || p.axis_dim % 2 != 0 || p.axis_dim > kMaxHeadDim)
    throw Error("axial RoPE axis_dim must be even and in [2, " + std::to_string(kMaxHeadDim) + "], got " +
                std::to_string(p.axis_dim));
  if (static_cast<std::int64_t>(p.axes) * p.axis_dim > kMaxHeadDim)
    throw Error("axial RoPE axes * axis_dim = " + std::to_string(static_cast<std::int64_t>(p.axes) * p.axis_dim) +
                " channels is more than " + std::to_string(kMaxHeadDim));
  if (!(std::isfinite(p.theta) && p.theta > 0)) throw Error("axial RoPE theta must be finite > 0, got " + format_number(p.theta));
  if (!(std::isfinite(p.max_freq) && p.max_freq > 0))
    throw Error("axial RoPE max_freq must be finite > 0, got " + format_number(p.max_freq));
}

std::vector<float> axial_axis_frequencies(const AxialRopeParams& p) {
  validate(p);
  const int count = p.axis_dim / 2;
  if (p.freqs_for == AxialFrequencies::kLang) {
    RopeParams rope;  // the default schedule over axis_dim channels: one formula for 1-D and axial
    rope.head_dim = p.axis_dim;
    rope.theta = p.theta;
    return compute_schedule(rope).inv_freq;
  }
  // torch.linspace(1, max_freq / 2, count) * pi (rotary-embedding-torch, freqs_for='pixel').
  std::vector<float> out(static_cast<std::size_t>(count));
  const double end = p.max_freq / 2;
  for (int i = 0; i < count; ++i) {
    const double at = count == 1 ? 1.0 : 1.0 + (end - 1.0) * i / (count - 1);
    out[static_cast<std::size_t>(i)] = static_cast<float>(at * kPi);
  }
  return out;
}

std::vector<double> axial_grid_coordinates(const AxialRopeParams& p, const std::vector<int>& dims) {
  validate(p);
  if (static_cast<int>(dims.size()) != p.axes)
    throw Error("axial grid needs one size per axis (" + std::to_string(p.axes) + "), got " + std::to_string(dims.size()));
  std::int64_t tokens = 1;
  for (int n : dims) {
    if (n < 1) throw Error("axial grid sizes must be >= 1, got " + std::to_string(n));
    tokens *= n;
    if (tokens > kMaxPosition) throw Error("axial grid has more than 2^31-1 points");
  }
  std::vector<double> out(static_cast<std::size_t>(tokens) * dims.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::int64_t rest = t;
    for (int a = p.axes - 1; a >= 0; --a) {  // row-major: the last axis runs fastest
      const int n = dims[static_cast<std::size_t>(a)];
      const std::int64_t index = rest % n;
      rest /= n;
      const double coordinate = p.freqs_for == AxialFrequencies::kLang ? static_cast<double>(index)
                                : n == 1                               ? -1.0
                                                                       : -1.0 + 2.0 * static_cast<double>(index) / (n - 1);
      out[static_cast<std::size_t>(t * p.axes + a)] = coordinate;
    }
  }
  return out;
}

std::vector<double> axial_angles(const AxialRopeParams& p, const std::vector<double>& coordinates) {
  const std::vector<float> freq = axial_axis_frequencies(p);
  if (coordinates.size() % static_cast<std::size_t>(p.axes) != 0)
    throw Error("axial coordinates must be [tokens, axes = " + std::to_string(p.axes) + "], got " +
                std::to_string(coordinates.size()) + " values");
  const std::size_t tokens = coordinates.size() / static_cast<std::size_t>(p.axes), count = freq.size();
  const std::size_t row = static_cast<std::size_t>(p.axes) * count;
  std::vector<double> angles(tokens * row);
  for (std::size_t t = 0; t < tokens; ++t)
    for (std::size_t a = 0; a < static_cast<std::size_t>(p.axes); ++a) {
      const double c = coordinates[t * static_cast<std::size_t>(p.axes) + a];
      if (!std::isfinite(c))
        throw Error("axial coordinate (token " + std::to_string(t) + ", axis " + std::to_string(a) + ") must be finite, got " +
                    format_number(c));
      for (std::size_t i = 0; i < count; ++i) angles[t * row + a * count + i] = c * static_cast<double>(freq[i]);
    }
  return angles;
}

void rope_apply_angles(const RopeTensor& x, const std::vector<double>& angles, int pairs, RopeLayout layout, int direction) {
  if (!x.data || x.batch < 0 || x.tokens < 0 || x.heads < 0 || x.head_dim < 1)
    throw Error("RoPE view needs data, batch/tokens/heads >= 0 and head_dim >= 1");
  if (pairs < 1 || 2 * static_cast<std::int64_t>(pairs) > x.head_dim)
    throw Error("angle-table RoPE rotates 2 * " + std::to_string(pairs) + " channels, not within head_dim " +
                std::to_string(x.head_dim));
  if (direction != 1 && direction != -1) throw Error("direction must be +1 or -1, got " + std::to_string(direction));
  const std::size_t shared_rows = static_cast<std::size_t>(x.tokens) * static_cast<std::size_t>(pairs);
  const bool shared = angles.size() == shared_rows;
  if (!shared && angles.size() != static_cast<std::size_t>(x.batch) * shared_rows)
    throw Error("angle table has " + std::to_string(angles.size()) + " values; expected [tokens " + std::to_string(x.tokens) +
                "][pairs " + std::to_string(pairs) + "] or [batch * tokens][pairs]");
  for (std::size_t i = 0; i < angles.size(); ++i)
    if (!(std::fabs(angles[i]) <= kMaxRopeAngle))
      throw Error("angle " + format_number(angles[i]) + " (entry " + std::to_string(i) +
                  ") is not finite or beyond 2^31 radians, where posenc's cos/sin are accurate");
  const RopeApplyParams unit;  // attention factor 1: the float rounding of rope_cos_sin
  std::vector<float> cos(static_cast<std::size_t>(pairs)), sin(cos.size());
  for (int b = 0; b < x.batch; ++b)
    for (int t = 0; t < x.tokens; ++t) {
      const double* row = angles.data() + (shared ? 0 : static_cast<std::size_t>(b) * shared_rows) +
                          static_cast<std::size_t>(t) * static_cast<std::size_t>(pairs);
      for (int j = 0; j < pairs; ++j) {
        double s, c;
        rope_sincos(row[j], &s, &c);
        cos[static_cast<std::size_t>(j)] = static_cast<float>(c * unit.attention_factor);
        sin[static_cast<std::size_t>(j)] = static_cast<float>(s * unit.attention_factor * direction);
      }
      rope_rotate_token(x, b, t, cos.data(), sin.data(), pairs, layout, direction);
    }
}

AxialKernelFrequencies axial_kernel_frequencies(const AxialRopeParams& p) {
  validate(p);
  if (p.freqs_for != AxialFrequencies::kLang)
    throw Error("the RoPE kernels take integer positions: axial RoPE on them needs freqs_for lang, got " +
                std::string(to_string(p.freqs_for)) + " (use axial_angles and rope_apply_angles)");
  if (p.axes > 3) throw Error("the RoPE kernels read at most 3 position axes, got " + std::to_string(p.axes));
  const std::vector<float> freq = axial_axis_frequencies(p);
  AxialKernelFrequencies out;
  for (int a = 0; a < p.axes; ++a)
    for (float f : freq) {
      out.inv_freq.push_back(f);
      out.axis_of_freq.push_back(static_cast<std::uint8_t>(a));
    }
  return out;
}

}  // namespace posenc
