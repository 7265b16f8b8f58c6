#include "posenc/rope_shift.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_kernels.h"
#include "rope_kernel_job.h"

namespace posenc {
namespace {

// One shift as a rotation the RoPE walks understand: the view of tokens [begin, end), R(delta)
// as direction +1 at position |delta| (or R(-|delta|), direction -1, when delta < 0) with
// attention factor 1, and every token at that one position, on every axis.
struct ShiftCall {
  RopeTensor range;
  RopeApplyParams rope;
  std::int64_t distance = 0;            // |delta|
  std::vector<std::int32_t> same;       // [tokens]: the position id of every token
  PositionIds positions;

  // table_row: every token reads row 0 of a one-row table (the kernels); else every token sits at
  // |delta| and its cos/sin are computed (the reference).
  ShiftCall(const RopeTensor& keys, const RopeShiftParams& p, bool table_row) : range(keys), rope(p.rope) {
    const std::string call = "rope_shift: ";
    if (p.rope.direction != 1) throw Error(call + "rope.direction must be +1 (the keys' own rotation), got " + std::to_string(p.rope.direction));
    if (p.rope.xpos.enabled())
      throw Error(call + "xPos keys cannot be shifted by a rotation (their scale zeta^(-(n - c)/B) would move too); give "
                         "rope.xpos.scale_base 0");
    if (p.delta < -kMaxPosition || p.delta > kMaxPosition)
      throw Error(call + "delta " + std::to_string(p.delta) + " must be in [-(2^31-1), 2^31-1]");
    const int end = p.end < 0 ? keys.tokens : p.end;
    if (p.begin < 0 || p.end < -1 || p.begin > end || end > keys.tokens)
      throw Error(call + "token range [" + std::to_string(p.begin) + ", " + std::to_string(p.end) + ") must lie in [0, " +
                  std::to_string(keys.tokens) + "] with begin <= end (end -1: the last token)");
    distance = p.delta < 0 ? -p.delta : p.delta;
    rope.attention_factor = 1.0;  // applied once, at the keys' first rotation
    rope.direction = p.delta > 0 ? 1 : -1;
    if (rope.layout == RopeLayout::kDeepSeekV3) rope.layout = RopeLayout::kHalfSplit;  // its stored order
    if (keys.data) range.data = static_cast<std::uint8_t*>(keys.data) + p.begin * keys.token_stride * dtype_size(keys.dtype);
    range.tokens = end - p.begin;
    int axes = 1;
    for (int j = 0; rope.axis_of_freq && j < rope.num_freqs; ++j) axes = std::max(axes, rope.axis_of_freq[j] + 1);
    same.assign(static_cast<std::size_t>(std::max(range.tokens, 1)), static_cast<std::int32_t>(distance));
    positions.ids32 = same.data();
    positions.axes = std::min(axes, 3);  // more is validate's error to name
    positions.shared_across_batch = true;  // axis_stride 0: every axis reads the same ids
    validate(range, positions, rope);  // at |delta|: names an angle beyond 2^31 radians
    if (table_row) std::fill(same.begin(), same.end(), 0);
  }
};

}  // namespace

void rope_shift(const RopeTensor& keys, const RopeShiftParams& params, const KernelOptions& options) {
  if (options.table) throw Error("rope_shift: options.table must be null (a model's table holds the attention factor)");
  const ShiftCall call(keys, params, true);
  const int threads = kernel_threads(options.threads, "rope_shift");
  if (params.delta == 0 || std::int64_t{call.range.batch} * call.range.tokens == 0) return;
  RopeApplyParams forward = call.rope;
  forward.direction = 1;  // a table holds +sin; the walk's direction -1 negates it exactly
  const int half = call.rope.num_freqs;
  std::vector<float> cos(static_cast<std::size_t>(half)), sin(static_cast<std::size_t>(half));
  for (int j = 0; j < half; ++j) rope_cos_sin(call.rope.inv_freq[j], call.distance, forward, &cos[j], &sin[j]);
  const CosSinRows row{cos.data(), sin.data()};
  RotateJob job;
  job.tensors[0] = call.range;
  job.positions = &call.positions;
  job.params = &call.rope;
  job.table = &row;
  job.threads = threads;
  job.native_bf16 = rope_native_bf16();
  dispatch_rotate(job);
}

void rope_shift_reference(const RopeTensor& keys, const RopeShiftParams& params) {
  const ShiftCall call(keys, params, false);
  if (params.delta == 0 || std::int64_t{call.range.batch} * call.range.tokens == 0) return;
  rope_apply_reference(call.range, call.positions, call.rope);
}

}  // namespace posenc
