// SIMD attention, compiled once per Highway target by attention_kernels.cc (foreach_target).
//
// Per task (batch, query head, tile of kQueryTile queries), key tiles of kKeyTile in order:
//   scores  S[r][c] = q_r . k_c   (q pre-scaled)   register-blocked (attention_tiles-inl.h: 4
//           query rows x 4 vectors of keys on AVX-512, x 2 elsewhere), over K transposed to
//           [D][kKeyTile] so no horizontal sums are needed
//   masks and position terms, per element only where a tile is not wholly visible or has a bias
//   online softmax of the tile's rows (SoftmaxTile), then acc[r] += sum_c P[r][c] v_c
//           register-blocked as the scores (attention_tiles-inl.h)
//   a position remap (attention_remap.h): a second query tile Qf rotated at the far positions
//           (DCA: a third, Qf2, at the inter-chunk position); per key tile its branches from the
//           positions' extremes: near only (as without a remap), one far branch (its query tile
//           against keys rotated far), or several (a score tile each, each element taken from
//           its branch)
// FMAs and a vector exp: results differ from the scalar reference by float rounding only
// (the tests bound it), not bit for bit.
#if defined(POSENC_ATTENTION_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_KERNELS_INL_H_
#undef POSENC_ATTENTION_KERNELS_INL_H_
#else
#define POSENC_ATTENTION_KERNELS_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_packed.h"
#include "attention_plan.h"
#include "attention_softmax-inl.h"
#include "attention_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using attention_detail::kPaddedRows;

void AttentionAll(const attention_detail::Plan& plan, int threads, float* lse) {
  using attention_detail::kKeyTile;
  using attention_detail::kQueryTile;
  const int D = plan.D, S = plan.S;
  const int query_tiles = (S + kQueryTile - 1) / kQueryTile;
  const std::int64_t tasks = std::int64_t{plan.q->batch} * plan.Hq * query_tiles;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const bool has_bias = plan.has_bias();
  // Decode (few queries, long cache): fewer tasks than threads. Split each task's keys into
  // `splits` runs of whole key tiles, one per work item, and merge the partial softmaxes after
  // (FlashDecoding): every thread has keys to read.
  const std::int64_t key_tiles = (plan.T + kKeyTile - 1) / kKeyTile;
  const int splits = tasks >= threads ? 1 : static_cast<int>(std::min<std::int64_t>((threads + tasks - 1) / tasks, std::max<std::int64_t>(key_tiles, 1)));
  const std::size_t partial_size = static_cast<std::size_t>(kQueryTile) * (D + 2);  // acc rows, max, sum
  std::vector<float> partials(splits > 1 ? static_cast<std::size_t>(tasks) * splits * partial_size : 0);
  const attention_detail::Remap& remap = plan.remap;
  const bool remapped = remap.on();
  // Rotated keys [D][kKeyTile] and values [kKeyTile][D] per key tile, once (attention_packed.h),
  // for a batch of (batch row, kv head) groups at a time; their tasks are consecutive (h is
  // hk * group + its index in the group). per_batch 0: not packed, one pass over every task.
  const std::int64_t per_batch = splits == 1 ? attention_detail::forward_groups_per_batch(*plan.q, *plan.k) : 0;
  const std::int64_t groups = std::int64_t{plan.q->batch} * plan.k->heads, group_tasks = std::int64_t{plan.group} * query_tiles;
  for (std::int64_t g0 = 0; g0 < groups; g0 += per_batch ? per_batch : groups) {
    const std::int64_t g1 = per_batch ? std::min(groups, g0 + per_batch) : groups;
    const attention_detail::PackedKeys packed =
        per_batch ? attention_detail::PackedKeys(plan, attention_detail::kForwardLayouts, threads, g0, g1) : attention_detail::PackedKeys();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
      hwy::AlignedFreeUniquePtr<float[]> buffer = hwy::AllocateAligned<float>(attention_detail::tile_floats(D, remap.far_queries()));
      float* Q = buffer.get();
      float* acc = Q + kPaddedRows * D;
      float* Kt = acc + kPaddedRows * D;
      float* V = Kt + kKeyTile * D;
      float* Sc = V + kKeyTile * D;
      float* row_max = Sc + kPaddedRows * kKeyTile;
      float* row_sum = row_max + kPaddedRows;
      float* tmp = row_sum + kPaddedRows;
      float* Qf = tmp + D;  // a remap's far query tile, far keys [D][kKeyTile], far scores
      float* Ktf = Qf + kPaddedRows * D;
      float* Sf = Ktf + kKeyTile * D;
      float* Qf2 = Sf + kPaddedRows * kKeyTile;  // DCA's inter-chunk query tile
      using attention_detail::Remap;
      const float* query_of[5] = {nullptr, Q, Qf, nullptr, Qf2};  // by branch bit
      HWY_ALIGN float correction[kPaddedRows];  // SoftmaxTile's factor per accumulator row
      std::vector<std::int64_t> positions(kQueryTile + kKeyTile);
      std::vector<int> lut;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
      for (std::int64_t item = g0 * group_tasks * splits; item < g1 * group_tasks * splits; ++item) {
        const std::int64_t task = item / splits;
        const int split = static_cast<int>(item % splits);
        const int tile = static_cast<int>(task % query_tiles), h = static_cast<int>(task / query_tiles % plan.Hq);
        const int b = static_cast<int>(task / query_tiles / plan.Hq), hk = h / plan.group;
        const int i0 = tile * kQueryTile, rows = std::min(kQueryTile, S - i0);
        const int rows4 = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
        std::fill(Q, Q + kPaddedRows * D, 0.0f);
        for (int r = 0; r < rows; ++r) {
          plan.load_query(b, i0 + r, h, Q + r * D, tmp);
          for (int x = 0; x < D; ++x) Q[r * D + x] *= plan.scale;
        }
        for (int f = 0; f < remap.far_queries(); ++f) {
          const int which = f ? Remap::kFar2 : Remap::kFar;
          float* far = f ? Qf2 : Qf;
          std::fill(far, far + kPaddedRows * D, 0.0f);
          for (int r = 0; r < rows; ++r) {
            plan.load_query_far(b, i0 + r, h, far + r * D, tmp, which);
            for (int x = 0; x < D; ++x) far[r * D + x] *= plan.scale;
          }
        }
        std::fill(acc, acc + kPaddedRows * D, 0.0f);
        std::fill(row_max, row_max + kPaddedRows, neg_inf);
        std::fill(row_sum, row_sum + kPaddedRows, 0.0f);
        std::int64_t lo, hi;
        plan.key_range(i0, i0 + rows, &lo, &hi);
        if (!packed.empty()) lo = lo / kKeyTile * kKeyTile;  // whole packed tiles (mask_tile hides keys before lo)
        if (splits > 1) {  // this item's run of whole key tiles
          const std::int64_t tiles = (hi - lo + kKeyTile - 1) / kKeyTile, per = (tiles + splits - 1) / splits;
          const std::int64_t first = lo + std::min(tiles, per * split) * kKeyTile;
          hi = std::min(hi, lo + std::min(tiles, per * (split + 1)) * kKeyTile);
          lo = first;
        }
        for (std::int64_t j0 = lo; j0 < hi; j0 += kKeyTile) {
          const int cols = static_cast<int>(std::min<std::int64_t>(kKeyTile, hi - j0));
          int branches = Remap::kNear;
          if (remapped) {
            plan.tile_positions(b, i0, rows, j0, cols, positions.data());
            branches = remap.branches(positions.data(), rows, positions.data() + rows, cols);
          }
          // Far keys (one set for every far branch) go to Kt when the tile has no near branch.
          const bool near = branches & Remap::kNear, far = branches & ~Remap::kNear;
          float* far_keys = near ? Ktf : Kt;
          const float* keys = Kt;
          const float* values = V;
          if (!packed.empty()) {
            keys = packed.kt(b, hk, j0 / kKeyTile);
            values = packed.v_rows(b, hk, j0 / kKeyTile);
          }
          if (packed.empty() || far) std::fill(Kt, Kt + kKeyTile * D, 0.0f);
          if (near && far) std::fill(Ktf, Ktf + kKeyTile * D, 0.0f);
          for (int c = 0; c < cols && (packed.empty() || far); ++c) {
            if (near && packed.empty()) {
              plan.load_key(b, static_cast<int>(j0 + c), hk, tmp, V + c * D);  // V's row as scratch
              for (int x = 0; x < D; ++x) Kt[x * kKeyTile + c] = tmp[x];
            }
            if (far) {
              plan.load_key_far(b, static_cast<int>(j0 + c), hk, tmp, V + c * D);
              for (int x = 0; x < D; ++x) far_keys[x * kKeyTile + c] = tmp[x];
            }
            if (packed.empty()) attention_detail::load_row(*plan.v, b, static_cast<int>(j0 + c), hk, V + c * D);
          }
          // The tile's first branch scores into Sc; each further one into Sf, taken per element.
          bool first = true;
          for (const int which : {Remap::kNear, Remap::kFar, Remap::kFar2}) {
            if (!(branches & which)) continue;
            ScoreTile(query_of[which], which == Remap::kNear ? keys : far_keys, rows4, D, first ? Sc : Sf);
            if (!first) remap.merge(which, positions.data(), rows, positions.data() + rows, cols, Sf, Sc, kKeyTile);
            first = false;
          }
          if (has_bias) plan.add_bias_tile(b, h, i0, rows, j0, cols, Sc, kKeyTile, positions.data(), lut);
          plan.mask_tile(b, i0, rows, j0, cols, Sc);
          for (int r = rows; r < rows4; ++r) std::fill(Sc + r * kKeyTile, Sc + (r + 1) * kKeyTile, 0.0f);
          SoftmaxTile(Sc, rows, row_max, row_sum, correction);
          for (int r = 0; r < rows; ++r)
            if (correction[r] != 1.0f)
              for (int x = 0; x < D; ++x) acc[r * D + x] *= correction[r];
          AccumulateTile(Sc, attention_detail::kKeyTile, values, rows4, cols, D, acc);
        }
        if (splits > 1) {  // kept for the merge
          float* part = partials.data() + static_cast<std::size_t>(item) * partial_size;
          std::copy(acc, acc + rows * D, part);
          std::copy(row_max, row_max + rows, part + kQueryTile * D);
          std::copy(row_sum, row_sum + rows, part + kQueryTile * D + kQueryTile);
          continue;
        }
        for (int r = 0; r < rows; ++r) {
          const float inv = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;  // a row that saw no key: zeros
          for (int x = 0; x < D; ++x) acc[r * D + x] *= inv;
          attention_detail::store_row(*plan.out, b, i0 + r, h, acc + r * D);
          if (lse) lse[(std::int64_t{b} * plan.Hq + h) * S + i0 + r] = LogSumExp(row_max[r], row_sum[r]);
        }
      }
      if (splits > 1) {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (std::int64_t task = 0; task < tasks; ++task) {
          const int tile = static_cast<int>(task % query_tiles), h = static_cast<int>(task / query_tiles % plan.Hq);
          const int b = static_cast<int>(task / query_tiles / plan.Hq);
          const int i0 = tile * kQueryTile, rows = std::min(kQueryTile, S - i0);
          const float* first = partials.data() + static_cast<std::size_t>(task) * splits * partial_size;
          for (int r = 0; r < rows; ++r) {
            // softmax over the union: rescale each part to the largest maximum.
            float m = neg_inf;
            for (int sp = 0; sp < splits; ++sp) m = std::max(m, first[sp * partial_size + kQueryTile * D + r]);
            std::fill(tmp, tmp + D, 0.0f);
            float sum = 0;
            for (int sp = 0; m != neg_inf && sp < splits; ++sp) {
              const float* part = first + sp * partial_size;
              const float part_max = part[kQueryTile * D + r];
              if (part_max == neg_inf) continue;
              const float w = std::exp(part_max - m);
              sum += w * part[kQueryTile * D + kQueryTile + r];
              for (int x = 0; x < D; ++x) tmp[x] += w * part[r * D + x];
            }
            const float inv = sum > 0 ? 1.0f / sum : 0.0f;
            for (int x = 0; x < D; ++x) tmp[x] *= inv;
            attention_detail::store_row(*plan.out, b, i0 + r, h, tmp);
            if (lse) lse[(std::int64_t{b} * plan.Hq + h) * S + i0 + r] = LogSumExp(m, sum);
          }
        }
      }
    }
  }  // batches of groups
}

std::int64_t AttentionTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
