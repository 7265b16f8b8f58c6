// The per-token RoPE kernels of the interleaved layout (half-split's are in rope_half_split-inl.h,
// DeepSeek-V3's in rope_deepseek-inl.h), one per storage type: every head of one token (every
// head reads the same cos/sin row), per Highway target (included by rope_kernels.cc, the one
// foreach_target unit). Which one runs is chosen in rope_token_switch-inl.h.
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_TOKEN_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_TOKEN_KERNELS_INL_H_
#undef POSENC_ROPE_TOKEN_KERNELS_INL_H_
#else
#define POSENC_ROPE_TOKEN_KERNELS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

#include "posenc/half.h"
#include "posenc/rope_apply.h"
#include "rope_convert-inl.h"
#include "rope_half_split-inl.h"
#include "rope_prefetch-inl.h"
#include "rope_rotate-inl.h"
#include "rope_widths-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The interleaved kernels' loop with the token's cos/sin row held in registers (as the half-split
// kernels do, rope_half_split-inl.h): runs step(row, j, c_j, s_j) for j = 0, n, ..., half - n of
// every head's row, the half / n cos/sin vectors loaded once for the token (or, for half 64,
// once per head). False (nothing done) where half is not 2, 4 or 8 vectors or they would not fit
// (kHeldTableVectors), and not 64. Zen 4, one thread, `posenc bench rope --layout interleaved
// --tokens 128` (rows in cache): float32 0.123 -> 0.087 ns an element, bf16 0.106 ->
// 0.092, f16 0.111 either way (its conversions); from memory (8192 tokens, two runs each) bf16
// bshd 0.70-0.72 -> 0.77-0.91 of the ceiling, bhsd 0.62 -> 0.66-0.71.
template <class D, typename T, class Step>
HWY_INLINE bool RotateRowsOfWidth(D df, const RopeTensor& x, T* base, const float* c, const float* s, int half, std::int64_t ahead,
                                  RopePrefetch pf, Step step) {
  const int n = static_cast<int>(hn::Lanes(df));
  const auto run = [&](auto steps) {
    constexpr int kSteps = decltype(steps)::value;
    hn::Vec<D> cv[kSteps], sv[kSteps];
    for (int i = 0; i < kSteps; ++i) {
      cv[i] = hn::LoadU(df, c + i * n);
      sv[i] = hn::LoadU(df, s + i * n);
    }
    for (int h = 0; h < x.heads; ++h) {
      T* row = base + h * x.head_stride;
      if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
      for (int i = 0; i < kSteps; ++i) step(row, i * n, cv[i], sv[i]);
    }
    return true;
  };
  if (half == 2 * n) return run(std::integral_constant<int, 2>());
  if (half == 4 * n && kHeldTableVectors >= 8) return run(std::integral_constant<int, 4>());
  if (half == 8 * n && kHeldTableVectors >= 16) return run(std::integral_constant<int, 8>());
  // Not held, but the loop over a row unrolled (as RotateHeads', rope_half_split-inl.h): Zen 3,
  // AVX2, [128, 32 + 8, 128] in L3, one thread, ns an element: bf16 bshd 0.132 -> 0.123, bhsd
  // 0.153 -> 0.141; f32 0.150 -> 0.147, 0.170 -> 0.161.
  if (half == 64) {
    for (int h = 0; h < x.heads; ++h) {
      T* row = base + h * x.head_stride;
      if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
      for (int j = 0; j < 64; j += n) step(row, j, hn::LoadU(df, c + j), hn::LoadU(df, s + j));
    }
    return true;
  }
  return false;
}

// Interleaved bf16, every head of one token: a pair (a, b) is one 32-bit lane, a in the low 16
// bits and b in the high, so a is the lane shifted left and b the lane masked, and the rotated
// pair merges back the same way — no interleaving shuffles (measured: 1.17x float32's element
// rate on one thread with them, on Zen 4).
template <bool kForward>
void RotateTokenPairsBf16(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, RopePrefetch pf) {
  const DW df;
  const hn::RebindToUnsigned<DW> du;
  const int n = static_cast<int>(hn::Lanes(df));  // pairs a vector
  const auto high = hn::Set(du, 0xffff0000u);
  std::uint16_t* base = static_cast<std::uint16_t*>(x.data) + offset;
  const std::int64_t ahead = PrefetchOffset(x, 2 * half, pf);  // elements; 0: no prefetch
  const auto step = [&](std::uint16_t* row, int j, hn::Vec<DW> cj, hn::Vec<DW> sj) {
    const auto ab = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(row + 2 * j));
    decltype(hn::Zero(df)) oa, ob;
    PairV<kForward>(hn::BitCast(df, hn::ShiftLeft<16>(ab)), hn::BitCast(df, hn::And(ab, high)), cj, sj, oa, ob);
    hn::StoreU(Bf16Pairs(df, oa, ob), du, reinterpret_cast<std::uint32_t*>(row + 2 * j));
  };
  if (RotateRowsOfWidth(df, x, base, c, s, half, ahead, pf, step)) return;
  for (int h = 0; h < x.heads; ++h) {
    std::uint16_t* row = base + h * x.head_stride;
    if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
    int j = 0;
    for (; j + n <= half; j += n) step(row, j, hn::LoadU(df, c + j), hn::LoadU(df, s + j));
    for (; j < half; ++j) {
      float oa, ob;
      Pair<kForward>(bf16_to_float(row[2 * j]), bf16_to_float(row[2 * j + 1]), c[j], s[j], &oa, &ob);
      row[2 * j] = float_to_bf16(oa);
      row[2 * j + 1] = float_to_bf16(ob);
    }
  }
}

// Interleaved float32, every head of one token.
template <bool kForward>
void RotateTokenPairsF32(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, RopePrefetch pf) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  float* base = static_cast<float*>(x.data) + offset;
  const std::int64_t ahead = PrefetchOffset(x, 2 * half, pf);  // elements; 0: no prefetch
  const auto step = [&](float* row, int j, hn::Vec<DF> cj, hn::Vec<DF> sj) {
    decltype(hn::Zero(df)) a, b, oa, ob;
    hn::LoadInterleaved2(df, row + 2 * j, a, b);
    PairV<kForward>(a, b, cj, sj, oa, ob);
    hn::StoreInterleaved2(oa, ob, df, row + 2 * j);
  };
  if (RotateRowsOfWidth(df, x, base, c, s, half, ahead, pf, step)) return;
  for (int h = 0; h < x.heads; ++h) {
    float* row = base + h * x.head_stride;
    if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
    int j = 0;
    for (; j + n <= half; j += n) step(row, j, hn::LoadU(df, c + j), hn::LoadU(df, s + j));
    for (; j < half; ++j) Pair<kForward>(row[2 * j], row[2 * j + 1], c[j], s[j], &row[2 * j], &row[2 * j + 1]);
  }
}

// Interleaved f16, every head's rows of one token. Widened, a pair's two values are neighbouring
// float lanes, so the rotation is x c2 + swap(x) s2, with c2 the token's cos and s2 its sin signed
// for the direction, each entry twice (ExpandCosSinPairs, once per token): a*c + b*(-s) has the
// bits of a*c - b*s (negation is exact), NaN and signed zeros included. No de-interleaving:
// splitting the 16-bit lanes into even and odd and back held f16 to 0.50-0.53 of the ceiling on
// one thread, 0.79-0.83 now (Zen 3, AVX2, [8192, 32 + 8, 128], bhsd and bshd). kHalf: half as a
// constant (the loop over a row unrolled), 0: at run time.
template <bool kForward, typename T, int kHalf>
HWY_INLINE void RotateHeadsPairsHalf(const TokenRows<T>& r, const float* c2, const float* s2) {
  const TagFor<T> df;
  const int n = static_cast<int>(hn::Lanes(df));
  const int half = kHalf != 0 ? kHalf : r.half, values = 2 * half;
  // One lane (HWY_SCALAR) has no neighbour to swap with: the scalar loop below does every pair.
  const int vector_end = n >= 2 ? values / n * n : 0;
  for (int h = 0; h < r.heads; ++h) {
    T* row = r.base + h * r.head_stride;
    if (r.ahead != 0) PrefetchRow(row, r.ahead, values, r.pf);
    for (int v = 0; v < vector_end; v += n) {
      const auto xv = LoadAs(df, row + v);
      StoreAs(df, hn::Add(hn::Mul(xv, hn::LoadU(df, c2 + v)), hn::Mul(hn::Reverse2(df, xv), hn::LoadU(df, s2 + v))), row + v);
    }
    for (int j = vector_end / 2; j < half; ++j) {
      float oa, ob;
      Pair<kForward>(LoadScalar(row + 2 * j), LoadScalar(row + 2 * j + 1), r.c[j], r.s[j], &oa, &ob);
      StoreScalar(oa, row + 2 * j);
      StoreScalar(ob, row + 2 * j + 1);
    }
  }
}

// c2, s2 (2 half floats each) from the token's cos/sin row, for RotateHeadsPairsHalf.
template <bool kForward>
HWY_INLINE void ExpandCosSinPairs(const float* c, const float* s, int half, float* c2, float* s2) {
  int j = 0;
#if HWY_TARGET != HWY_SCALAR
  const DW df;
  const int n = static_cast<int>(hn::Lanes(df));
  const hn::RebindToSigned<DW> di;
  HWY_ALIGN std::int32_t lower[hn::MaxLanes(di)], upper[hn::MaxLanes(di)];
  for (int i = 0; i < n; ++i) lower[i] = i / 2, upper[i] = n / 2 + i / 2;  // lane i takes entry i / 2 of its half
  const auto lower_half = hn::SetTableIndices(df, lower), upper_half = hn::SetTableIndices(df, upper);
  const auto minus = hn::Set(df, -0.0f), zero = hn::Zero(df);
  const auto sign = kForward ? hn::OddEven(zero, minus) : hn::OddEven(minus, zero);  // forward: even lanes (a's) -s
  for (; j + n <= half; j += n) {
    const auto cj = hn::LoadU(df, c + j), sj = hn::LoadU(df, s + j);
    hn::StoreU(hn::TableLookupLanes(cj, lower_half), df, c2 + 2 * j);
    hn::StoreU(hn::TableLookupLanes(cj, upper_half), df, c2 + 2 * j + n);
    hn::StoreU(hn::Xor(hn::TableLookupLanes(sj, lower_half), sign), df, s2 + 2 * j);
    hn::StoreU(hn::Xor(hn::TableLookupLanes(sj, upper_half), sign), df, s2 + 2 * j + n);
  }
#endif
  for (; j < half; ++j) {
    c2[2 * j] = c2[2 * j + 1] = c[j];
    s2[2 * j] = kForward ? -s[j] : s[j];
    s2[2 * j + 1] = kForward ? s[j] : -s[j];
  }
}

// Calls body(rotate) once, rotate(rows) expanding the token's cos/sin into c2, s2 and rotating
// its interleaved f16 rows: the kernel for rows of half values chosen once (as
// WithHalfSplitKernel does, rope_half_split-inl.h).
template <bool kForward, typename T, class Body>
HWY_INLINE void WithPairsHalfKernel(int half, float* c2, float* s2, const Body& body) {
  const auto kernel = [c2, s2](auto half_constant) {
    return [c2, s2](const TokenRows<T>& r) {
      ExpandCosSinPairs<kForward>(r.c, r.s, r.half, c2, s2);
      RotateHeadsPairsHalf<kForward, T, decltype(half_constant)::value>(r, c2, s2);
    };
  };
  if (half == 64) return body(kernel(std::integral_constant<int, 64>()));
  return body(kernel(std::integral_constant<int, 0>()));
}

template <bool kForward, typename T>
void RotateTokenPairsHalf(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, float* c2, float* s2,
                          RopePrefetch pf) {
  const TokenRows<T> rows{static_cast<T*>(x.data) + offset, x.head_stride, x.heads, half, c, s, PrefetchOffset(x, 2 * half, pf), pf};
  WithPairsHalfKernel<kForward, T>(half, c2, s2, [&](const auto& rotate) { rotate(rows); });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
