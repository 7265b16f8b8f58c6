// The online softmax of a score tile's rows, shared by the forward kernel (attention_kernels-inl.h)
// and the decode kernel (attention_decode-inl.h), and its exp, which the backward's weights use too
// (attention_backward_tiles-inl.h); compiled per Highway target inside each foreach_target unit
// (static: each unit keeps its own copy).
#if defined(POSENC_ATTENTION_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_SOFTMAX_INL_H_
#undef POSENC_ATTENTION_SOFTMAX_INL_H_
#else
#define POSENC_ATTENTION_SOFTMAX_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_plan.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using attention_detail::kLeastNormalExponent;

// exp(x) for kLeastNormalExponent <= x <= 0 (a score minus its row's maximum or log-sum-exp;
// accurate a little beyond 0 too). Callers clamp x to kLeastNormalExponent first, so that no lane
// computes from an argument out of range (whose intermediates could be subnormal: a slow path on
// some CPUs), and zero the lanes that were below it. Cephes expf (S. Moshier,
// cephes/single/expf.c), the formula of the bf16 tiles' exp_nonpositive (attention_bf16_tiles.cc):
// x = n ln2 + r with n the integer nearest x / ln2 (adding 1.5 * 2^23 rounds it and leaves n in
// the low bits of the sum), ln2 split in C1 + C2 so n C1 is exact, e^r = 1 + r + r^2 P(r) on
// |r| <= ln2 / 2 (relative error about 1e-7), then 2^n from n's bits (n >= -126: a normal float).
// 15 operations a vector against about 40 for Highway's Exp, whose reduction serves all of
// [-FLT_MAX, 104] (a 128 x 64 tile's softmax on a Zen 3 core: 4.7 us against 7.2 us).
template <class D>
HWY_INLINE hn::Vec<D> ExpNonPositive(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto shifter = hn::Set(d, 12582912.0f);  // 1.5 * 2^23: the sum's unit in the last place is 1
  const auto j = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), shifter);
  const auto n = hn::Sub(j, shifter);
  auto r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), x);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  auto p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
  // j's bits are those of 1.5 * 2^23 plus n; shifted by 23, only n + 127 is left: 2^n's exponent.
  const auto two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, j), hn::Set(di, 127))));
  return hn::Mul(p, two_n);
}

// A softmax weight exp(x), x a score minus its row's maximum or log-sum-exp: 0 where x is below
// kLeastNormalExponent, -inf (a masked key) or NaN (Ge fails), ExpNonPositive of x clamped
// elsewhere.
template <class D>
HWY_INLINE hn::Vec<D> SoftmaxWeight(D d, hn::Vec<D> x) {
  return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, kLeastNormalExponent)), ExpNonPositive(d, hn::Max(x, hn::Set(d, kLeastNormalExponent))));
}

// The online softmax (Milakov & Gimelshein 2018; FlashAttention-2) of a tile's rows r < rows,
// each kKeyTile scores s[r * kKeyTile + c] (masked entries and padding columns -inf): each row
// becomes its weights, row_max and row_sum are updated, and correction[r] is the factor that
// rescales what the row's accumulator holds (1 for a row with nothing visible in this tile).
// The rows go through each step together: their maxima, then their corrections in vectors, then
// the weights. Row by row (a chain of two horizontal reductions and a scalar exp per row, which
// the CPU did not overlap with the next row's) and with Highway's Exp, a 128 x 64 tile took 8.0
// us on a Zen 3 core (AVX2) against 11 us for each of its two products; now 4.7 us.
static void SoftmaxTile(float* HWY_RESTRICT s, int rows, float* HWY_RESTRICT row_max, float* HWY_RESTRICT row_sum,
                        float* HWY_RESTRICT correction) {
  using attention_detail::kKeyTile;
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  constexpr int kMaxRows = attention_detail::kPaddedRows;
  if (rows > kMaxRows) {  // decode's rows are query heads: any number
    SoftmaxTile(s, kMaxRows, row_max, row_sum, correction);
    SoftmaxTile(s + kMaxRows * kKeyTile, rows - kMaxRows, row_max + kMaxRows, row_sum + kMaxRows, correction + kMaxRows);
    return;
  }
  static_assert(kKeyTile % hn::MaxLanes(decltype(d)()) == 0, "rows of whole vectors");
  HWY_ALIGN float tile_max[kMaxRows];
  for (int r = 0; r < rows; ++r) {
    const float* row = s + r * kKeyTile;
    auto vmax = hn::Set(d, neg_inf);
    for (int c = 0; c < kKeyTile; c += N) vmax = hn::Max(vmax, hn::LoadU(d, row + c));
    tile_max[r] = hn::GetLane(hn::MaxOfLanes(d, vmax));
  }
  // correction = exp(old max - new max): 0 where the row saw nothing before (its sum and
  // accumulator are 0), 1 where it sees nothing now (max, sum and accumulator unchanged). In
  // vectors for every row, the last few through a padded copy, so that a row's bits do not depend
  // on where it sits (decode's one row equals the prefill's).
  // x86's MAXPS returns its second operand where either is NaN: Max(t, o) keeps the old maximum
  // where a tile's is NaN, as std::max(old, tile) did. A difference below kLeastNormalExponent,
  // -inf (nothing seen before) or NaN (-inf - -inf) weighs 0: a correction of 0.
  const auto vneg_inf = hn::Set(d, neg_inf);
  const auto update = [&](float* HWY_RESTRICT old_max, const float* HWY_RESTRICT tm, float* HWY_RESTRICT out) {
    const auto o = hn::LoadU(d, old_max), t = hn::LoadU(d, tm), new_max = hn::Max(t, o);
    hn::StoreU(hn::IfThenElse(hn::Eq(t, vneg_inf), hn::Set(d, 1.0f), SoftmaxWeight(d, hn::Sub(o, new_max))), d, out);
    hn::StoreU(new_max, d, old_max);
  };
  int r = 0;
  for (; r + N <= rows; r += N) update(row_max + r, tile_max + r, correction + r);
  if (r < rows) {
    HWY_ALIGN float old_lanes[hn::MaxLanes(d)], tm_lanes[hn::MaxLanes(d)], out[hn::MaxLanes(d)];
    std::fill(old_lanes, old_lanes + N, neg_inf);
    std::fill(tm_lanes, tm_lanes + N, neg_inf);
    std::copy(row_max + r, row_max + rows, old_lanes);
    std::copy(tile_max + r, tile_max + rows, tm_lanes);
    update(old_lanes, tm_lanes, out);
    std::copy(old_lanes, old_lanes + (rows - r), row_max + r);
    std::copy(out, out + (rows - r), correction + r);
  }
  for (r = 0; r < rows; ++r) {
    float* row = s + r * kKeyTile;
    if (tile_max[r] == neg_inf) {  // nothing visible in this tile for this row
      std::fill(row, row + kKeyTile, 0.0f);
      continue;
    }
    const auto m = hn::Set(d, row_max[r]);
    auto vsum = hn::Zero(d);
    for (int c = 0; c < kKeyTile; c += N) {
      const auto w = SoftmaxWeight(d, hn::Sub(hn::LoadU(d, row + c), m));  // masked (-inf) and NaN scores: 0
      vsum = hn::Add(vsum, w);
      hn::StoreU(w, d, row + c);
    }
    row_sum[r] = row_sum[r] * correction[r] + hn::GetLane(hn::SumOfLanes(d, vsum));
  }
}

// A row's log-sum-exp from its running maximum and its sum of exp(s - max); -inf when the row
// saw no key (sum 0).
static inline float LogSumExp(float row_max, float row_sum) {
  return row_sum > 0 ? row_max + std::log(row_sum) : -std::numeric_limits<float>::infinity();
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
