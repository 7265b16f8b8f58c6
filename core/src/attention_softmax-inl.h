// The online softmax of one row of a score tile, shared by the forward kernel
// (attention_kernels-inl.h) and the decode kernel (attention_decode-inl.h), compiled per Highway
// target inside each foreach_target unit (static: each unit keeps its own copy).
#if defined(POSENC_ATTENTION_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_SOFTMAX_INL_H_
#undef POSENC_ATTENTION_SOFTMAX_INL_H_
#else
#define POSENC_ATTENTION_SOFTMAX_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_plan.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Row r of the tile (scores s[0 .. kKeyTile), masked entries -inf, padding columns -inf):
// online-softmax update of row_max/row_sum; s becomes the weights; returns the factor that
// rescales what acc holds.
static float SoftmaxRow(float* HWY_RESTRICT s, float* row_max, float* row_sum) {
  const hn::ScalableTag<float> d;
  const int N = static_cast<int>(hn::Lanes(d));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto vmax = hn::Set(d, neg_inf);
  int c = 0;
  for (; c + N <= attention_detail::kKeyTile; c += N) vmax = hn::Max(vmax, hn::LoadU(d, s + c));
  float tile_max = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (; c < attention_detail::kKeyTile; ++c) tile_max = std::max(tile_max, s[c]);
  if (tile_max == neg_inf) {  // nothing visible in this tile for this row
    std::fill(s, s + attention_detail::kKeyTile, 0.0f);
    return 1.0f;
  }
  const float new_max = std::max(*row_max, tile_max);
  // Online softmax (Milakov & Gimelshein 2018; FlashAttention-2): rescale what was accumulated
  // under the old maximum.
  const float correction = *row_max == neg_inf ? 0.0f : std::exp(*row_max - new_max);
  // exp(-inf) through a finite floor: Highway's Exp is valid on [-FLT_MAX, 104]. A weight below
  // FLT_MIN is 0, not a subnormal (as the backward's, attention_backward_tiles-inl.h): its share
  // of the row is below 1e-38 of the largest weight, and subnormal operands in the P V product
  // take the CPU's slow path (ALiBi's steep slopes put most far keys there).
  const auto m = hn::Set(d, new_max), floor = hn::Set(d, -1e30f), least = hn::Set(d, -87.3365f);  // ln(FLT_MIN)
  auto vsum = hn::Zero(d);
  c = 0;
  for (; c + N <= attention_detail::kKeyTile; c += N) {
    const auto x = hn::Max(hn::Sub(hn::LoadU(d, s + c), m), floor);
    const auto w = hn::IfThenZeroElse(hn::Lt(x, least), hn::Exp(d, x));
    vsum = hn::Add(vsum, w);
    hn::StoreU(w, d, s + c);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; c < attention_detail::kKeyTile; ++c) {
    s[c] = s[c] - new_max < -87.3365f ? 0.0f : std::exp(s[c] - new_max);
    sum += s[c];
  }
  *row_sum = *row_sum * correction + sum;
  *row_max = new_max;
  return correction;
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
