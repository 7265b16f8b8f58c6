// Re-rotating cached keys in place: keys stored after RoPE at position p move to p + delta,
//   R(delta) R(p) k = R(p + delta) k
// (llama.cpp's convention for its K-shift, llama_memory_seq_add; the C ABI's and Python's too:
// a negative delta closes a gap of -delta evicted positions)
// without knowing p (rotations about the same planes compose by adding angles). What a KV cache
// needs when it closes a gap: StreamingLLM's sinks + window after an eviction, llama.cpp's
// context shift (its K-shift), any eviction policy that renumbers the survivors by slot.
//
//   keys   [B, T, H, D] view as in rope_apply.h ([B,T,H,D] or [B,H,T,D] storage, any strides,
//          channels contiguous), f32, bf16 or f16 (math in f32, stored rounded to nearest even);
//          tokens [begin, end) are shifted, the rest untouched
//
// The rotation by delta goes through the RoPE kernels (rope_kernels.h: SIMD, every layout and
// dtype, the same bits on every target) over a one-row cos/sin table of the angle delta * w_j,
// and equals rope_shift_reference() bit for bit. The keys' attention factor (YaRN's mscale,
// LongRoPE's) was applied when they were first rotated: the shift's rotation is a pure rotation
// (factor 1), or the factor would compound with every shift.
//
// Precision: each shift rounds once more than rotating the raw key at p + delta would (cos/sin of
// delta * w_j to float, the rotation in float, the store to the dtype): tests/rope_shift_test.cc
// measures the difference from a fresh rotation at p + delta.
#pragma once

#include <cstdint>

#include "posenc/rope_apply.h"
#include "posenc/threads.h"

namespace posenc {

struct RopeShiftParams {
  // The frequencies, layout and angle mode the keys were rotated with (rope_apply_params); its
  // attention_factor is not applied again, its direction must be +1. deepseek_v3 keys are stored
  // in half-split order (rope_apply.h), so they are shifted as half-split pairs. M-RoPE: every
  // position axis moves by delta (text tokens of a multimodal cache).
  RopeApplyParams rope;
  std::int64_t delta = 0;  // p -> p + delta; negative moves keys back (closes a gap); |delta| <= 2^31 - 1
  int begin = 0;           // the tokens [begin, end) of the view move
  int end = -1;            // -1: to the last token
};

// Shifts keys in place (SIMD, options.threads; options.table must be null: the shift's one
// cos/sin row is its own, without the attention factor a model's table holds). Validates first:
// throws posenc::Error naming the value.
void rope_shift(const RopeTensor& keys, const RopeShiftParams& params, const KernelOptions& options = {});

// The same through rope_apply_reference (scalar): the reference the SIMD shift is tested against.
void rope_shift_reference(const RopeTensor& keys, const RopeShiftParams& params);

}  // namespace posenc
