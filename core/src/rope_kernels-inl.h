// SIMD RoPE kernels, compiled once per Highway target by rope_kernels.cc (foreach_target).
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_KERNELS_INL_H_
#undef POSENC_ROPE_KERNELS_INL_H_
#else
#define POSENC_ROPE_KERNELS_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "posenc/half.h"
#include "posenc/rope_apply.h"
#include "rope_kernel_job.h"


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

// ---- storage conversions: the one family, rounding to nearest even as posenc/half.h --------
// float32 -> float16 rounds to nearest even in hardware with F16C, which every x86 target from
// AVX2 on has (targets newer than Highway 1.0's AVX3_DL take lower bits, so `<=` includes
// them). Elsewhere Highway 1.0 emulates the conversion by truncation, so those targets narrow
// lane by lane with posenc::float_to_f16.
#define POSENC_F16_DEMOTE_ROUNDS (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2)

template <class D>
using BitsOf = hn::Rebind<std::uint16_t, D>;

// Float lanes of bf16 or f16 storage bits (exact).
template <typename T, class D>
HWY_INLINE hn::Vec<D> FromBits(D df, hn::Vec<BitsOf<D>> bits) {
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(hn::RebindToUnsigned<D>(), bits)));
  } else {
    return hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, D>(), bits));
  }
}

// bf16 narrowing by the CPU's own instruction, where it has one: AVX512_BF16 (Cooper Lake,
// Zen 4 and later) rounds 16 floats to nearest even in one VCVTNEPS2BF16. The emulation below
// takes ~9 integer operations and a 32->16 demote per vector; measured on a Zen 4 EPYC it held
// bf16 RoPE to 0.49 of the memory ceiling on one thread. Highway 1.0 has no target with the
// instruction, so it is inline assembly (which needs no target attribute) in the AVX-512
// targets, run only when rope_rotate found the CPU flag (RotateJob::native_bf16). It treats
// subnormal inputs as zero; a vector holding one takes the emulation, so the bits equal
// posenc::float_to_bf16's everywhere (NaN: the same quiet NaN).
#undef POSENC_NATIVE_BF16  // defined once per target
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
#define POSENC_NATIVE_BF16 1
template <class D>
HWY_INLINE bool NativeToBf16(D, hn::Vec<D> v, hn::Vec<BitsOf<D>>* bits) {
  if constexpr (hn::MaxLanes(D()) == 16) {
    if (HWY_UNLIKELY(_mm512_fpclass_ps_mask(v.raw, 0x20) != 0)) return false;  // 0x20: subnormal
    asm("vcvtneps2bf16 %1, %0" : "=v"(bits->raw) : "v"(v.raw));
    return true;
  }
  return false;
}
// 32 floats (lo, then hi) to 32 bf16 in one VCVTNE2PS2BF16, stored at p; false: a subnormal.
template <class D>
HWY_INLINE bool NativeStoreBf16x2(D, hn::Vec<D> lo, hn::Vec<D> hi, std::uint16_t* p) {
  if constexpr (hn::MaxLanes(D()) == 16) {
    if (HWY_UNLIKELY((_mm512_fpclass_ps_mask(lo.raw, 0x20) | _mm512_fpclass_ps_mask(hi.raw, 0x20)) != 0)) return false;
    __m512i bits;
    asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(bits) : "v"(hi.raw), "v"(lo.raw));  // AT&T order: lo is the low half
    _mm512_storeu_si512(p, bits);
    return true;
  }
  return false;
}
#else
#define POSENC_NATIVE_BF16 0
#endif

// bf16 of float lanes, rounded to nearest even, in the upper 16 bits of each 32-bit lane (the
// lower 16 are not zero). NaN needs no case of its own here, unlike posenc::float_to_bf16: every
// NaN these kernels narrow is a bf16 input carried through (payload kept, made quiet) or the
// default NaN of an invalid operation (0xffc00000, 0x7fc00000 on some CPUs) — cos and sin are
// finite, as validate() requires a finite attention factor — so its low 16 bits are zero and
// rounding cannot carry out of its payload. The tests feed NaN with every bf16 payload.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Bf16InHighHalf(D, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du32;
  const auto u = hn::BitCast(du32, v);
  const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  return hn::Add(hn::Add(u, hn::Set(du32, 0x7fffu)), odd);
}

// bf16 or f16 bits of float lanes, rounded to nearest even; a NaN stays a (quiet) NaN.
// kNative: bf16 by the CPU's instruction (above) where this target has it.
template <typename T, bool kNative = false, class D>
HWY_INLINE hn::Vec<BitsOf<D>> ToBits(D df, hn::Vec<D> v) {
  const BitsOf<D> du16;
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
#if POSENC_NATIVE_BF16
    if constexpr (kNative) {
      hn::Vec<BitsOf<D>> bits;
      if (NativeToBf16(df, v, &bits)) return bits;
    }
#endif
    const auto bits = hn::ShiftRight<16>(Bf16InHighHalf(df, v));
    return hn::DemoteTo(du16, hn::BitCast(hn::RebindToSigned<D>(), bits));
  } else {
#if POSENC_F16_DEMOTE_ROUNDS
    return hn::BitCast(du16, hn::DemoteTo(hn::Rebind<hwy::float16_t, D>(), v));
#else
    HWY_ALIGN float lanes[hn::MaxLanes(df)];
    HWY_ALIGN std::uint16_t bits[hn::MaxLanes(df)];
    hn::Store(v, df, lanes);
    for (std::size_t i = 0; i < hn::Lanes(df); ++i) bits[i] = float_to_f16(lanes[i]);
    return hn::Load(du16, bits);
#endif
  }
}

template <class D>
HWY_INLINE hn::Vec<D> LoadAs(D df, const float* p) { return hn::LoadU(df, p); }
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadAs(D df, const T* p) {
  return FromBits<T>(df, hn::LoadU(BitsOf<D>(), reinterpret_cast<const std::uint16_t*>(p)));
}
template <bool kNative = false, class D>
HWY_INLINE void StoreAs(D df, hn::Vec<D> v, float* p) { hn::StoreU(v, df, p); }
template <bool kNative = false, class D, typename T>
HWY_INLINE void StoreAs(D df, hn::Vec<D> v, T* p) {
  hn::StoreU(ToBits<T, kNative>(df, v), BitsOf<D>(), reinterpret_cast<std::uint16_t*>(p));
}
// 2 Lanes(df) values: v0, then v1.
template <bool kNative = false, class D, typename T>
HWY_INLINE void Store2As(D df, hn::Vec<D> v0, hn::Vec<D> v1, T* p) {
#if POSENC_NATIVE_BF16
  if constexpr (kNative && std::is_same_v<T, hwy::bfloat16_t>) {
    if (NativeStoreBf16x2(df, v0, v1, reinterpret_cast<std::uint16_t*>(p))) return;
  }
#endif
  StoreAs<kNative>(df, v0, p);
  StoreAs<kNative>(df, v1, p + hn::Lanes(df));
}
// Scalar tails: the reference's conversions (posenc/half.h).
HWY_INLINE float LoadScalar(const float* p) { return *p; }
HWY_INLINE float LoadScalar(const hwy::bfloat16_t* p) { return bf16_to_float(reinterpret_cast<const std::uint16_t*>(p)[0]); }
HWY_INLINE float LoadScalar(const hwy::float16_t* p) { return f16_to_float(reinterpret_cast<const std::uint16_t*>(p)[0]); }
HWY_INLINE void StoreScalar(float v, float* p) { *p = v; }
HWY_INLINE void StoreScalar(float v, hwy::bfloat16_t* p) { reinterpret_cast<std::uint16_t*>(p)[0] = float_to_bf16(v); }
HWY_INLINE void StoreScalar(float v, hwy::float16_t* p) { reinterpret_cast<std::uint16_t*>(p)[0] = float_to_f16(v); }

// count values of storage type T <-> float32
template <typename T>
void ToFloatRow(const T* in, float* out, int count) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  int i = 0;
  for (; i + n <= count; i += n) hn::StoreU(LoadAs(df, in + i), df, out + i);
  for (; i < count; ++i) out[i] = LoadScalar(in + i);
}
template <typename T>
void FromFloatRow(const float* in, T* out, int count) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  int i = 0;
  for (; i + n <= count; i += n) StoreAs(df, hn::LoadU(df, in + i), out + i);
  for (; i < count; ++i) StoreScalar(in[i], out + i);
}

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

// Half-split, every head of one token (heads outer: each row is streamed once, in order).
template <bool kForward, typename T, bool kNative>
void RotateTokenHalfSplit(const RopeTensor& x, std::int64_t offset, const float* c0, const float* s0, std::int64_t cs_stride, int half) {
  const TagFor<T> df;
  const int n = static_cast<int>(hn::Lanes(df));
  T* base = static_cast<T*>(x.data) + offset;
  const bool prefetch = WantsPrefetch(x);
  for (int h = 0; h < x.heads; ++h) {
    const float *c = c0 + h * cs_stride, *s = s0 + h * cs_stride;  // a run of tokens: one row each
    T* row = base + h * x.head_stride;
    if (prefetch) PrefetchAhead(row, x.token_stride, 2 * half);
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
template <bool kForward>
void RotateTokenHalfSplitBf16Pairs(const RopeTensor& x, std::int64_t offset, const float* c0, const float* s0, std::int64_t cs_stride, int half,
                                   float* scratch) {
  const DW df;
  const hn::RebindToUnsigned<DW> du;
  const int n = static_cast<int>(hn::Lanes(df));  // 32-bit lanes: 2 n values a vector
  const int pairs = half / 2;
  float *ce = scratch, *co = ce + pairs, *se = co + pairs, *so = se + pairs;
  const auto high = hn::Set(du, 0xffff0000u);
  const auto merge = [&](hn::Vec<DW> even, hn::Vec<DW> odd) {
    return hn::Or(hn::And(Bf16InHighHalf(df, odd), high), hn::ShiftRight<16>(Bf16InHighHalf(df, even)));
  };
  std::uint16_t* base = static_cast<std::uint16_t*>(x.data) + offset;
  const bool prefetch = WantsPrefetch(x);
  for (int h = 0; h < x.heads; ++h) {
    const float *c = c0 + h * cs_stride, *s = s0 + h * cs_stride;  // a run of tokens: one row each
    if (h == 0 || cs_stride != 0)
      for (int i = 0; i < pairs; ++i) {
        ce[i] = c[2 * i];
        co[i] = c[2 * i + 1];
        se[i] = s[2 * i];
        so[i] = s[2 * i + 1];
      }
    std::uint16_t* row = base + h * x.head_stride;
    if (prefetch) PrefetchAhead(row, x.token_stride, 2 * half);
    int j = 0;
    for (; j + 2 * n <= half; j += 2 * n) {
      const auto a = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(row + j));
      const auto b = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(row + j + half));
      const int i = j / 2;
      decltype(hn::Zero(df)) oa_even, ob_even, oa_odd, ob_odd;
      PairV<kForward>(hn::BitCast(df, hn::ShiftLeft<16>(a)), hn::BitCast(df, hn::ShiftLeft<16>(b)), hn::LoadU(df, ce + i),
                      hn::LoadU(df, se + i), oa_even, ob_even);
      PairV<kForward>(hn::BitCast(df, hn::And(a, high)), hn::BitCast(df, hn::And(b, high)), hn::LoadU(df, co + i),
                      hn::LoadU(df, so + i), oa_odd, ob_odd);
      hn::StoreU(merge(oa_even, oa_odd), du, reinterpret_cast<std::uint32_t*>(row + j));
      hn::StoreU(merge(ob_even, ob_odd), du, reinterpret_cast<std::uint32_t*>(row + j + half));
    }
    for (; j < half; ++j) {
      float oa, ob;
      Pair<kForward>(bf16_to_float(row[j]), bf16_to_float(row[j + half]), c[j], s[j], &oa, &ob);
      row[j] = float_to_bf16(oa);
      row[j + half] = float_to_bf16(ob);
    }
  }
}

// Interleaved bf16, every head of one token: a pair (a, b) is one 32-bit lane, a in the low 16
// bits and b in the high, so a is the lane shifted left and b the lane masked, and the rotated
// pair merges back the same way — no interleaving shuffles (measured: 1.17x float32's element
// rate on one thread with them, on Zen 4).
template <bool kForward>
void RotateTokenPairsBf16(const RopeTensor& x, std::int64_t offset, const float* c0, const float* s0, std::int64_t cs_stride, int half) {
  const DW df;
  const hn::RebindToUnsigned<DW> du;
  const int n = static_cast<int>(hn::Lanes(df));  // pairs a vector
  const auto high = hn::Set(du, 0xffff0000u);
  std::uint16_t* base = static_cast<std::uint16_t*>(x.data) + offset;
  const bool prefetch = WantsPrefetch(x);
  for (int h = 0; h < x.heads; ++h) {
    const float *c = c0 + h * cs_stride, *s = s0 + h * cs_stride;  // a run of tokens: one row each
    std::uint16_t* row = base + h * x.head_stride;
    if (prefetch) PrefetchAhead(row, x.token_stride, 2 * half);
    int j = 0;
    for (; j + n <= half; j += n) {
      const auto ab = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(row + 2 * j));
      decltype(hn::Zero(df)) oa, ob;
      PairV<kForward>(hn::BitCast(df, hn::ShiftLeft<16>(ab)), hn::BitCast(df, hn::And(ab, high)), hn::LoadU(df, c + j),
                      hn::LoadU(df, s + j), oa, ob);
      hn::StoreU(hn::Or(hn::And(Bf16InHighHalf(df, ob), high), hn::ShiftRight<16>(Bf16InHighHalf(df, oa))), du,
                 reinterpret_cast<std::uint32_t*>(row + 2 * j));
    }
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
void RotateTokenPairsF32(const RopeTensor& x, std::int64_t offset, const float* c0, const float* s0, std::int64_t cs_stride, int half) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  float* base = static_cast<float*>(x.data) + offset;
  const bool prefetch = WantsPrefetch(x);
  for (int h = 0; h < x.heads; ++h) {
    const float *c = c0 + h * cs_stride, *s = s0 + h * cs_stride;  // a run of tokens: one row each
    float* row = base + h * x.head_stride;
    if (prefetch) PrefetchAhead(row, x.token_stride, 2 * half);
    int j = 0;
    for (; j + n <= half; j += n) {
      decltype(hn::Zero(df)) a, b, oa, ob;
      hn::LoadInterleaved2(df, row + 2 * j, a, b);
      PairV<kForward>(a, b, hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa, ob);
      hn::StoreInterleaved2(oa, ob, df, row + 2 * j);
    }
    for (; j < half; ++j) Pair<kForward>(row[2 * j], row[2 * j + 1], c[j], s[j], &row[2 * j], &row[2 * j + 1]);
  }
}

// Interleaved f16, every head of one token: the 16-bit values are split into even and odd
// lanes as integers, widened, rotated in float32, narrowed and re-interleaved.
template <bool kForward, typename T>
void RotateTokenPairsHalf(const RopeTensor& x, std::int64_t offset, const float* c0, const float* s0, std::int64_t cs_stride, int half) {
  const DW df;
  const BitsOf<DW> du16;
  const int n = static_cast<int>(hn::Lanes(df));
  T* base = static_cast<T*>(x.data) + offset;
  const bool prefetch = WantsPrefetch(x);
  for (int h = 0; h < x.heads; ++h) {
    const float *c = c0 + h * cs_stride, *s = s0 + h * cs_stride;  // a run of tokens: one row each
    T* row = base + h * x.head_stride;
    std::uint16_t* bits = reinterpret_cast<std::uint16_t*>(row);
    if (prefetch) PrefetchAhead(row, x.token_stride, 2 * half);
    int j = 0;
    for (; j + n <= half; j += n) {
      decltype(hn::Zero(du16)) even, odd;
      hn::LoadInterleaved2(du16, bits + 2 * j, even, odd);
      decltype(hn::Zero(df)) oa, ob;
      PairV<kForward>(FromBits<T>(df, even), FromBits<T>(df, odd), hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa, ob);
      hn::StoreInterleaved2(ToBits<T>(df, oa), ToBits<T>(df, ob), du16, bits + 2 * j);
    }
    for (; j < half; ++j) {
      float oa, ob;
      Pair<kForward>(LoadScalar(row + 2 * j), LoadScalar(row + 2 * j + 1), c[j], s[j], &oa, &ob);
      StoreScalar(oa, row + 2 * j);
      StoreScalar(ob, row + 2 * j + 1);
    }
  }
}

// ---- cos/sin rows on the fly (accurate angles): rope_sincos, lane by lane ------------------
using DD = hn::ScalableTag<double>;

// cos[j], sin[j] (attention factor included, direction +1) for positions pos[j], j < half.
void CosSinRowAccurate(const float* inv_freq, const double* pos, double factor, int half, float* cos_out, float* sin_out) {
  namespace k = rope_sincos_constants;
  const DD dd;
  const hn::Rebind<float, DD> df_half;
  const int n = static_cast<int>(hn::Lanes(dd));
  int j = 0;
  for (; j + n <= half; j += n) {
    const auto angle = hn::Mul(hn::LoadU(dd, pos + j), hn::PromoteTo(dd, hn::LoadU(df_half, inv_freq + j)));
    const auto kq = hn::Round(hn::Mul(angle, hn::Set(dd, k::kTwoOverPi)));
    const auto r = hn::Sub(hn::Sub(hn::Sub(angle, hn::Mul(kq, hn::Set(dd, k::kPio2Hi))), hn::Mul(kq, hn::Set(dd, k::kPio2Mid))),
                           hn::Mul(kq, hn::Set(dd, k::kPio2Lo)));
    const auto r2 = hn::Mul(r, r);
    auto ps = hn::Set(dd, k::kS[4]);
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[3]));
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[2]));
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[1]));
    ps = hn::Add(hn::Mul(ps, r2), hn::Set(dd, k::kS[0]));
    const auto sin_r = hn::Add(r, hn::Mul(hn::Mul(r, r2), ps));
    auto pc = hn::Set(dd, k::kC[5]);
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[4]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[3]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[2]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[1]));
    pc = hn::Add(hn::Mul(pc, r2), hn::Set(dd, k::kC[0]));
    const auto cos_r = hn::Add(hn::Set(dd, 1.0), hn::Mul(r2, pc));
    const auto q = hn::Sub(kq, hn::Mul(hn::Set(dd, 4.0), hn::Floor(hn::Mul(kq, hn::Set(dd, 0.25)))));
    const auto is1 = hn::Eq(q, hn::Set(dd, 1.0)), is2 = hn::Eq(q, hn::Set(dd, 2.0)), is3 = hn::Eq(q, hn::Set(dd, 3.0));
    const auto swap = hn::Or(is1, is3);
    const auto sv = hn::IfThenElse(swap, cos_r, sin_r), cv = hn::IfThenElse(swap, sin_r, cos_r);
    const auto s_out = hn::IfThenElse(hn::Or(is2, is3), hn::Neg(sv), sv);
    const auto c_out = hn::IfThenElse(hn::Or(is1, is2), hn::Neg(cv), cv);
    const auto f = hn::Set(dd, factor);
    hn::StoreU(hn::DemoteTo(df_half, hn::Mul(c_out, f)), df_half, cos_out + j);
    hn::StoreU(hn::DemoteTo(df_half, hn::Mul(s_out, f)), df_half, sin_out + j);
  }
  for (; j < half; ++j) {
    double sn, cs;
    rope_sincos(pos[j] * static_cast<double>(inv_freq[j]), &sn, &cs);
    cos_out[j] = static_cast<float>(cs * factor);
    sin_out[j] = static_cast<float>(sn * factor);
  }
}

// ---- the whole call -------------------------------------------------------------------------
// DeepSeek-V3, every head of one token, through float copies (in, out: 2 * half floats each).
template <bool kForward, typename T>
void RotateTokenDeepSeek(const RopeTensor& x, std::int64_t offset, const float* c0, const float* s0, std::int64_t cs_stride, int half, float* in,
                         float* out) {
  T* base = static_cast<T*>(x.data) + offset;
  for (int h = 0; h < x.heads; ++h) {
    const float *c = c0 + h * cs_stride, *s = s0 + h * cs_stride;  // a run of tokens: one row each
    T* row = base + h * x.head_stride;
    ToFloatRow(row, in, 2 * half);
    if (kForward)
      PairsToHalves(in, out, c, s, half);
    else
      HalvesToPairs(in, out, c, s, half);
    FromFloatRow(out, row, 2 * half);
  }
}

// One token of one tensor, every head: the layout and the storage type chosen here.
// cs_stride: 0 for one token (every head reads c and s); or, for a run of tokens of one head
// viewed as heads (RotateHeadByHead), the floats from one token's cos/sin row to the next's.
template <bool kForward, typename T, bool kNative = false>
void RotateToken(const RopeTensor& x, std::int64_t offset, RopeLayout layout, const float* c, const float* s,
                 std::int64_t cs_stride, int half, float* tmp, float* tmp2) {
  switch (layout) {
    case RopeLayout::kHalfSplit:
      if constexpr (std::is_same_v<T, hwy::bfloat16_t> && !kNative)
        RotateTokenHalfSplitBf16Pairs<kForward>(x, offset, c, s, cs_stride, half, tmp);
      else
        RotateTokenHalfSplit<kForward, T, kNative>(x, offset, c, s, cs_stride, half);
      break;
    case RopeLayout::kInterleaved:
      if constexpr (std::is_same_v<T, float>)
        RotateTokenPairsF32<kForward>(x, offset, c, s, cs_stride, half);
      else if constexpr (std::is_same_v<T, hwy::bfloat16_t>)
        RotateTokenPairsBf16<kForward>(x, offset, c, s, cs_stride, half);
      else
        RotateTokenPairsHalf<kForward, T>(x, offset, c, s, cs_stride, half);
      break;
    case RopeLayout::kDeepSeekV3: RotateTokenDeepSeek<kForward, T>(x, offset, c, s, cs_stride, half, tmp, tmp2); break;
  }
}

// One token of x (every head of the view), its storage type chosen here. tmp, tmp2: 2 * half
// floats of scratch each.
template <bool kForward>
void RotateTokenOf(const RotateJob& job, const RopeTensor& x, std::int64_t offset, const float* c, const float* s,
                   float* tmp, float* tmp2, std::int64_t cs_stride = 0) {
  const RopeLayout layout = job.params->layout;
  const int half = job.params->num_freqs;
  switch (x.dtype) {
    case DType::kF32: RotateToken<kForward, float>(x, offset, layout, c, s, cs_stride, half, tmp, tmp2); break;
    case DType::kBF16:
#if POSENC_NATIVE_BF16
      if (job.native_bf16) {
        RotateToken<kForward, hwy::bfloat16_t, true>(x, offset, layout, c, s, cs_stride, half, tmp, tmp2);
        break;
      }
#endif
      RotateToken<kForward, hwy::bfloat16_t>(x, offset, layout, c, s, cs_stride, half, tmp, tmp2);
      break;
    case DType::kF16: RotateToken<kForward, hwy::float16_t>(x, offset, layout, c, s, cs_stride, half, tmp, tmp2); break;
  }
}

// Every tensor stored head-major ([B, H, S, D]: a head's tokens lie next to each other)?
inline bool AllHeadMajor(const RotateJob& job) {
  for (int i = 0; i < job.num_tensors; ++i)
    if (job.tensors[i].heads > 1 && job.tensors[i].token_stride > job.tensors[i].head_stride) return false;
  return true;
}

// Head-major storage with 1-D positions and a table: walked head by head, each head's tokens in
// order, so every thread reads one sequential stream. The token-outer walk below reads one
// stream per head at once (40 for Llama-3-8B's q and k), more than the hardware prefetchers
// follow: measured 0.38 of the memory ceiling on one thread, 0.51-0.61 this way. What is left
// is the cos/sin table, read once per head (4 MiB at 8192 tokens, rotary dim 128: as many bytes
// as the head's values); chunks of 256 tokens across all heads, to keep the table in L2, measured
// slower (0.41-0.43). The other cos/sin modes compute rows, so they stay token-outer.
// Work units of the head-by-head walk: (tensor, batch row, head). Fewer than threads: the
// token-outer walk, which splits tokens, keeps every thread busy.
inline std::int64_t HeadUnits(const RotateJob& job) {
  std::int64_t units = 0;
  for (int i = 0; i < job.num_tensors; ++i) units += std::int64_t{job.tensors[0].batch} * job.tensors[i].heads;
  return units;
}

template <bool kForward>
void RotateHeadByHead(const RotateJob& job) {
  const RopeApplyParams& p = *job.params;
  const PositionIds& pos = *job.positions;
  const int half = p.num_freqs, tokens = job.tensors[0].tokens, batch = job.tensors[0].batch;
  const std::int64_t units = HeadUnits(job);
#ifdef _OPENMP
#pragma omp parallel num_threads(job.threads)
#endif
  {
    std::vector<float> tmp(static_cast<std::size_t>(2 * half)), tmp2(static_cast<std::size_t>(2 * half));
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t u = 0; u < units; ++u) {
      std::int64_t rest = u;
      int i = 0;
      while (rest >= std::int64_t{batch} * job.tensors[i].heads) rest -= std::int64_t{batch} * job.tensors[i].heads, ++i;
      RopeTensor one = job.tensors[i];
      const int b = static_cast<int>(rest / one.heads), h = static_cast<int>(rest % one.heads);
      const std::int64_t head_offset = b * one.batch_stride + h * one.head_stride;
      // Consecutive positions (no padding, no gaps): the head's tokens are consecutive table rows,
      // so one call walks them all, each token a "head" of the view — no call per 128 values.
      const std::int64_t first = pos.at(0, b, 0, tokens);
      bool consecutive = true;
      for (int t = 1; t < tokens && consecutive; ++t) consecutive = pos.at(0, b, t, tokens) == first + t;
      if (consecutive) {
        RopeTensor run = one;
        run.heads = tokens;
        run.head_stride = one.token_stride;
        RotateTokenOf<kForward>(job, run, head_offset, job.table->cos.data() + first * half, job.table->sin.data() + first * half,
                                tmp.data(), tmp2.data(), half);
        continue;
      }
      one.heads = 1;  // the view of this head alone, token by token
      for (int t = 0; t < tokens; ++t) {
        const std::int64_t at = pos.at(0, b, t, tokens) * half;
        RotateTokenOf<kForward>(job, one, b * one.batch_stride + t * one.token_stride + h * one.head_stride,
                                job.table->cos.data() + at, job.table->sin.data() + at, tmp.data(), tmp2.data());
      }
    }
  }
}

template <bool kForward>
void RotateAllT(const RotateJob& job) {
  const RopeApplyParams& p = *job.params;
  const PositionIds& pos = *job.positions;
  const int half = p.num_freqs, tokens = job.tensors[0].tokens;
  const std::int64_t rows = std::int64_t{job.tensors[0].batch} * tokens;
  const bool table_rows = job.table && !p.axis_of_freq;  // 1-D: point straight into the table
  if (table_rows && AllHeadMajor(job) && HeadUnits(job) >= job.threads) return RotateHeadByHead<kForward>(job);
  RopeApplyParams forward = p;
  forward.direction = 1;
#ifdef _OPENMP
#pragma omp parallel num_threads(job.threads)
#endif
  {
    AlignedVector<float> cbuf(static_cast<std::size_t>(half)), sbuf(static_cast<std::size_t>(half));
    std::vector<double> pos_of_freq(static_cast<std::size_t>(half));
    std::vector<float> tmp(static_cast<std::size_t>(2 * half)), tmp2(static_cast<std::size_t>(2 * half));
    // Shared positions: iterate tokens, and every batch row of a token reuses its cos/sin.
    const bool shared = pos.same_for_every_batch_row() && job.tensors[0].batch > 1;
    const int batch = job.tensors[0].batch;
    const std::int64_t outer = shared ? tokens : rows;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t r = 0; r < outer; ++r) {
      const int b = shared ? 0 : static_cast<int>(r / tokens), t = static_cast<int>(shared ? r : r % tokens);
      const float *c = cbuf.data(), *s = sbuf.data();
      if (table_rows) {
        const std::int64_t at = pos.at(0, b, t, tokens) * half;
        c = job.table->cos.data() + at;
        s = job.table->sin.data() + at;
      } else if (!job.table && p.angles == Numerics::kAccurate) {
        for (int j = 0; j < half; ++j)
          pos_of_freq[static_cast<std::size_t>(j)] = static_cast<double>(pos.at(p.axis_of_freq ? p.axis_of_freq[j] : 0, b, t, tokens));
        CosSinRowAccurate(p.inv_freq, pos_of_freq.data(), p.attention_factor, half, cbuf.data(), sbuf.data());
      } else {
        for (int j = 0; j < half; ++j) {
          const std::int64_t position = pos.at(p.axis_of_freq ? p.axis_of_freq[j] : 0, b, t, tokens);
          if (job.table) {
            cbuf[static_cast<std::size_t>(j)] = job.table->cos[static_cast<std::size_t>(position * half + j)];
            sbuf[static_cast<std::size_t>(j)] = job.table->sin[static_cast<std::size_t>(position * half + j)];
          } else {
            rope_cos_sin(p.inv_freq[j], position, forward, &cbuf[static_cast<std::size_t>(j)], &sbuf[static_cast<std::size_t>(j)]);
          }
        }
      }
      const int b_end = shared ? batch : b + 1;
      for (int bb = b; bb < b_end; ++bb) {
        for (int i = 0; i < job.num_tensors; ++i) {
          const RopeTensor& x = job.tensors[i];
          RotateTokenOf<kForward>(job, x, bb * x.batch_stride + t * x.token_stride, c, s, tmp.data(), tmp2.data());
        }
      }
    }
  }
}

void RotateAll(const RotateJob& job) {
  if (job.params->direction > 0)
    RotateAllT<true>(job);
  else
    RotateAllT<false>(job);
}

std::int64_t CurrentTarget() { return HWY_TARGET; }
bool TargetNarrowsBf16() { return POSENC_NATIVE_BF16; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
