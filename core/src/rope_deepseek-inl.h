// The DeepSeek-V3 RoPE kernels (HF apply_rotary_pos_emb_interleave: a row's pairs (2j, 2j+1)
// rotated into its halves (j, j + half)), every head of one token, per Highway target (included by
// rope_kernels.cc, the one foreach_target unit). Which one runs: rope_token_switch-inl.h.
// Per-target include guard, as Highway requires:
#if defined(POSENC_ROPE_DEEPSEEK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_DEEPSEEK_INL_H_
#undef POSENC_ROPE_DEEPSEEK_INL_H_
#else
#define POSENC_ROPE_DEEPSEEK_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "posenc/half.h"
#include "posenc/rope_apply.h"
#include "rope_convert-inl.h"
#include "rope_rotate-inl.h"
#include "rope_widths-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Forward: a row's pairs (2j, 2j+1) in, its halves (j, j + half) out; each row is first widened
// into in (2 half floats), then rotated from there into its own storage, narrowed as it is
// stored. Through a second float copy, narrowed in a third pass, bf16 took 0.31-0.36 of the
// ceiling on one thread, f16 0.36-0.47 (Zen 3, AVX2, [8192, 32 + 8, 128]).
template <typename T>
HWY_INLINE void PairsToHalves(const float* in, T* out, const float* c, const float* s, int half) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  int j = 0;
  for (; j + n <= half; j += n) {
    decltype(hn::Zero(df)) a, b, oa, ob;
    hn::LoadInterleaved2(df, in + 2 * j, a, b);
    PairV<true>(a, b, hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa, ob);
    StoreAs(df, oa, out + j);
    StoreAs(df, ob, out + j + half);
  }
  for (; j < half; ++j) {
    float oa, ob;
    Pair<true>(in[2 * j], in[2 * j + 1], c[j], s[j], &oa, &ob);
    StoreScalar(oa, out + j);
    StoreScalar(ob, out + j + half);
  }
}

// Its transpose (the backward pass): the gradient read in the order the forward wrote it
// (halves), rotated by R^T, returned in the order the forward read (pairs).
template <typename T>
HWY_INLINE void HalvesToPairs(const float* in, T* out, const float* c, const float* s, int half) {
  const DF df;
  const int n = static_cast<int>(hn::Lanes(df));
  int j = 0;
  for (; j + n <= half; j += n) {
    decltype(hn::Zero(df)) oa, ob;
    PairV<false>(hn::LoadU(df, in + j), hn::LoadU(df, in + j + half), hn::LoadU(df, c + j), hn::LoadU(df, s + j), oa, ob);
    if constexpr (std::is_same_v<T, float>) {
      hn::StoreInterleaved2(oa, ob, df, out + 2 * j);
    } else {  // interleaved in L1, then narrowed
      HWY_ALIGN float pairs[2 * hn::MaxLanes(df)];
      hn::StoreInterleaved2(oa, ob, df, pairs);
      Store2As(df, hn::Load(df, pairs), hn::Load(df, pairs + n), out + 2 * j);
    }
  }
  for (; j < half; ++j) {
    float oa, ob;
    Pair<false>(in[j], in[j + half], c[j], s[j], &oa, &ob);
    StoreScalar(oa, out + 2 * j);
    StoreScalar(ob, out + 2 * j + 1);
  }
}

// bf16 forward through 32-bit pair lanes: a row's pairs read from its raw copy a pair a lane (a
// the lane shifted left, b the lane masked, as RotateTokenPairsBf16 does), and two steps' halves
// narrowed together: each value rounded in its lane's upper 16 bits, which one ConcatOdd of
// 16-bit lanes puts in order. Zen 3, AVX2, one thread: each vector widened and narrowed on its own
// (PairsToHalves) held bf16 to 0.32-0.36 of the ceiling ([8192, 32 + 8, 128]), this 0.52-0.56;
// rounding two steps in one vector by Bf16Pairs, then ConcatEven and ConcatOdd to order them (more
// shuffles), took 0.223 ns an element in L3 ([128, 32 + 8, 128]) against this kernel's 0.196.
// copy: the row's 2 half values. Full-width vectors (DW), as RotateTokenPairsBf16's: 512-bit
// loads and stores on AVX-512, unmeasured there.
HWY_INLINE void PairsToHalvesBf16(const std::uint16_t* copy, std::uint16_t* out, const float* c, const float* s, int half) {
  int j = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane: the scalar loop below
  const DW df;
  const hn::RebindToUnsigned<DW> du;
  const hn::Repartition<std::uint16_t, DW> du16;
  const int n = static_cast<int>(hn::Lanes(df));  // pairs a vector
  const auto high = hn::Set(du, 0xffff0000u);
  for (; j + 2 * n <= half; j += 2 * n) {
    const auto p0 = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(copy + 2 * j));
    const auto p1 = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(copy + 2 * (j + n)));
    decltype(hn::Zero(df)) oa0, ob0, oa1, ob1;
    PairV<true>(hn::BitCast(df, hn::ShiftLeft<16>(p0)), hn::BitCast(df, hn::And(p0, high)), hn::LoadU(df, c + j),
                hn::LoadU(df, s + j), oa0, ob0);
    PairV<true>(hn::BitCast(df, hn::ShiftLeft<16>(p1)), hn::BitCast(df, hn::And(p1, high)), hn::LoadU(df, c + j + n),
                hn::LoadU(df, s + j + n), oa1, ob1);
    // Each value rounded in the upper 16 bits of its lane; ConcatOdd takes those of two vectors.
    const auto narrow = [&](hn::Vec<DW> v0, hn::Vec<DW> v1) {
      return hn::ConcatOdd(du16, hn::BitCast(du16, Bf16InHighHalf(df, v1)), hn::BitCast(du16, Bf16InHighHalf(df, v0)));
    };
    hn::StoreU(narrow(oa0, oa1), du16, out + j);
    hn::StoreU(narrow(ob0, ob1), du16, out + j + half);
  }
#endif
  for (; j < half; ++j) {
    std::uint16_t pair[2];  // the copy lies in float scratch: read as bytes
    std::memcpy(pair, copy + 2 * j, sizeof(pair));
    float oa, ob;
    Pair<true>(bf16_to_float(pair[0]), bf16_to_float(pair[1]), c[j], s[j], &oa, &ob);
    out[j] = float_to_bf16(oa);
    out[j + half] = float_to_bf16(ob);
  }
}

// count 16-bit values from in to out, in vectors (a library memcpy call a row: 0.196 -> 0.192 ns an
// element in L3).
HWY_INLINE void CopyBits(const std::uint16_t* in, std::uint16_t* out, int count) {
  const hn::ScalableTag<std::uint16_t> du16;
  const int n = static_cast<int>(hn::Lanes(du16));
  int i = 0;
  for (; i + n <= count; i += n) hn::StoreU(hn::LoadU(du16, in + i), du16, out + i);
  if (i < count) std::memcpy(out + i, in + i, static_cast<std::size_t>(count - i) * sizeof(std::uint16_t));
}

// Every head of one token. scratch: 2 half floats (the row's float copy, or bf16's raw copy).
template <bool kForward, typename T>
void RotateTokenDeepSeek(const RopeTensor& x, std::int64_t offset, const float* c, const float* s, int half, float* scratch) {
  T* base = static_cast<T*>(x.data) + offset;
  for (int h = 0; h < x.heads; ++h) {
    T* row = base + h * x.head_stride;
    if constexpr (kForward && std::is_same_v<T, hwy::bfloat16_t>) {
      std::uint16_t* bits = reinterpret_cast<std::uint16_t*>(row);
      std::uint16_t* copy = reinterpret_cast<std::uint16_t*>(scratch);
      CopyBits(bits, copy, 2 * half);
      PairsToHalvesBf16(copy, bits, c, s, half);
      continue;
    }
    ToFloatRow(row, scratch, 2 * half);
    if (kForward)
      PairsToHalves(scratch, row, c, s, half);
    else
      HalvesToPairs(scratch, row, c, s, half);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
