// RoPE application, scalar reference: rotate q or k in place at given positions.
//
// Layouts of one head's channels (r = rotary dim = 2 * num_freqs; channels >= r pass through):
//
//   half-split  (NeoX, LLaMA, HF rotate_half)    pairs (j, j + r/2), frequency j
//       [x0 x1 x2 x3 | x4 x5 x6 x7]   x0 pairs x4, x1 pairs x5, ...
//   interleaved (GPT-J, RoFormer, Meta, Cohere)  pairs (2j, 2j+1), frequency j
//       [x0 x1][x2 x3][x4 x5][x6 x7]
//   deepseek_v3 (HF apply_rotary_pos_emb_interleave): reads pairs (2j, 2j+1), writes the result
//       de-interleaved, out[j] and out[j + r/2]: the half-split order. Dot products between
//       q and k are the same as interleaved; the layout of the output is not. Its transpose
//       (direction -1, the backward pass) reads halves and writes pairs.
//
//   out_a = x_a cos(p w_j) - x_b sin(p w_j)      (both scaled by attention_factor, as HF scales
//   out_b = x_b cos(p w_j) + x_a sin(p w_j)       cos and sin)
//
// direction -1 applies the transpose, attention_factor * R(-p w): the exact inverse when the
// attention factor is 1, and the backward pass of the rotation always.
//
// Tensors are strided views [batch, tokens, heads, head_dim] with contiguous channels, so
// [B, S, H, D] and [B, H, S, D] both work without copies (bshd() / bhsd()).
//
// Position ids have one axis for text, three for M-RoPE (T, H, W: Qwen2-VL) and two for 2-D
// vision RoPE (h, w); axis_of_freq says which axis each frequency reads (mrope.h builds it).
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/half.h"
#include "posenc/rope_schedule.h"
#include "posenc/rope_xpos.h"

namespace posenc {

enum class RopeLayout { kHalfSplit, kInterleaved, kDeepSeekV3 };

// "half": the older spelling, still read.
POSENC_ENUM_NAMES(RopeLayout, "layout", {RopeLayout::kHalfSplit, layout_names::kHalfSplit},
                  {RopeLayout::kInterleaved, layout_names::kInterleaved}, {RopeLayout::kDeepSeekV3, "deepseek_v3"},
                  {RopeLayout::kHalfSplit, "half"});

// The pairs q.k sees, as `posenc spec` and golden manifests name them ("pairing"): deepseek_v3
// reads (2j, 2j+1), so its pairs are interleaved.
inline const char* pairing_name(RopeLayout layout) {
  return to_string(layout == RopeLayout::kDeepSeekV3 ? RopeLayout::kInterleaved : layout);
}

// The channel order of the rotated output where it is not the pairs' own ("output_order"):
// deepseek_v3 writes half-split order; nullptr for the other layouts.
inline const char* output_order(RopeLayout layout) {
  return layout == RopeLayout::kDeepSeekV3 ? to_string(RopeLayout::kHalfSplit) : nullptr;
}

// q or k: element (b, t, h, c) at data + b*batch_stride + t*token_stride + h*head_stride + c,
// strides in elements of dtype; channels contiguous.
struct RopeTensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int batch = 1, tokens = 0, heads = 0, head_dim = 0;
  std::int64_t batch_stride = 0, token_stride = 0, head_stride = 0;
};

// The logical shape of q or k, always in this order whatever the memory order: the factory's
// name says how the memory is laid out, so no call passes (heads, tokens) where (tokens, heads)
// was meant.
struct RopeShape {
  int batch = 1, tokens = 0, heads = 0, head_dim = 0;
};
struct RopeStrides {  // in elements of the dtype
  std::int64_t batch = 0, token = 0, head = 0;
};

RopeTensor strided(void* data, DType dtype, RopeShape shape, RopeStrides strides);
RopeTensor bshd(void* data, DType dtype, RopeShape shape);  // memory [B, S, H, D], contiguous
RopeTensor bhsd(void* data, DType dtype, RopeShape shape);  // memory [B, H, S, D], contiguous
inline RopeTensor bshd(float* data, RopeShape shape) { return bshd(data, DType::kF32, shape); }
inline RopeTensor bhsd(float* data, RopeShape shape) { return bhsd(data, DType::kF32, shape); }

// Position of token t of batch row b on axis a:
//   (ids ? ids[a * axis_stride + b' * tokens + t] : ids32 ? ids32[...] : t) + offset
// with b' = b, or 0 when shared_across_batch (every batch row has the same positions: the
// kernels then form each token's cos/sin once for the whole batch).
// offset is the KV-cache length for a decode step; packed sequences pass explicit ids.
struct PositionIds {
  const std::int64_t* ids = nullptr;
  int axes = 1;
  std::int64_t axis_stride = 0;
  const std::int32_t* ids32 = nullptr;
  std::int64_t offset = 0;
  bool shared_across_batch = false;

  std::int64_t at(int axis, int b, int t, int tokens) const {
    const std::int64_t i = axis * axis_stride + (shared_across_batch ? 0 : std::int64_t{b} * tokens) + t;
    return (ids ? ids[i] : ids32 ? ids32[i] : t) + offset;
  }
  // Implicit positions (t + offset) are the same in every batch row.
  bool same_for_every_batch_row() const { return shared_across_batch || (!ids && !ids32); }

  // Named constructors: the fields above share types, so spelling them out is the safe way.
  // Token t at position t + offset (a decode step: offset = the KV-cache length).
  static PositionIds implicit(std::int64_t offset = 0) {
    PositionIds p;
    p.offset = offset;
    return p;
  }
  // ids[axis * axis_stride + b * tokens + t] (axes 1: text; 3: M-RoPE T, H, W; 2: 2-D vision).
  static PositionIds explicit_ids(const std::int64_t* ids, int axes = 1, std::int64_t axis_stride = 0) {
    PositionIds p;
    p.ids = ids;
    p.axes = axes;
    p.axis_stride = axis_stride;
    return p;
  }
};

struct RopeApplyParams {
  const float* inv_freq = nullptr;  // [num_freqs]
  int num_freqs = 0;                // rotary dim = 2 * num_freqs <= head_dim
  const std::uint8_t* axis_of_freq = nullptr;  // [num_freqs] position axis per frequency; null: 0
  double attention_factor = 1.0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  Numerics angles = Numerics::kAccurate;  // how cos/sin are evaluated
  int direction = +1;
  // xPos (rope_xpos.h): each pair's cos and sin times its query or key scale at the token's
  // position (one position axis only). Off by default.
  XPosParams xpos;
  // Partial rotary at any channel offset: the layout's pairs lie in channels [channel_offset,
  // channel_offset + 2 num_freqs) of each head (half-split pairs (o + j, o + j + num_freqs));
  // the channels outside pass through. 0: the first channels, as HF's partial rotary.
  int channel_offset = 0;
  // RoPE on a subset of heads (x-transformers' rotate_num_heads): the first rotated_heads heads of
  // each tensor rotate (all of a tensor that has fewer), the rest get no positions. 0: every head.
  // With GQA the caller picks counts whose query heads read exactly the rotated key heads
  // (fused attention takes n for q and n / group for k: attention.h).
  int rotated_heads = 0;
};

// The part of x that p rotates: data advanced by channel_offset elements, head_dim less by it,
// heads capped at rotated_heads. What the kernels' dispatch and rope_apply_reference both walk.
RopeTensor rotated_part(const RopeTensor& x, const RopeApplyParams& p);

// The parameters for a schedule's frequencies and attention factor.
RopeApplyParams rope_apply_params(const RopeSchedule& schedule, RopeLayout layout = RopeLayout::kHalfSplit);
// The same over frequencies the caller owns (a saved spec, an array from Python): inv_freq
// [num_freqs]; axis_of_freq empty (one position axis) or one axis per frequency (an Error
// otherwise). The vectors must outlive the parameters.
RopeApplyParams rope_apply_params(const std::vector<float>& inv_freq, double attention_factor, RopeLayout layout,
                                  const std::vector<std::uint8_t>& axis_of_freq = {});

// Checks shapes, axes and positions (in [0, 2^31-1]); throws posenc::Error.
void validate(const RopeTensor& x, const PositionIds& positions, const RopeApplyParams& params);

// sin and cos of an angle (radians, |angle| < 2^31), accurate to ~1e-15 absolute plus the
// rounding of the angle itself: reduction by pi/2 with a three-part Cody-Waite split (each
// part 22 bits, so k * part is exact for |k| < 2^31), then degree-11/12 Taylor polynomials on
// [-pi/4, pi/4] and the quadrant. Plain double arithmetic in a fixed order: the SIMD kernels
// evaluate the same operations lane by lane and get the same bits.
void rope_sincos(double angle, double* sin_out, double* cos_out);

namespace rope_sincos_constants {
inline constexpr double kTwoOverPi = 0.63661977236758138;
inline constexpr double kPio2Hi = 0x1.921fb00000000p+0;   // pi/2, bits 1..22
inline constexpr double kPio2Mid = 0x1.5110b00000000p-22;  // bits 23..44
inline constexpr double kPio2Lo = 0x1.18469898cc517p-44;   // the rest
inline constexpr double kS[5] = {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800};
inline constexpr double kC[6] = {-1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600};
}  // namespace rope_sincos_constants

// cos and sin of one frequency at one position, scaled by the attention factor.
void rope_cos_sin(double inv_freq, std::int64_t position, const RopeApplyParams& params, float* cos, float* sin);
// The same at a real position (attention's remapped positions: leaky ReRoPE's qpos/k): the same
// bits as rope_cos_sin at an integral one.
void rope_cos_sin_at(double inv_freq, double position, const RopeApplyParams& params, float* cos, float* sin);

// Rotates every head of every token in place, any storage dtype (math in float32, stores
// rounded to nearest even). The plain, obviously-correct version: the reference the SIMD
// kernels (rope_kernels.h) are tested against. With xPos, x takes the role params.xpos.first
// (a query unless it says kKey): each cos/sin times XPosScales' float32 scale, in float32.
void rope_apply_reference(const RopeTensor& x, const PositionIds& positions, const RopeApplyParams& params);

// Every head of token t of batch row b of x, in place, with that token's cos/sin rows
// ([num_freqs] each, sin already times direction): loads widen, rope_rotate_row, stores round
// to nearest even. rope_apply_reference's step, and angle-table RoPE's (axial_rope.h).
void rope_rotate_token(const RopeTensor& x, int b, int t, const float* cos, const float* sin, int num_freqs,
                       RopeLayout layout, int direction);

// One head of token t of batch row b, in float: out[0 .. 2*num_freqs) from in[0 .. 2*num_freqs)
// (in and out must not overlap; the channels past the rotary dim are the caller's). What
// rope_apply_reference does to each head, for callers that rotate copies (fused attention).
void rope_row_reference(const float* in, float* out, const PositionIds& positions, int b, int t, int tokens,
                        const RopeApplyParams& params);
// The same with the row's cos/sin given ([num_freqs] each, from rope_cos_sin or a RopeTable):
// the same bits.
void rope_rotate_row(const float* in, float* out, const float* cos, const float* sin, int num_freqs, RopeLayout layout,
                     int direction);

}  // namespace posenc
