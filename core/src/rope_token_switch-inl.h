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

// A run of tokens of one batch row of x, each token's cos/sin the table's row at its position (the
// grouped head-major walk, rope_walk-inl.h: a few heads a token, so a token's call is short).
struct TokenRun {
  std::int64_t offset = 0;  // elements to the batch row's first head of x, token 0
  int batch = 0, begin = 0, end = 0;
};

// Runs RotateTokenOf over run's tokens. Emulated bf16 half-split chooses its kernel once for the
// run: its calls, 4 heads of 128 values each, cost ~10% in the chain of calls and the prefetch
// distance's division per token (Zen 3, bhsd [128, 32 + 8, 128] in L3, one thread).
template <bool kForward>
void RotateTokenRunOf(const RotateJob& job, const RopeTensor& x, const TokenRun& run, float* tmp, float* tmp2) {
  const PositionIds& pos = *job.positions;
  const int half = job.params->num_freqs;
  const auto row_at = [&](int t) { return pos.at(0, run.batch, t, job.tensors[0].tokens) * half; };
  const bool native = POSENC_NATIVE_BF16 && job.native_bf16;
  if (x.dtype == DType::kBF16 && job.params->layout == RopeLayout::kHalfSplit && !native) {
    Bf16PairsRows rows{nullptr, x.head_stride, x.heads, half, nullptr, nullptr, tmp, PrefetchOffset(x, 2 * half, job.prefetch),
                       job.prefetch};
    const auto each = [&](auto half_constant) {
      for (int t = run.begin; t < run.end; ++t) {
        rows.base = static_cast<std::uint16_t*>(x.data) + run.offset + t * x.token_stride;
        rows.c = job.table->cos + row_at(t);
        rows.s = job.table->sin + row_at(t);
        SplitCosSinPairs(rows.c, rows.s, half, tmp);
        RotateHeadsBf16Pairs<kForward, decltype(half_constant)::value>(rows);
      }
    };
    if (half == 64) return each(std::integral_constant<int, 64>());
    if (half == 32) return each(std::integral_constant<int, 32>());
    return each(std::integral_constant<int, 0>());
  }
  for (int t = run.begin; t < run.end; ++t)
    RotateTokenOf<kForward>(job, x, run.offset + t * x.token_stride, job.table->cos + row_at(t), job.table->sin + row_at(t), tmp, tmp2);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
