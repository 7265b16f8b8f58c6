// N-D axial RoPE and pixel frequencies (rotary-embedding-torch's RotaryEmbedding(freqs_for=...)
// and get_axial_freqs; EVA-02, timm): each of `axes` coordinate axes rotates its own block of
// axis_dim channels with the same frequencies, the blocks concatenated along the channels.
//
//   frequencies of one axis, F = axis_dim / 2:
//     lang   1 / theta^(2i / axis_dim)                       (RoFormer; integer coordinates)
//     pixel  linspace(1, max_freq / 2, F)_i * pi             (coordinates in [-1, 1])
//   angles, token t, axis a, frequency i:  angle[t][a F + i] = coord[t][a] * freq_i      [tokens, axes F]
//
// Pair a F + i is axis a's frequency i; RopeLayout places pairs on channels as for 1-D RoPE
// (interleaved: channels 2(aF + i), 2(aF + i) + 1, which is rotary-embedding-torch's order; half-
// split: aF + i and aF + i + axes F). Which axes, channels and heads a model gives each block is
// the caller's: the builders take the coordinates [tokens, axes] in the axis order wanted.
// rotary-embedding-torch forms its frequencies in float32; posenc in double, rounded once to
// float32 (lang: the default schedule's, compute_schedule), so a frequency may differ by one ulp.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/names.h"
#include "posenc/rope_apply.h"

namespace posenc {

enum class AxialFrequencies { kLang, kPixel };
POSENC_ENUM_NAMES(AxialFrequencies, "freqs_for", {AxialFrequencies::kLang, "lang"}, {AxialFrequencies::kPixel, "pixel"});

struct AxialRopeParams {
  int axes = 2;       // coordinate axes (2: an image's rows and columns; 3: video t, h, w)
  int axis_dim = 0;   // rotated channels per axis, even; the rotary dim is axes * axis_dim
  AxialFrequencies freqs_for = AxialFrequencies::kLang;
  double theta = 10000.0;  // lang
  double max_freq = 10.0;  // pixel: the highest frequency is max_freq / 2 * pi
};

// Throws posenc::Error naming the field: axes >= 1, axis_dim even >= 2, theta and max_freq
// finite > 0.
void validate(const AxialRopeParams& params);

// One axis's F = axis_dim / 2 frequencies, float32.
std::vector<float> axial_axis_frequencies(const AxialRopeParams& params);

// The coordinates [prod(dims), axes] of a grid dims[0] x dims[1] x ..., row-major (the last axis
// fastest), as get_axial_freqs forms them: lang arange(n), pixel linspace(-1, 1, n) (n = 1: -1).
std::vector<double> axial_grid_coordinates(const AxialRopeParams& params, const std::vector<int>& dims);

// The angle table [tokens][axes * F] of coordinates [tokens][axes] (double: coord * double(freq)),
// tokens = coordinates.size() / axes. Every angle must be finite with |angle| <= kMaxRopeAngle.
std::vector<double> axial_angles(const AxialRopeParams& params, const std::vector<double>& coordinates);

// Rotates x in place by an angle table [x.batch * x.tokens or x.tokens][pairs] (one row per token,
// shared across the batch when it has x.tokens rows): cos and sin by rope_sincos, rounded to
// float32, the pair rotation of rope_rotate_row; 2 * pairs <= head_dim, the rest pass through.
// The scalar reference of angle-table RoPE; integer lang coordinates also run on the SIMD
// kernels through axial_kernel_frequencies.
void rope_apply_angles(const RopeTensor& x, const std::vector<double>& angles, int pairs, RopeLayout layout,
                       int direction = 1);

// Integer coordinates of lang frequencies on the RoPE kernels (at most 3 axes, PositionIds'
// limit): inv_freq [axes * F] and the axis each reads, for rope_apply_params(inv_freq, 1, layout,
// axis_of_freq) with PositionIds::explicit_ids(ids, axes, axis_stride) holding coordinate a of
// token t at ids[a * axis_stride + t].
struct AxialKernelFrequencies {
  std::vector<float> inv_freq;
  std::vector<std::uint8_t> axis_of_freq;
};
AxialKernelFrequencies axial_kernel_frequencies(const AxialRopeParams& params);

}  // namespace posenc
