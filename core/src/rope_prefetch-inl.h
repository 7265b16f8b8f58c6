// When and how far ahead the RoPE token kernels prefetch, per Highway target (included by
// rope_kernels.cc, the one foreach_target unit).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_PREFETCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_PREFETCH_INL_H_
#undef POSENC_ROPE_PREFETCH_INL_H_
#else
#define POSENC_ROPE_PREFETCH_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "posenc/half.h"
#include "posenc/rope_apply.h"
#include "rope_prefetch_policy.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// How far ahead: at least kPrefetchTokens tokens, and kPrefetchBytesInFlight bytes across the
// token's heads. A distance in bytes is one in time (the streams move a token's bytes per step);
// a budget across heads keeps many streams from flooding L1 with lines not yet needed. Measured on
// one thread (Zen 4, thread CPU time, medians): the grouped head-major walk (4 heads,
// rope_walk-inl.h's RotateHeadGroups) with bf16 rows of 128 values (1 KiB a token) reached 0.64
// of the ceiling 2 tokens ahead, 0.78 at 4, 0.80 at 8, 0.71 at 16; f32 (2 KiB a token) 0.93 at 2,
// 0.95 at 4 and 8. The token-outer walk (40 heads: 20 KiB a f32 token) stays at 2.
constexpr std::size_t kPrefetchTokens = 2;
constexpr std::size_t kPrefetchBytesInFlight = 8 << 10;

// How many elements ahead of a row of x (channels values) to prefetch under policy, once per
// kernel call (a division the per-head loop should not repeat); 0: none (kNone). The policy is the
// call's (RotateJob::prefetch: measured per process, rope_prefetch_tuner.h). Head-major rows
// ([B, H, S, D]) are one stream per head, which the hints helped on one Zen 4 host (0.35 -> 0.66
// of the ceiling at 2 threads in the token-outer walk) and cost on another; token-major rows are
// one sequential stream, where the hints cost on both (float32 0.81 -> 1.06 and 0.65 -> 0.99 of
// the ceiling without them, one thread).
HWY_INLINE std::int64_t PrefetchOffset(const RopeTensor& x, int channels, RopePrefetch policy) {
  if (policy == RopePrefetch::kNone || x.heads < 1) return 0;
  const std::size_t token_bytes = static_cast<std::size_t>(channels) * static_cast<std::size_t>(x.heads) * dtype_size(x.dtype);
  const std::size_t tokens_ahead = std::max(kPrefetchTokens, kPrefetchBytesInFlight / token_bytes);
  return static_cast<std::int64_t>(tokens_ahead) * x.token_stride;
}

// Prefetches the channels values ahead elements past row (kL1: prefetcht0, kL2: prefetcht1 on
// x86). A hint: past the end of the tensor it does nothing; integer arithmetic avoids forming an
// out-of-range pointer.
template <typename T>
HWY_INLINE void PrefetchRow(const T* row, std::int64_t ahead, int channels, RopePrefetch policy) {
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(row) + static_cast<std::uintptr_t>(ahead) * sizeof(T);
  const std::size_t bytes = static_cast<std::size_t>(channels) * sizeof(T);
  if (policy == RopePrefetch::kL1) {
    for (std::size_t line = 0; line < bytes; line += 64) __builtin_prefetch(reinterpret_cast<const char*>(at + line), 0, 3);
  } else {
    for (std::size_t line = 0; line < bytes; line += 64) __builtin_prefetch(reinterpret_cast<const char*>(at + line), 0, 2);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
