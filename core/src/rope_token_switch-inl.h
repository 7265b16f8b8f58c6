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
#include "rope_deepseek-inl.h"
#include "rope_half_split-inl.h"
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
    case RopeLayout::kHalfSplit: RotateTokenHalfSplit<kForward, T, kNative>(x, offset, c, s, half, tmp, pf); break;
    case RopeLayout::kInterleaved:
      if constexpr (std::is_same_v<T, float>)
        RotateTokenPairsF32<kForward>(x, offset, c, s, half, pf);
      else if constexpr (std::is_same_v<T, hwy::bfloat16_t>)
        RotateTokenPairsBf16<kForward>(x, offset, c, s, half, pf);
      else
        RotateTokenPairsHalf<kForward, T>(x, offset, c, s, half, tmp, tmp2, pf);
      break;
    case RopeLayout::kDeepSeekV3: RotateTokenDeepSeek<kForward, T>(x, offset, c, s, half, tmp); break;
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

// A kernel over run's tokens, chosen once for the run by with_kernel (WithHalfSplitKernel's form).
template <typename T, class WithKernel>
void RotateRun(const RotateJob& job, const RopeTensor& x, const TokenRun& run, const WithKernel& with_kernel) {
  const PositionIds& pos = *job.positions;
  const int half = job.params->num_freqs;
  with_kernel([&](const auto& rotate) {
    TokenRows<T> rows{nullptr, x.head_stride, x.heads, half, nullptr, nullptr, PrefetchOffset(x, 2 * half, job.prefetch), job.prefetch};
    for (int t = run.begin; t < run.end; ++t) {
      const std::int64_t at = pos.at(0, run.batch, t, job.tensors[0].tokens) * half;
      rows.base = static_cast<T*>(x.data) + run.offset + t * x.token_stride;
      rows.c = job.table->cos + at;
      rows.s = job.table->sin + at;
      rotate(rows);
    }
  });
}

// Runs RotateTokenOf over run's tokens. Half-split (and interleaved f16) chooses its kernel once
// for the run: around a call of 4 heads of 128 values, the chain of calls and choices cost (Zen 3,
// AVX2, one thread, bhsd [128, 32 + 8, 128] in L3, ns an element, per token -> once a run) bf16
// 0.171 -> 0.152, f16 0.110 -> 0.090, f32 0.143 -> 0.124; interleaved f16 0.152 -> 0.135.
template <bool kForward>
void RotateTokenRunOf(const RotateJob& job, const RopeTensor& x, const TokenRun& run, float* tmp, float* tmp2) {
  const PositionIds& pos = *job.positions;
  const int half = job.params->num_freqs;
  const auto half_split = [&](auto type, auto native) {
    using T = decltype(type);
    return RotateRun<T>(job, x, run, [&](const auto& body) { WithHalfSplitKernel<kForward, T, decltype(native)::value>(half, tmp, body); });
  };
  if (job.params->layout == RopeLayout::kHalfSplit) {
    switch (x.dtype) {
      case DType::kF32: return half_split(float(), std::false_type());
      case DType::kBF16:
#if POSENC_NATIVE_BF16
        if (job.native_bf16) return half_split(hwy::bfloat16_t(), std::true_type());
#endif
        return half_split(hwy::bfloat16_t(), std::false_type());
      case DType::kF16: return half_split(hwy::float16_t(), std::false_type());
    }
  }
  if (job.params->layout == RopeLayout::kInterleaved && x.dtype == DType::kF16) {
    using F16 = hwy::float16_t;
    return RotateRun<F16>(job, x, run, [&](const auto& body) { WithPairsHalfKernel<kForward, F16>(half, tmp, tmp2, body); });
  }
  for (int t = run.begin; t < run.end; ++t) {
    const std::int64_t at = pos.at(0, run.batch, t, job.tensors[0].tokens) * half;
    RotateTokenOf<kForward>(job, x, run.offset + t * x.token_stride, job.table->cos + at, job.table->sin + at, tmp, tmp2);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
