// The half-split RoPE kernels (a value j pairs with j + half): every head of one token, per
// Highway target (included by rope_kernels.cc, the one foreach_target unit), and the choice of one
// for a row width, made once for a run of tokens (rope_token_switch-inl.h).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_HALF_SPLIT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_HALF_SPLIT_INL_H_
#undef POSENC_ROPE_HALF_SPLIT_INL_H_
#else
#define POSENC_ROPE_HALF_SPLIT_INL_H_
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

// One token's rows of one tensor, as a kernel below rotates them: heads rows of 2 half values.
template <typename T>
struct TokenRows {
  T* base = nullptr;  // the token's first head
  std::int64_t head_stride = 0;
  int heads = 0, half = 0;
  const float *c = nullptr, *s = nullptr;  // the token's cos/sin row (half floats each)
  std::int64_t ahead = 0;                  // PrefetchOffset's elements; 0: no prefetch
  RopePrefetch pf = RopePrefetch::kNone;
};

// The token's cos/sin row held in registers for every head (half = 2 kSteps Lanes(df)): loaded
// once per token, not once per head. The rows' loads are then the only ones in the loop; on a Zen
// 4 EPYC, one thread, [8192, 32 + 8, 128], medians of three interleaved runs (`posenc bench rope
// --threads 1 --memory M --dtype bf16`): bshd 0.80 -> 0.87 of the ceiling, bhsd 0.64 -> 0.75;
// float32 with the rows in cache (128 tokens) 0.079 -> 0.065 ns an element.
template <bool kForward, typename T, bool kNative, int kSteps>
HWY_INLINE void RotateHeadsHeld(const TokenRows<T>& r) {
  const TagFor<T> df;
  const int n = static_cast<int>(hn::Lanes(df)), half = 2 * kSteps * n;
  decltype(hn::Zero(df)) cv[2 * kSteps], sv[2 * kSteps];
  for (int i = 0; i < 2 * kSteps; ++i) {
    cv[i] = hn::LoadU(df, r.c + i * n);
    sv[i] = hn::LoadU(df, r.s + i * n);
  }
  for (int h = 0; h < r.heads; ++h) {
    T* row = r.base + h * r.head_stride;
    if (r.ahead != 0) PrefetchRow(row, r.ahead, 2 * half, r.pf);
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

// cos/sin loaded per head where they would not fit in registers. kHalf: half as a constant (the
// loop over a row unrolled, its bounds and offsets known), 0: half at run time. A row of 128
// values on AVX2 is 4 steps, and as a runtime loop in a kernel of its own they took (Zen 3, one
// thread, bshd [128, 32 + 8, 128] in L3, ns an element) f32 0.125, f16 0.098; unrolled and
// inlined into the token's call (WithHalfSplitKernel) 0.112 and 0.084.
template <bool kForward, typename T, bool kNative, int kHalf>
HWY_INLINE void RotateHeads(const TokenRows<T>& r) {
  const TagFor<T> df;
  const int n = static_cast<int>(hn::Lanes(df));
  const int half = kHalf != 0 ? kHalf : r.half;
  const float *c = r.c, *s = r.s;
  for (int h = 0; h < r.heads; ++h) {
    T* row = r.base + h * r.head_stride;
    if (r.ahead != 0) PrefetchRow(row, r.ahead, 2 * half, r.pf);
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

// The token's cos/sin split into even and odd entries (ce, co, se, so: half / 2 floats each, in
// split), the order of the pair lanes' two values (RotateHeadsBf16Pairs).
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

// bf16 where the CPU has no bf16 instruction: each 32-bit lane holds two neighbouring values
// (even in the low 16 bits, odd in the high), so widening is one shift or one mask and the two
// results merge back in Bf16Pairs — none of the 16 <-> 32-bit lane conversions, which cross
// 128-bit blocks on x86 (measured on AVX2: 0.83x float32's element rate on one thread with them).
// split: the token's cos/sin by SplitCosSinPairs. kHalf as in RotateHeads: a row of 128 values
// as a runtime loop took 0.147 ns an element, 0.129 unrolled (Zen 3, AVX2, one thread, bshd
// [128, 32 + 8, 128] in L3; the steps alone, in L1, 0.104).
template <bool kForward, int kHalf>
HWY_INLINE void RotateHeadsBf16Pairs(const TokenRows<hwy::bfloat16_t>& r, const float* split) {
  const DW df;
  const hn::RebindToUnsigned<DW> du;
  const int n = static_cast<int>(hn::Lanes(df));  // 32-bit lanes: 2 n values a vector
  const int half = kHalf != 0 ? kHalf : r.half, pairs = half / 2;
  const float *ce = split, *co = ce + pairs, *se = co + pairs, *so = se + pairs;
  const auto high = hn::Set(du, 0xffff0000u);
  const int vector_end = half / (2 * n) * (2 * n);
  for (int h = 0; h < r.heads; ++h) {
    std::uint16_t* row = reinterpret_cast<std::uint16_t*>(r.base + h * r.head_stride);
    if (r.ahead != 0) PrefetchRow(row, r.ahead, 2 * half, r.pf);
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

// Calls body(rotate) once, rotate(rows) being the half-split kernel for T on this target and rows
// of half values: chosen here once, so that a loop over tokens inside body runs it without the
// choice (the grouped head-major walk's calls are 4 heads a token). scratch: 2 half floats (the
// emulated bf16 kernel's split cos/sin).
template <bool kForward, typename T, bool kNative, class Body>
HWY_INLINE void WithHalfSplitKernel(int half, float* scratch, const Body& body) {
  if constexpr (std::is_same_v<T, hwy::bfloat16_t> && !kNative) {
    const auto pairs_kernel = [scratch](auto half_constant) {
      return [scratch](const TokenRows<T>& r) {
        SplitCosSinPairs(r.c, r.s, r.half, scratch);
        RotateHeadsBf16Pairs<kForward, decltype(half_constant)::value>(r, scratch);
      };
    };
    if (half == 64) return body(pairs_kernel(std::integral_constant<int, 64>()));
    if (half == 32) return body(pairs_kernel(std::integral_constant<int, 32>()));
    return body(pairs_kernel(std::integral_constant<int, 0>()));
  } else {
    const int n = static_cast<int>(hn::Lanes(TagFor<T>()));
    if (half == 2 * n) return body([](const TokenRows<T>& r) { RotateHeadsHeld<kForward, T, kNative, 1>(r); });
    if (half == 4 * n) return body([](const TokenRows<T>& r) { RotateHeadsHeld<kForward, T, kNative, 2>(r); });
    if (half == 8 * n && kHeldTableVectors >= 16) return body([](const TokenRows<T>& r) { RotateHeadsHeld<kForward, T, kNative, 4>(r); });
    if (half == 64) return body([](const TokenRows<T>& r) { RotateHeads<kForward, T, kNative, 64>(r); });
    return body([](const TokenRows<T>& r) { RotateHeads<kForward, T, kNative, 0>(r); });
  }
}

// Half-split, every head of one token (heads outer: each row is streamed once, in order).
template <bool kForward, typename T, bool kNative>
void RotateTokenHalfSplit(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, float* scratch,
                          RopePrefetch pf) {
  const TokenRows<T> rows{static_cast<T*>(x.data) + offset, x.head_stride, x.heads, half, c, s, PrefetchOffset(x, 2 * half, pf), pf};
  WithHalfSplitKernel<kForward, T, kNative>(half, scratch, [&](const auto& rotate) { rotate(rows); });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
