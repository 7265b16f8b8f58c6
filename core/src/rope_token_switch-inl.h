// Which per-token RoPE kernel rotates a token: the switch over layout and storage type (and
// whether the CPU narrows bf16 itself), per Highway target (included by rope_kernels.cc, the one
// foreach_target unit).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_TOKEN_SWITCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_TOKEN_SWITCH_INL_H_
#undef POSENC_ROPE_TOKEN_SWITCH_INL_H_
#else
#define POSENC_ROPE_TOKEN_SWITCH_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

#include "posenc/rope_apply.h"
#include "rope_convert-inl.h"
#include "rope_kernel_job.h"
#include "rope_token_kernels-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One token of one tensor, every head: the layout and the storage type chosen here.
template <bool kForward, typename T, bool kNative = false>
void RotateToken(const RopeTensor& x, std::int64_t offset, RopeLayout layout, const float* c, const float* s,
                 int half, float* tmp, float* tmp2, RopePrefetch pf) {
  switch (layout) {
    case RopeLayout::kHalfSplit:
      if constexpr (std::is_same_v<T, hwy::bfloat16_t> && !kNative)
        RotateTokenHalfSplitBf16Pairs<kForward>(x, offset, c, s, half, tmp, pf);
      else
        RotateTokenHalfSplit<kForward, T, kNative>(x, offset, c, s, half, pf);
      break;
    case RopeLayout::kInterleaved:
      if constexpr (std::is_same_v<T, float>)
        RotateTokenPairsF32<kForward>(x, offset, c, s, half, pf);
      else if constexpr (std::is_same_v<T, hwy::bfloat16_t>)
        RotateTokenPairsBf16<kForward>(x, offset, c, s, half, pf);
      else
        RotateTokenPairsHalf<kForward, T>(x, offset, c, s, half, pf);
      break;
    case RopeLayout::kDeepSeekV3: RotateTokenDeepSeek<kForward, T>(x, offset, c, s, half, tmp, tmp2); break;
  }
}

// One token of x (every head of the view), its storage type chosen here. tmp, tmp2: 2 * half
// floats of scratch each.
template <bool kForward>
void RotateTokenOf(const RotateJob& job, const RopeTensor& x, std::int64_t offset, const float* c, const float* s,
                   float* tmp, float* tmp2) {
  const RopeLayout layout = job.params->layout;
  const int half = job.params->num_freqs;
  switch (x.dtype) {
    case DType::kF32: RotateToken<kForward, float>(x, offset, layout, c, s, half, tmp, tmp2, job.prefetch); break;
    case DType::kBF16:
#if POSENC_NATIVE_BF16
      if (job.native_bf16) {
        RotateToken<kForward, hwy::bfloat16_t, true>(x, offset, layout, c, s, half, tmp, tmp2, job.prefetch);
        break;
      }
#endif
      RotateToken<kForward, hwy::bfloat16_t>(x, offset, layout, c, s, half, tmp, tmp2, job.prefetch);
      break;
    case DType::kF16: RotateToken<kForward, hwy::float16_t>(x, offset, layout, c, s, half, tmp, tmp2, job.prefetch); break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
