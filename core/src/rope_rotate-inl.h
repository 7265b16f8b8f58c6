// The rotation of one pair (scalar and vector, no FMA), per Highway target (included by
// rope_kernels.cc, the one foreach_target unit).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_ROTATE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_ROTATE_INL_H_
#undef POSENC_ROPE_ROTATE_INL_H_
#else
#define POSENC_ROPE_ROTATE_INL_H_
#endif

#include <hwy/highway.h>

#include "rope_widths-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- one head: in[0 .. 2 half) -> out, float32 --------------------------------------------
// Products are rounded before the add (no FMA) so that every target equals the scalar code.
// dir > 0:  a' = a c - b s,  b' = b c + a s;   dir < 0: the transpose (s -> -s, exactly).
template <bool kForward>
HWY_INLINE void Pair(float a, float b, float c, float s, float* oa, float* ob) {
  if (kForward) {
    *oa = a * c - b * s;
    *ob = b * c + a * s;
  } else {
    *oa = a * c + b * s;
    *ob = b * c - a * s;
  }
}

template <bool kForward, class V>
HWY_INLINE void PairV(V a, V b, V c, V s, V& oa, V& ob) {
  if (kForward) {
    oa = hn::Sub(hn::Mul(a, c), hn::Mul(b, s));
    ob = hn::Add(hn::Mul(b, c), hn::Mul(a, s));
  } else {
    oa = hn::Add(hn::Mul(a, c), hn::Mul(b, s));
    ob = hn::Sub(hn::Mul(b, c), hn::Mul(a, s));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
