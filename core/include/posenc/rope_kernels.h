// Fast RoPE: rotate q and k in place at memory speed (Google Highway, dynamic dispatch).
//
// One call rotates q and, optionally, k (same batch and tokens, own head count: GQA) over
// strided views ([B,S,H,D] or [B,H,S,D] without copies), in every layout of rope_apply.h,
// partial rotary, M-RoPE / 2-D axes, direction +1/-1, storage f32/bf16/f16 with math in f32.
// Results equal rope_apply_reference() bit for bit on every SIMD target (the tests check each
// target), and do not depend on the thread count (each element is computed once, the same way).
//
// cos/sin come from a RopeTable (built once, grows on demand) or are computed per token on the
// fly; both use rope_cos_sin(), so both modes give identical bits. Per token the cos/sin row is
// formed once and reused by every head of q and k.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "posenc/aligned_vector.h"
#include "posenc/rope_apply.h"
#include "posenc/threads.h"

namespace posenc {

// cos/sin (attention factor included, direction +1) for positions 0 .. size-1:
// [position][num_freqs] each. Safe to share between threads: ensure() serialises growth and
// hands out immutable snapshots.
class RopeTable {
 public:
  struct Rows {
    std::int64_t positions = 0;
    int num_freqs = 0;
    AlignedVector<float> cos, sin;
  };

  explicit RopeTable(const RopeApplyParams& params, std::int64_t initial_positions = 4096);

  // A snapshot covering positions 0 .. max_position (the table doubles until it does).
  std::shared_ptr<const Rows> ensure(std::int64_t max_position) const;

  // Whether this table was built for these frequencies, attention factor and angle mode.
  bool matches(const RopeApplyParams& params) const;

 private:
  std::vector<float> inv_freq_;
  RopeApplyParams params_;  // inv_freq points into inv_freq_
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const Rows> rows_;
};

// threads, and table mode (options.table) or cos/sin computed on the fly (nullptr): threads.h.
using RopeKernelOptions = KernelOptions;

// Rotates q, and k when not null, in place. Validates first (throws posenc::Error).
void rope_rotate(const RopeTensor& q, const RopeTensor* k, const PositionIds& positions,
                 const RopeApplyParams& params, const RopeKernelOptions& options = {});

// Whether half-split bf16 results are narrowed by the CPU's own instruction (AVX512_BF16's
// VCVTNE(2)PS2BF16, on the AVX-512 targets) rather than emulated (interleaved and DeepSeek-V3
// layouts always emulate). The bits are the same either way; the tests turn it off to check the
// emulation on machines that have the instruction (not thread-safe: call it between kernel calls).
bool rope_native_bf16();
void allow_rope_native_bf16_for_test(bool allowed);

// The SIMD target rope_rotate uses on this machine ("AVX3", "AVX2", ...).
const char* rope_kernel_target();

// The software prefetch a rope_rotate(q, ..., params, options) call's walk issues: "none", "l1"
// (every cache level) or "l2". Measured per class (the walk: token-major rows, head-major rows
// token by token, or head-major rows in groups with a 1-D table; and the dtype) on this process's
// calls of at least measured_from_bytes (the last-level cache's size, at least 16 MiB): each of
// the first twelve such calls is cut in two token ranges rotated under two policies (the bits
// never depend on the policy) and the fastest (by the lower quartile of its times) stays.
// settled: measured, or fixed by the environment variable POSENC_ROPE_PREFETCH (auto, none, l1,
// l2). Until then "l1" for head-major rows, "none" for token-major ones. Throws posenc::Error when POSENC_ROPE_PREFETCH is another
// value (as rope_rotate does, before rotating anything).
struct RopePrefetchChoice {
  const char* policy;
  bool settled;
  std::size_t measured_from_bytes;
};
RopePrefetchChoice rope_prefetch_choice(const RopeTensor& q, const RopeApplyParams& params, const RopeKernelOptions& options = {});

}  // namespace posenc
