// The vector widths of the RoPE kernels, per Highway target (included by rope_kernels.cc,
// the one foreach_target unit).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_WIDTHS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_WIDTHS_INL_H_
#undef POSENC_ROPE_WIDTHS_INL_H_
#else
#define POSENC_ROPE_WIDTHS_INL_H_
#endif

#include <hwy/highway.h>

#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 256-bit vectors, also on AVX-512 machines: measured on an AMD EPYC (Zen 4, 512-bit ops
// split in two), full-width vectors reached 0.65 of the memory ceiling on one thread and 256-bit
// ones 1.0 — the kernel is memory-bound, and wider vectors buy nothing but split accesses.
using DF = hn::CappedTag<float, 8>;
// bf16/f16 rows: full-width float math, whose memory accesses (16-bit lanes) are half as wide.
using DW = hn::ScalableTag<float>;
// The float tag for a storage type: memory accesses of at most 256 bits either way.
template <typename T>
using TagFor = std::conditional_t<std::is_same_v<T, float>, DF, DW>;

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
