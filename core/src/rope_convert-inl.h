// The storage conversions of the RoPE kernels, bf16/f16 <-> float32 (vectors, scalar tails,
// whole rows), per Highway target (included by rope_kernels.cc, the one foreach_target unit).
// Defines, per target, POSENC_F16C and POSENC_NATIVE_BF16.
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_CONVERT_INL_H_
#undef POSENC_ROPE_CONVERT_INL_H_
#else
#define POSENC_ROPE_CONVERT_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "posenc/half.h"
#include "rope_widths-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- storage conversions: the one family, rounding to nearest even as posenc/half.h --------
// float16 <-> float32 in hardware with F16C, which every x86 target from AVX2 on has (targets
// newer than Highway 1.0's AVX3_DL take lower bits, so `<=` includes them) unless a build
// defines HWY_DISABLE_F16C: narrowing rounds to nearest even and widening is exact. Elsewhere
// Highway 1.0 emulates both: its narrowing truncates, so those targets narrow lane by lane with
// posenc::float_to_f16, and its widening misreads infinities and NaN (FromBits rebuilds them).
#undef POSENC_F16C  // defined once per target
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define POSENC_F16C 1
#else
#define POSENC_F16C 0
#endif

template <class D>
using BitsOf = hn::Rebind<std::uint16_t, D>;

// Float lanes of bf16 or f16 storage bits (exact). Without F16C, Highway 1.0 promotes f16 by
// integer operations that take exponent 31 for a finite one (an infinity came out as 65536, NaN as
// a number): those lanes are rebuilt here, sign, all-ones exponent and the payload shifted up.
template <typename T, class D>
HWY_INLINE hn::Vec<D> FromBits(D df, hn::Vec<BitsOf<D>> bits) {
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(hn::RebindToUnsigned<D>(), bits)));
  } else {
    const auto promoted = hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, D>(), bits));
#if POSENC_F16C  // the instruction's exact conversion
    return promoted;
#else
    const hn::RebindToUnsigned<D> du32;
    const auto h = hn::PromoteTo(du32, bits);
    const auto exponent = hn::Set(du32, 0x7c00u);
    const auto inf_nan = hn::Or(hn::Or(hn::ShiftLeft<16>(hn::And(h, hn::Set(du32, 0x8000u))), hn::Set(du32, 0x7f800000u)),
                                hn::ShiftLeft<13>(hn::And(h, hn::Set(du32, 0x03ffu))));
    return hn::IfThenElse(hn::RebindMask(df, hn::Eq(hn::And(h, exponent), exponent)), hn::BitCast(df, inf_nan), promoted);
#endif
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
// rounding cannot carry out of its payload. The tests feed NaN of both signs, quiet and
// signalling, with several payloads, and require each NaN result to carry an input's payload.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Bf16InHighHalf(D, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du32;
  const auto u = hn::BitCast(du32, v);
  const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  return hn::Add(hn::Add(u, hn::Set(du32, 0x7fffu)), odd);
}

// bf16 of two float vectors, rounded to nearest even, in one vector of 32-bit lanes: `even`'s
// value in the low 16 bits of each lane, `odd`'s in the high 16 (the pair layout of the
// emulated bf16 kernels, rope_token_kernels-inl.h). The rounding runs on 16-bit lanes of both at
// once: H, the kept high halves, and L, the dropped low ones. H rounds up when L + 0x7fff +
// (H & 1) carries out of 16 bits, which is bit 15 of the rounding average (L + 0x7ffe + (H & 1)
// + 1) >> 1 (VPAVGW keeps the sum's 17th bit): 9 operations for the two vectors against 11 for
// two 32-bit roundings (Bf16InHighHalf) merged by mask and shift. The same bits, NaN included.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Bf16Pairs(D df, hn::Vec<D> even, hn::Vec<D> odd) {
  const hn::RebindToUnsigned<D> du32;
#if HWY_TARGET == HWY_SCALAR  // one 32-bit lane has no 16-bit lanes to split into
  const auto high = hn::Set(du32, 0xffff0000u);
  return hn::Or(hn::And(Bf16InHighHalf(df, odd), high), hn::ShiftRight<16>(Bf16InHighHalf(df, even)));
#else
  (void)df;
  const hn::Repartition<std::uint16_t, decltype(du32)> du16;
  const auto e = hn::BitCast(du32, even), o = hn::BitCast(du32, odd);
  // Little-endian: a 32-bit lane's low half is the even 16-bit lane, its high half the odd one.
  const auto kept = hn::OddEven(hn::BitCast(du16, o), hn::BitCast(du16, hn::ShiftRight<16>(e)));
  const auto dropped = hn::OddEven(hn::BitCast(du16, hn::ShiftLeft<16>(o)), hn::BitCast(du16, e));
  const auto bias = hn::Add(hn::And(kept, hn::Set(du16, 1)), hn::Set(du16, 0x7ffe));
  const auto carry = hn::ShiftRight<15>(hn::AverageRound(dropped, bias));
  return hn::BitCast(du32, hn::Add(kept, carry));
#endif
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
#if POSENC_F16C
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

// count values of storage type T -> float32
template <typename T>
void ToFloatRow(const T* in, float* out, int count) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  int i = 0;
  for (; i + n <= count; i += n) hn::StoreU(LoadAs(df, in + i), df, out + i);
  for (; i < count; ++i) out[i] = LoadScalar(in + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
