// The rotation of one pair (scalar and vector, no FMA) and DeepSeek-V3's pair <-> half rotation
// of one head, per Highway target (included by rope_kernels.cc, the one foreach_target unit).
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

// ---- DeepSeek-V3 (HF apply_rotary_pos_emb_interleave), one head of float copies -----------
// Forward: pairs (2j, 2j+1) in, halves (j, j + half) out. in and out must differ.
void PairsToHalves(const float* in, float* out, const float* c, const float* s, int half) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  int j = 0;
  for (; j + n <= half; j += n) {
    decltype(hn::Zero(df)) a, b, oa, ob;
    hn::LoadInterleaved2(df, in + 2 * j, a, b);
    PairV<true>(a, b, hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa, ob);
    hn::StoreU(oa, df, out + j);
    hn::StoreU(ob, df, out + j + half);
  }
  for (; j < half; ++j) Pair<true>(in[2 * j], in[2 * j + 1], c[j], s[j], &out[j], &out[j + half]);
}

// Its transpose (the backward pass): the gradient read in the order the forward wrote it
// (halves), rotated by R^T, returned in the order the forward read (pairs). in and out must differ.
void HalvesToPairs(const float* in, float* out, const float* c, const float* s, int half) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  int j = 0;
  for (; j + n <= half; j += n) {
    decltype(hn::Zero(df)) oa, ob;
    PairV<false>(hn::LoadU(df, in + j), hn::LoadU(df, in + j + half), hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa, ob);
    hn::StoreInterleaved2(oa, ob, df, out + 2 * j);
  }
  for (; j < half; ++j) Pair<false>(in[j], in[j + half], c[j], s[j], &out[2 * j], &out[2 * j + 1]);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
