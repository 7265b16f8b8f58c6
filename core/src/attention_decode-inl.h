// SIMD decode attention (S = 1), compiled once per Highway target by attention_decode.cc
// (foreach_target). What it computes and why: attention_decode.h.
//
// Per work item (batch row b, kv head hk, keys [lo, hi) in tiles of kKeyTile), for the G = Hq / Hk
// query heads h = hk G .. hk G + G - 1 (rows r of the item):
//   scores  Sc[r][c] = q_r . k_c   (q pre-scaled, RoPE-rotated when that is the scheme): each key
//           row is loaded once (widened from bf16/f16 in registers) and dotted with all G rows,
//           f32 FMAs and one horizontal sum per (row, key)
//   position terms and masks per row (Plan::add_bias_tile, Plan::mask_tile), then the online
//           softmax per row (SoftmaxRow, attention_softmax-inl.h)
//   acc[r] += sum_c P[r][c] v_c: the value tile widened once into f32 [kKeyTile][D], then
//           register-blocked over 4 rows (AccumulateTile, attention_tiles-inl.h) or 1 row
// FMAs and a vector Exp: equal to attention_reference up to float rounding (the tests bound it
// as they bound the general kernel).
#if defined(POSENC_ATTENTION_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_DECODE_INL_H_
#undef POSENC_ATTENTION_DECODE_INL_H_
#else
#define POSENC_ATTENTION_DECODE_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention_decode.h"
#include "attention_plan.h"
#include "attention_softmax-inl.h"
// Only AccumulateTile is used here; the unit's own copy of ScoreTile is not.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "attention_tiles-inl.h"
#pragma GCC diagnostic pop
#include "rope_convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace decode {

using attention_detail::kKeyTile;

// scores[r * kKeyTile] = sum_x Q[r][x] key[x] for the kRows rows at Q (row stride D); key: D
// values stored as T (float, bf16 or f16), each vector widened once for all kRows rows.
template <int kRows, typename T>
HWY_INLINE void DotRows(const float* HWY_RESTRICT Q, int D, const T* HWY_RESTRICT key, float* HWY_RESTRICT scores) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  hn::Vec<DA> sum[kRows];
  for (int r = 0; r < kRows; ++r) sum[r] = hn::Zero(d);
  int x = 0;
  for (; x + N <= D; x += N) {
    const auto k = LoadAs(d, key + x);
    for (int r = 0; r < kRows; ++r) sum[r] = hn::MulAdd(hn::LoadU(d, Q + r * D + x), k, sum[r]);
  }
  for (int r = 0; r < kRows; ++r) {
    float total = hn::GetLane(hn::SumOfLanes(d, sum[r]));
    for (int t = x; t < D; ++t) total += Q[r * D + t] * LoadScalar(key + t);  // channels past the last vector
    scores[r * kKeyTile] = total;
  }
}

// Column c of the score tile for all `rows` query rows: blocks of 4 rows, then one at a time.
template <typename T>
HWY_INLINE void ScoreKey(const float* HWY_RESTRICT Q, int rows, int D, const T* HWY_RESTRICT key, float* HWY_RESTRICT column) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) DotRows<4>(Q + r * D, D, key, column + r * kKeyTile);
  for (; r < rows; ++r) DotRows<1>(Q + r * D, D, key, column + r * kKeyTile);
}

// acc[r][:] += sum_{c < cols} P[r][c] V[c][:] for r < rows: P [rows][kKeyTile], V [cols][D], acc
// [rows][D]. Whole blocks of kRowBlock rows through the forward's register-blocked tile product;
// a remaining row with 4 vectors of channels per pass (4 independent FMA chains).
static HWY_NOINLINE void AccumulateRows(const float* HWY_RESTRICT P, const float* HWY_RESTRICT V, int rows, int cols, int D,
                                        float* HWY_RESTRICT acc) {
  int r = 0;
  for (; r + kRowBlock <= rows; r += kRowBlock) AccumulateTile(P + r * kKeyTile, kKeyTile, V, kRowBlock, cols, D, acc + r * D);
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  for (; r < rows; ++r) {
    const float* p = P + r * kKeyTile;
    float* a = acc + r * D;
    int x = 0;
    for (; x + 4 * N <= D; x += 4 * N) {
      auto a0 = hn::LoadU(d, a + x), a1 = hn::LoadU(d, a + x + N), a2 = hn::LoadU(d, a + x + 2 * N), a3 = hn::LoadU(d, a + x + 3 * N);
      for (int c = 0; c < cols; ++c) {
        const auto w = hn::Set(d, p[c]);
        const float* v = V + c * D + x;
        a0 = hn::MulAdd(w, hn::LoadU(d, v), a0);
        a1 = hn::MulAdd(w, hn::LoadU(d, v + N), a1);
        a2 = hn::MulAdd(w, hn::LoadU(d, v + 2 * N), a2);
        a3 = hn::MulAdd(w, hn::LoadU(d, v + 3 * N), a3);
      }
      hn::StoreU(a0, d, a + x);
      hn::StoreU(a1, d, a + x + N);
      hn::StoreU(a2, d, a + x + 2 * N);
      hn::StoreU(a3, d, a + x + 3 * N);
    }
    for (; x + N <= D; x += N) {
      auto a0 = hn::LoadU(d, a + x);
      for (int c = 0; c < cols; ++c) a0 = hn::MulAdd(hn::Set(d, p[c]), hn::LoadU(d, V + c * D + x), a0);
      hn::StoreU(a0, d, a + x);
    }
    for (; x < D; ++x)
      for (int c = 0; c < cols; ++c) a[x] += p[c] * V[c * D + x];
  }
}

// One thread's buffers (attention_detail::decode_workspace_floats): G query rows.
struct Workspace {
  Workspace(int group, int D)
      : buffer(hwy::AllocateAligned<float>(attention_detail::decode_workspace_floats(group, D))), Q(buffer.get()),
        acc(Q + std::size_t{static_cast<unsigned>(group)} * D), Sc(acc + std::size_t{static_cast<unsigned>(group)} * D),
        V(Sc + std::size_t{static_cast<unsigned>(group)} * kKeyTile), row_max(V + std::size_t{kKeyTile} * D), row_sum(row_max + group),
        key(row_sum + group), tmp(key + D) {}
  hwy::AlignedFreeUniquePtr<float[]> buffer;
  float *Q, *acc, *Sc, *V, *row_max, *row_sum, *key, *tmp;
  std::vector<std::int64_t> positions = std::vector<std::int64_t>(1 + kKeyTile);  // add_bias_tile's scratch
  std::vector<int> lut;
};

// Keys [lo, hi) of batch row b against the query heads of kv head hk: leaves in ws the rows'
// unnormalised accumulators, running maxima and sums. T: the storage of k and v.
template <typename T>
void DecodeKeys(const attention_detail::Plan& plan, int b, int hk, std::int64_t lo, std::int64_t hi, Workspace& ws) {
  const int G = plan.group, D = plan.D;
  const bool rope = plan.p->positions == AttentionPositions::kRope, has_bias = plan.has_bias();
  const T* k_data = static_cast<const T*>(plan.k->data);
  const T* v_data = static_cast<const T*>(plan.v->data);
  for (int r = 0; r < G; ++r) {
    plan.load_query(b, 0, hk * G + r, ws.Q + r * D, ws.tmp);
    for (int x = 0; x < D; ++x) ws.Q[r * D + x] *= plan.scale;
  }
  std::fill(ws.acc, ws.acc + std::size_t{static_cast<unsigned>(G)} * D, 0.0f);
  std::fill(ws.row_max, ws.row_max + G, -std::numeric_limits<float>::infinity());
  std::fill(ws.row_sum, ws.row_sum + G, 0.0f);
  for (std::int64_t j0 = lo; j0 < hi; j0 += kKeyTile) {
    const int cols = static_cast<int>(std::min<std::int64_t>(kKeyTile, hi - j0));
    for (int c = 0; c < cols; ++c) {
      const int j = static_cast<int>(j0 + c);
      if (rope) {  // the key rotated at its position (scalar: the general kernel's rows)
        plan.load_key(b, j, hk, ws.key, ws.tmp);
        ScoreKey(ws.Q, G, D, static_cast<const float*>(ws.key), ws.Sc + c);
      } else {
        ScoreKey(ws.Q, G, D, k_data + attention_detail::offset_of(*plan.k, b, j, hk), ws.Sc + c);
      }
      ToFloatRow(v_data + attention_detail::offset_of(*plan.v, b, j, hk), ws.V + c * D, D);
    }
    for (int r = 0; r < G; ++r) {
      float* row = ws.Sc + r * kKeyTile;
      if (has_bias) plan.add_bias_tile(b, hk * G + r, 0, 1, j0, cols, row, kKeyTile, ws.positions.data(), ws.lut);
      plan.mask_tile(b, 0, 1, j0, cols, row);
      const float correction = SoftmaxRow(row, &ws.row_max[r], &ws.row_sum[r]);
      if (correction != 1.0f)
        for (int x = 0; x < D; ++x) ws.acc[r * D + x] *= correction;
    }
    AccumulateRows(ws.Sc, ws.V, G, cols, D, ws.acc);
  }
}

}  // namespace decode

void AttentionDecode(const attention_detail::Plan& plan, int threads, float* lse) {
  using attention_detail::kKeyTile;
  const int G = plan.group, D = plan.D, Hk = plan.Hq / plan.group;
  const std::int64_t sequences = std::int64_t{plan.q->batch} * Hk;  // (batch row, kv head) pairs
  std::int64_t lo = 0, hi = 0;
  plan.key_range(0, 1, &lo, &hi);  // the same for every batch row: S = 1 at index past
  const std::int64_t key_tiles = (hi - lo + kKeyTile - 1) / kKeyTile;
  const int splits = attention_detail::decode_splits(sequences, key_tiles, threads);
  const std::int64_t per = (key_tiles + splits - 1) / splits;  // tiles per split
  // A split's partial softmax for the merge: G accumulator rows, then G maxima, then G sums.
  const std::size_t partial_size = static_cast<std::size_t>(G) * (D + 2);
  std::vector<float> partials(splits > 1 ? static_cast<std::size_t>(sequences * splits) * partial_size : 0);
  const auto store = [&](int b, int h, const float* row, float row_max, float row_sum) {  // normalised row h of batch row b
    thread_local std::vector<float> o;
    o.resize(static_cast<std::size_t>(D));
    const float inv = row_sum > 0 ? 1.0f / row_sum : 0.0f;  // a row that saw no key: zeros
    for (int x = 0; x < D; ++x) o[static_cast<std::size_t>(x)] = row[x] * inv;
    attention_detail::store_row(*plan.out, b, 0, h, o.data());
    if (lse) lse[std::int64_t{b} * plan.Hq + h] = LogSumExp(row_max, row_sum);
  };
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    decode::Workspace ws(G, D);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t item = 0; item < sequences * splits; ++item) {
      const std::int64_t sequence = item / splits;
      const int split = static_cast<int>(item % splits), b = static_cast<int>(sequence / Hk), hk = static_cast<int>(sequence % Hk);
      const std::int64_t first = lo + std::min(key_tiles, per * split) * kKeyTile;
      const std::int64_t last = std::min(hi, lo + std::min(key_tiles, per * (split + 1)) * kKeyTile);
      switch (plan.k->dtype) {
        case DType::kF32: decode::DecodeKeys<float>(plan, b, hk, first, last, ws); break;
        case DType::kBF16: decode::DecodeKeys<hwy::bfloat16_t>(plan, b, hk, first, last, ws); break;
        case DType::kF16: decode::DecodeKeys<hwy::float16_t>(plan, b, hk, first, last, ws); break;
      }
      if (splits == 1) {
        for (int r = 0; r < G; ++r) store(b, hk * G + r, ws.acc + r * D, ws.row_max[r], ws.row_sum[r]);
        continue;
      }
      float* part = partials.data() + static_cast<std::size_t>(item) * partial_size;
      std::copy(ws.acc, ws.acc + std::size_t{static_cast<unsigned>(G)} * D, part);
      std::copy(ws.row_max, ws.row_max + G, part + std::size_t{static_cast<unsigned>(G)} * D);
      std::copy(ws.row_sum, ws.row_sum + G, part + std::size_t{static_cast<unsigned>(G)} * (D + 1));
    }
    if (splits > 1) {
      // The union of the splits' softmaxes: each part rescaled to the largest maximum.
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
      for (std::int64_t sequence = 0; sequence < sequences; ++sequence) {
        const float* parts = partials.data() + static_cast<std::size_t>(sequence * splits) * partial_size;
        const int b = static_cast<int>(sequence / Hk), hk = static_cast<int>(sequence % Hk);
        for (int r = 0; r < G; ++r) {
          const std::size_t at_max = std::size_t{static_cast<unsigned>(G)} * D + r, at_sum = at_max + G;
          float m = -std::numeric_limits<float>::infinity(), sum = 0;
          for (int sp = 0; sp < splits; ++sp) m = std::max(m, parts[sp * partial_size + at_max]);
          std::fill(ws.tmp, ws.tmp + D, 0.0f);
          for (int sp = 0; m != -std::numeric_limits<float>::infinity() && sp < splits; ++sp) {
            const float* part = parts + sp * partial_size;
            if (part[at_max] == -std::numeric_limits<float>::infinity()) continue;  // this split saw no key
            const float w = std::exp(part[at_max] - m);
            sum += w * part[at_sum];
            for (int x = 0; x < D; ++x) ws.tmp[x] += w * part[r * D + x];
          }
          store(b, hk * G + r, ws.tmp, m, sum);
        }
      }
    }
  }
}

std::int64_t AttentionDecodeTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
