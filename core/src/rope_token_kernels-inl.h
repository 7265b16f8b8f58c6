// The per-token RoPE kernels, one per layout and storage type: every head of one token (every
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
#include "rope_prefetch-inl.h"
#include "rope_rotate-inl.h"
#include "rope_widths-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// How many cos/sin vectors a token kernel may hold in registers: 16 of AVX-512's 32, 8 of the 16
// that other x86 targets have (and a conservative 8 elsewhere).
inline constexpr int kHeldTableVectors = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 ? 16 : 8;

// Half-split with the token's cos/sin row held in registers for every head (half = 2 kSteps
// Lanes(df)): loaded once per token, not once per head. The rows' loads are then the only ones in
// the loop; on a Zen 4 EPYC, one thread, [8192, 32 + 8, 128], medians of three interleaved runs
// (`posenc bench rope --threads 1 --memory M --dtype bf16`): bshd 0.80 -> 0.87 of the ceiling,
// bhsd 0.64 -> 0.75; float32 with the rows in cache (128 tokens) 0.079 -> 0.065 ns an element.
template <bool kForward, typename T, bool kNative, int kSteps>
void RotateTokenHalfSplitHeld(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, RopePrefetch pf) {
  const TagFor<T> df;
  const int n = static_cast<int>(hn::Lanes(df));
  T* base = static_cast<T*>(x.data) + offset;
  const std::int64_t ahead = PrefetchOffset(x, 2 * half, pf);  // elements; 0: no prefetch
  decltype(hn::Zero(df)) cv[2 * kSteps], sv[2 * kSteps];
  for (int i = 0; i < 2 * kSteps; ++i) {
    cv[i] = hn::LoadU(df, c + i * n);
    sv[i] = hn::LoadU(df, s + i * n);
  }
  for (int h = 0; h < x.heads; ++h) {
    T* row = base + h * x.head_stride;
    if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
    for (int i = 0; i < kSteps; ++i) {
      const int j = 2 * n * i;
      decltype(hn::Zero(df)) oa0, ob0, oa1, ob1;
      PairV<kForward>(LoadAs(df, row + j), LoadAs(df, row + j + half), cv[2 * i], sv[2 * i], oa0, ob0);
      PairV<kForward>(LoadAs(df, row + j + n), LoadAs(df, row + j + n + half), cv[2 * i + 1], sv[2 * i + 1], oa1, ob1);
      Store2As<kNative>(df, oa0, oa1, row + j);
      Store2As<kNative>(df, ob0, ob1, row + j + half);
    }
  }
}

// The interleaved kernels' loop with the token's cos/sin row held in registers (as above): runs
// step(row, j, c_j, s_j) for j = 0, n, ..., half - n of every head's row, the half / n cos/sin
// vectors loaded once for the token. False (nothing done) where half is not 2, 4 or 8 vectors
// or they would not fit (kHeldTableVectors). Zen 4, one thread, `posenc bench rope --layout
// interleaved --tokens 128` (rows in cache): float32 0.123 -> 0.087 ns an element, bf16 0.106 ->
// 0.092, f16 0.111 either way (its conversions); from memory (8192 tokens, two runs each) bf16
// bshd 0.70-0.72 -> 0.77-0.91 of the ceiling, bhsd 0.62 -> 0.66-0.71.
template <class D, typename T, class Step>
HWY_INLINE bool RotateRowsHeld(D df, const RopeTensor& x, T* base, const float* c, const float* s, int half, std::int64_t ahead,
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
  return false;
}

// Half-split, every head of one token (heads outer: each row is streamed once, in order).
template <bool kForward, typename T, bool kNative>
void RotateTokenHalfSplit(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, RopePrefetch pf) {
  const TagFor<T> df;
  const int n = static_cast<int>(hn::Lanes(df));
  if (half == 2 * n) return RotateTokenHalfSplitHeld<kForward, T, kNative, 1>(x, offset, c, s, half, pf);
  if (half == 4 * n) return RotateTokenHalfSplitHeld<kForward, T, kNative, 2>(x, offset, c, s, half, pf);
  if (half == 8 * n && kHeldTableVectors >= 16) return RotateTokenHalfSplitHeld<kForward, T, kNative, 4>(x, offset, c, s, half, pf);
  T* base = static_cast<T*>(x.data) + offset;
  const std::int64_t ahead = PrefetchOffset(x, 2 * half, pf);  // elements; 0: no prefetch
  for (int h = 0; h < x.heads; ++h) {
    T* row = base + h * x.head_stride;
    if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
    int j = 0;
    for (; j + 2 * n <= half; j += 2 * n) {  // two vectors a step: bf16 narrows them in one instruction
      decltype(hn::Zero(df)) oa0, ob0, oa1, ob1;
      PairV<kForward>(LoadAs(df, row + j), LoadAs(df, row + j + half), hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa0, ob0);
      PairV<kForward>(LoadAs(df, row + j + n), LoadAs(df, row + j + n + half), hn::LoadU(df, c + j + n),
                      hn::LoadU(df, s + j + n), oa1, ob1);
      Store2As<kNative>(df, oa0, oa1, row + j);
      Store2As<kNative>(df, ob0, ob1, row + j + half);
    }
    for (; j + n <= half; j += n) {
      decltype(hn::Zero(df)) oa, ob;
      PairV<kForward>(LoadAs(df, row + j), LoadAs(df, row + j + half), hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa, ob);
      StoreAs<kNative>(df, oa, row + j);
      StoreAs<kNative>(df, ob, row + j + half);
    }
    for (; j < half; ++j) {
      float oa, ob;
      Pair<kForward>(LoadScalar(row + j), LoadScalar(row + j + half), c[j], s[j], &oa, &ob);
      StoreScalar(oa, row + j);
      StoreScalar(ob, row + j + half);
    }
  }
}

// Half-split bf16 where the CPU has no bf16 instruction: each 32-bit lane holds two neighbouring
// values (even in the low 16 bits, odd in the high), so widening is one shift or one mask and
// the two results merge back with a mask and a shift — none of the 16 <-> 32-bit lane
// conversions, which cross 128-bit blocks on x86 (measured on AVX2: 0.83x float32's element
// rate on one thread with them). cos/sin are split into even and odd entries once per token,
// into scratch (2 * half floats).
// The token's cos/sin split into even and odd entries (ce, co, se, so: half / 2 floats each, in
// split), the order of the pair lanes' two values.
HWY_INLINE void SplitCosSinPairs(const float* c, const float* s, int half, float* split) {
  const int pairs = half / 2;
  float *ce = split, *co = ce + pairs, *se = co + pairs, *so = se + pairs;
  int pair = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane: the scalar loop below
  const DW df;
  const int n = static_cast<int>(hn::Lanes(df));
  for (; pair + n <= pairs; pair += n) {
    const auto c_lo = hn::LoadU(df, c + 2 * pair), c_hi = hn::LoadU(df, c + 2 * pair + n);
    const auto s_lo = hn::LoadU(df, s + 2 * pair), s_hi = hn::LoadU(df, s + 2 * pair + n);
    hn::StoreU(hn::ConcatEven(df, c_hi, c_lo), df, ce + pair);
    hn::StoreU(hn::ConcatOdd(df, c_hi, c_lo), df, co + pair);
    hn::StoreU(hn::ConcatEven(df, s_hi, s_lo), df, se + pair);
    hn::StoreU(hn::ConcatOdd(df, s_hi, s_lo), df, so + pair);
  }
#endif
  for (; pair < pairs; ++pair) {
    ce[pair] = c[2 * pair];
    co[pair] = c[2 * pair + 1];
    se[pair] = s[2 * pair];
    so[pair] = s[2 * pair + 1];
  }
}

// Every head's row of one token, the split cos/sin in split. kHalf: half as a constant (the loop
// over a row unrolled, its bounds and the row's offsets known), 0: half at run time. A row of 128
// values is 4 steps, and as a runtime loop they took 0.147 ns an element, 0.129 unrolled (Zen 3,
// AVX2, one thread, bshd [128, 32 + 8, 128] in L3; the steps alone, in L1, 0.104).
struct Bf16PairsRows {
  std::uint16_t* base;  // the token's first head
  std::int64_t head_stride;
  int heads, half;
  const float *c, *s;  // the token's cos/sin row, as in the table
  const float* split;  // the same split by SplitCosSinPairs
  std::int64_t ahead;  // PrefetchOffset's elements; 0: no prefetch
  RopePrefetch pf;
};
template <bool kForward, int kHalf>
HWY_INLINE void RotateHeadsBf16Pairs(const Bf16PairsRows& r) {
  const DW df;
  const hn::RebindToUnsigned<DW> du;
  const int n = static_cast<int>(hn::Lanes(df));  // 32-bit lanes: 2 n values a vector
  const int half = kHalf != 0 ? kHalf : r.half, pairs = half / 2;
  const float *ce = r.split, *co = ce + pairs, *se = co + pairs, *so = se + pairs;
  const std::int64_t head_stride = r.head_stride, ahead = r.ahead;
  const int heads = r.heads;
  const RopePrefetch pf = r.pf;
  std::uint16_t* const base = r.base;
  const auto high = hn::Set(du, 0xffff0000u);
  const int vector_end = half / (2 * n) * (2 * n);
  for (int h = 0; h < heads; ++h) {
    std::uint16_t* row = base + h * head_stride;
    if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
    for (int j = 0; j < vector_end; j += 2 * n) {
      const auto a = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(row + j));
      const auto b = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(row + j + half));
      const int i = j / 2;
      decltype(hn::Zero(df)) oa_even, ob_even, oa_odd, ob_odd;
      PairV<kForward>(hn::BitCast(df, hn::ShiftLeft<16>(a)), hn::BitCast(df, hn::ShiftLeft<16>(b)), hn::LoadU(df, ce + i),
                      hn::LoadU(df, se + i), oa_even, ob_even);
      PairV<kForward>(hn::BitCast(df, hn::And(a, high)), hn::BitCast(df, hn::And(b, high)), hn::LoadU(df, co + i),
                      hn::LoadU(df, so + i), oa_odd, ob_odd);
      hn::StoreU(Bf16Pairs(df, oa_even, oa_odd), du, reinterpret_cast<std::uint32_t*>(row + j));
      hn::StoreU(Bf16Pairs(df, ob_even, ob_odd), du, reinterpret_cast<std::uint32_t*>(row + j + half));
    }
    for (int j = vector_end; j < half; ++j) {
      float oa, ob;
      Pair<kForward>(bf16_to_float(row[j]), bf16_to_float(row[j + half]), r.c[j], r.s[j], &oa, &ob);
      row[j] = float_to_bf16(oa);
      row[j + half] = float_to_bf16(ob);
    }
  }
}

// Half-split bf16 where the CPU has no bf16 instruction: each 32-bit lane holds two neighbouring
// values (even in the low 16 bits, odd in the high), so widening is one shift or one mask and
// the two results merge back with a mask and a shift — none of the 16 <-> 32-bit lane
// conversions, which cross 128-bit blocks on x86 (measured on AVX2: 0.83x float32's element
// rate on one thread with them). cos/sin are split into even and odd entries once per token,
// into scratch (2 * half floats).
template <bool kForward>
void RotateTokenHalfSplitBf16Pairs(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half,
                                   float* scratch, RopePrefetch pf) {
  SplitCosSinPairs(c, s, half, scratch);
  const Bf16PairsRows rows{static_cast<std::uint16_t*>(x.data) + offset, x.head_stride, x.heads, half, c, s, scratch,
                           PrefetchOffset(x, 2 * half, pf), pf};
  if (half == 64) return RotateHeadsBf16Pairs<kForward, 64>(rows);
  if (half == 32) return RotateHeadsBf16Pairs<kForward, 32>(rows);
  RotateHeadsBf16Pairs<kForward, 0>(rows);
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
  if (RotateRowsHeld(df, x, base, c, s, half, ahead, pf, step)) return;
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
  if (RotateRowsHeld(df, x, base, c, s, half, ahead, pf, step)) return;
  for (int h = 0; h < x.heads; ++h) {
    float* row = base + h * x.head_stride;
    if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
    int j = 0;
    for (; j + n <= half; j += n) step(row, j, hn::LoadU(df, c + j), hn::LoadU(df, s + j));
    for (; j < half; ++j) Pair<kForward>(row[2 * j], row[2 * j + 1], c[j], s[j], &row[2 * j], &row[2 * j + 1]);
  }
}

// Interleaved f16, every head of one token: the 16-bit values are split into even and odd
// lanes as integers, widened, rotated in float32, narrowed and re-interleaved.
template <bool kForward, typename T>
void RotateTokenPairsHalf(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, RopePrefetch pf) {
  const DW df;
  const BitsOf<DW> du16;
  const int n = static_cast<int>(hn::Lanes(df));
  T* base = static_cast<T*>(x.data) + offset;
  const std::int64_t ahead = PrefetchOffset(x, 2 * half, pf);  // elements; 0: no prefetch
  const auto step = [&](T* row, int j, hn::Vec<DW> cj, hn::Vec<DW> sj) {
    std::uint16_t* bits = reinterpret_cast<std::uint16_t*>(row);
    decltype(hn::Zero(du16)) even, odd;
    hn::LoadInterleaved2(du16, bits + 2 * j, even, odd);
    decltype(hn::Zero(df)) oa, ob;
    PairV<kForward>(FromBits<T>(df, even), FromBits<T>(df, odd), cj, sj, oa, ob);
    hn::StoreInterleaved2(ToBits<T>(df, oa), ToBits<T>(df, ob), du16, bits + 2 * j);
  };
  if (RotateRowsHeld(df, x, base, c, s, half, ahead, pf, step)) return;
  for (int h = 0; h < x.heads; ++h) {
    T* row = base + h * x.head_stride;
    if (ahead != 0) PrefetchRow(row, ahead, 2 * half, pf);
    int j = 0;
    for (; j + n <= half; j += n) step(row, j, hn::LoadU(df, c + j), hn::LoadU(df, s + j));
    for (; j < half; ++j) {
      float oa, ob;
      Pair<kForward>(LoadScalar(row + 2 * j), LoadScalar(row + 2 * j + 1), c[j], s[j], &oa, &ob);
      StoreScalar(oa, row + 2 * j);
      StoreScalar(ob, row + 2 * j + 1);
    }
  }
}

// DeepSeek-V3, every head of one token, through float copies (in, out: 2 * half floats each).
template <bool kForward, typename T>
void RotateTokenDeepSeek(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, float* in,
                         float* out) {
  T* base = static_cast<T*>(x.data) + offset;
  for (int h = 0; h < x.heads; ++h) {
    T* row = base + h * x.head_stride;
    ToFloatRow(row, in, 2 * half);
    if (kForward)
      PairsToHalves(in, out, c, s, half);
    else
      HalvesToPairs(in, out, c, s, half);
    FromFloatRow(out, row, 2 * half);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
