// When and how far ahead the RoPE token kernels prefetch, per Highway target (included by
// rope_kernels.cc, the one foreach_target unit).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_PREFETCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_PREFETCH_INL_H_
#undef POSENC_ROPE_PREFETCH_INL_H_
#else
#define POSENC_ROPE_PREFETCH_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

#include "posenc/rope_apply.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kPrefetchTokens = 2;

// Prefetches the same head kPrefetchTokens tokens ahead, so DRAM latency hides behind this
// token's work — only where a token's heads are not one contiguous block ([B, H, S, D]: one
// stream per head, more than the hardware prefetchers follow; measured 0.35 -> 0.66 of the
// memory ceiling at 2 threads). Where they are ([B, S, H, D]), the token is one sequential
// stream the hardware prefetches itself, and the hints only cost: float32 went from 0.81 to
// 1.06 of the ceiling on one thread without them (Zen 4, `posenc bench rope --threads 1`).
// A hint: past the end of the tensor it does nothing; integer arithmetic avoids forming an
// out-of-range pointer.
HWY_INLINE bool WantsPrefetch(const RopeTensor& x) { return x.heads > 1 && x.head_stride != x.head_dim; }

template <typename T>
HWY_INLINE void PrefetchAhead(const T* row, std::int64_t token_stride, int channels) {
  const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(row) + kPrefetchTokens * token_stride * sizeof(T);
  for (std::size_t line = 0; line < channels * sizeof(T); line += 64) hwy::Prefetch(reinterpret_cast<const char*>(ahead + line));
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
