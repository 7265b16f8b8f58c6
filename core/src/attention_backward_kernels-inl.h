// SIMD attention backward, compiled once per Highway target by attention_backward_kernels.cc
// (foreach_target). FlashAttention-2's backward (attention_backward.h) in two passes, each
// recomputing P from the forward's lse, so that every output row has one writer (no atomics,
// the same bits whatever the thread count):
//   pass K  per (batch, kv head, key tile): dV += P^T dO, dK += dS^T (scale q), over every query
//           head of the group and every query tile that sees the key tile
//   pass Q  per (batch, query head, query tile): dQ += dS K, over the key tiles it sees; T5's
//           table gradient as per-task partial sums (double), added in task order after
// A distance table's gradient (its columns are shared by every query tile): per head, a fixed
// number of lanes, each a run of query tiles with its own partial row.
// Products as the forward's (attention_tiles-inl.h): scores and dP = dO V^T by ScoreTile over a
// transposed key or value tile; the three accumulations by AccumulateTile, P and dS read
// transposed in place for the key side. A position remap (attention_remap.h): the scores as the
// forward merges its branches; each branch's share of dS accumulates into its own dQ (near, far,
// DCA's far2) and dK (near, far), each rotated back by its own transpose and summed.
#if defined(POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_
#undef POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_
#else
#define POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "attention_backward_tiles-inl.h"
#include "attention_plan.h"
#include "posenc/attention_backward.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AttentionBackwardAll(const attention_detail::Plan& plan, const AttentionBackwardInputs& in, const AttentionGradients& grads,
                          int threads) {
  using attention_detail::kKeyTile;
  using attention_detail::kQueryTile;
  const int D = plan.D, S = plan.S, T = plan.T, B = in.q.batch, Hk = in.k.heads;
  const int query_tiles = (S + kQueryTile - 1) / kQueryTile, key_tiles = (T + kKeyTile - 1) / kKeyTile;
  std::vector<float> Di(static_cast<std::size_t>(B) * plan.Hq * S);
  RowDots(in, threads, Di.data());
  // Keys (rotated; transposed, as rows) and values (transposed) per key tile, and the queries
  // (rotated, times scale) and dO, each once (attention_packed.h): pass K reads every query tile
  // once per key tile, pass Q every key tile once per query tile.
  using attention_detail::PackedKeys;
  using attention_detail::PackedQueries;
  const bool pack = attention_detail::backward_packs(in.q, in.k);
  const PackedKeys packed_keys = pack ? PackedKeys(plan, attention_detail::kBackwardLayouts, threads) : PackedKeys();
  const PackedQueries packed_queries = pack && T > kKeyTile ? PackedQueries(plan, in.dout, threads) : PackedQueries();
  const bool t5_grad = grads.t5_table_grad != nullptr;
  const int buckets = plan.p->t5.num_buckets;
  const std::int64_t q_tasks = std::int64_t{B} * plan.Hq * query_tiles, k_tasks = std::int64_t{B} * Hk * key_tiles;
  std::vector<double> partials(t5_grad ? static_cast<std::size_t>(q_tasks) * buckets : 0);
  // A distance table's gradient: lane l of head h sums query tiles l, l + lanes, ... of every
  // batch row into its own row of `lanes` per head (a fixed count, so the same bits for any
  // thread count), added in lane order after.
  const bool table_grad = grads.distance_table_grad != nullptr;
  const std::int64_t width = table_grad ? plan.p->distance_table.width() : 0;
  const int lanes = table_grad ? std::min(attention_detail::kTableLanes, query_tiles) : 0;
  std::vector<double> table_partials(static_cast<std::size_t>(plan.Hq) * lanes * width);
  // FoX: sum_i dS_ij per (b, h, key j) from pass K, sum_j dS_ij per (b, h, query i) from pass Q.
  const bool gate_grad = grads.gate_cumulative_grad != nullptr;
  std::vector<double> gate_columns(gate_grad ? static_cast<std::size_t>(B) * plan.Hq * T : 0);
  std::vector<double> gate_rows(gate_grad ? static_cast<std::size_t>(B) * plan.Hq * S : 0);
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    BackwardTiles t(D, plan.remap.far_queries());
    using attention_detail::Remap;
    const bool remapped = plan.remap.on();
    std::vector<double> sums(std::max(kKeyTile, kQueryTile));  // FoX's column or row sums of dS
    // Pass K: dK and dV of one key tile, from every query that sees it.
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t task = 0; task < k_tasks; ++task) {
      const int tile = static_cast<int>(task % key_tiles), hk = static_cast<int>(task / key_tiles % Hk);
      const int b = static_cast<int>(task / key_tiles / Hk);
      const std::int64_t j0 = std::int64_t{tile} * kKeyTile;
      const int cols = static_cast<int>(std::min<std::int64_t>(kKeyTile, T - j0)), cols4 = (cols + kRowBlock - 1) / kRowBlock * kRowBlock;
      LoadKeyTile(plan, b, hk, j0, cols, false, packed_keys, t);
      std::fill(t.dK, t.dK + kKeyTile * D, 0.0f);
      std::fill(t.dV, t.dV + kKeyTile * D, 0.0f);
      if (remapped) std::fill(t.dKf, t.dKf + kKeyTile * D, 0.0f);
      for (int h = hk * plan.group; h < (hk + 1) * plan.group; ++h) {
        std::fill(sums.begin(), sums.end(), 0.0);
        for (int i0 = 0; i0 < S; i0 += kQueryTile) {
          const int rows = std::min(kQueryTile, S - i0), rows4 = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
          std::int64_t lo, hi;
          plan.key_range(i0, i0 + rows, &lo, &hi);
          if (hi <= j0 || lo >= j0 + cols) continue;  // the masks hide this key tile from these queries
          LoadQueryTile(plan, in, Di.data(), b, h, i0, rows, packed_queries, t);
          TileGradients(plan, b, h, i0, rows, j0, cols, t);
          // dV += P^T dO, dK += dS^T (scale q): the tiles read transposed in place.
          AccumulateTile(t.P, 1, t.dO, cols4, rows4, D, t.dV, kKeyTile);
          for (int c = 0; gate_grad && c < cols; ++c) {
            double column = 0;
            for (int r = 0; r < rows; ++r) column += t.dS[r * kKeyTile + c];
            sums[static_cast<std::size_t>(c)] += column;
          }
          if (!remapped) {
            AccumulateTile(t.dS, 1, t.Q, cols4, rows4, D, t.dK, kKeyTile);  // Q holds scale * q
            continue;
          }
          // A remap: each branch's dS against its own query tile, into the near or far dK.
          for (const int which : {Remap::kNear, Remap::kFar, Remap::kFar2}) {
            if (!(t.branches & which)) continue;
            AccumulateTile(BranchScores(plan, which, rows, cols, t), 1, t.query_of(which), cols4, rows4, D, t.dk_of(which), kKeyTile);
          }
        }
        for (int c = 0; gate_grad && c < cols; ++c)
          gate_columns[(static_cast<std::size_t>(b) * plan.Hq + h) * T + static_cast<std::size_t>(j0 + c)] = sums[static_cast<std::size_t>(c)];
      }
      for (int c = 0; c < cols; ++c) {
        const int j = static_cast<int>(j0 + c);
        plan.unrotate_key(b, j, hk, t.dK + c * D, t.tmp);
        if (remapped) {  // the far keys' share, rotated back from the far frame
          float* far = t.dKf + c * D;
          plan.rotate_key_far(b, j, far, t.tmp, -1);
          for (int x = 0; x < D; ++x) t.dK[c * D + x] += far[x];
        }
        attention_detail::store_row(grads.dk, b, j, hk, t.dK + c * D);
        attention_detail::store_row(grads.dv, b, j, hk, t.dV + c * D);
      }
    }
    // Pass Q: dQ of one query tile, and its share of T5's table gradient, the distance table's
    // (into table_partial) and FoX's row sums.
    const auto q_task = [&](std::int64_t task, double* table_partial) {
      const int tile = static_cast<int>(task % query_tiles), h = static_cast<int>(task / query_tiles % plan.Hq);
      const int b = static_cast<int>(task / query_tiles / plan.Hq), hk = h / plan.group;
      const int i0 = tile * kQueryTile, rows = std::min(kQueryTile, S - i0), rows4 = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
      LoadQueryTile(plan, in, Di.data(), b, h, i0, rows, packed_queries, t);
      std::fill(t.dQ, t.dQ + BackwardTiles::kRows * D, 0.0f);
      for (int f = 0; f < plan.remap.far_queries(); ++f) std::fill(t.dQf[f], t.dQf[f] + BackwardTiles::kRows * D, 0.0f);
      std::fill(sums.begin(), sums.end(), 0.0);
      double* partial = t5_grad ? partials.data() + static_cast<std::size_t>(task) * buckets : nullptr;
      std::int64_t lo, hi;
      plan.key_range(i0, i0 + rows, &lo, &hi);
      // Whole key tiles from 0, as pass K cuts them: the same P for the same (query, key).
      for (std::int64_t j0 = lo / kKeyTile * kKeyTile; j0 < hi; j0 += kKeyTile) {
        const int cols = static_cast<int>(std::min<std::int64_t>(kKeyTile, T - j0));
        LoadKeyTile(plan, b, hk, j0, cols, true, packed_keys, t);
        TileGradients(plan, b, h, i0, rows, j0, cols, t);
        if (!remapped) AccumulateTile(t.dS, kKeyTile, t.K, rows4, cols, D, t.dQ);
        for (const int which : {Remap::kNear, Remap::kFar, Remap::kFar2})  // a remap: per branch, its keys
          if (remapped && (t.branches & which))
            AccumulateTile(BranchScores(plan, which, rows, cols, t), kKeyTile, t.key_rows_of(which), rows4, cols, D, t.dq_of(which));
        if (partial) {
          plan.tile_positions(b, i0, rows, j0, cols, t.positions.data());
          plan.for_each_t5_bucket(t.positions.data(), rows, t.positions.data() + rows, cols, t.lut,
                                  [&](int r, int c, int bucket) { partial[bucket] += t.dS[r * kKeyTile + c]; });
        }
        if (table_partial) AddDistanceGradients(plan, b, i0, rows, j0, cols, t, table_partial);
        for (int r = 0; gate_grad && r < rows; ++r) {
          double row = 0;
          for (int c = 0; c < cols; ++c) row += t.dS[r * kKeyTile + c];
          sums[static_cast<std::size_t>(r)] += row;
        }
      }
      for (int r = 0; r < rows; ++r) {
        float* row = t.dQ + r * D;
        for (int x = 0; x < D; ++x) row[x] *= plan.scale;
        plan.unrotate_query(b, i0 + r, h, row, t.tmp);
        for (int f = 0; f < plan.remap.far_queries(); ++f) {  // the far rows' shares, rotated back
          float* far = t.dQf[f] + r * D;
          for (int x = 0; x < D; ++x) far[x] *= plan.scale;
          plan.rotate_query_far(b, i0 + r, far, t.tmp, f ? Remap::kFar2 : Remap::kFar, -1);
          for (int x = 0; x < D; ++x) row[x] += far[x];
        }
        attention_detail::store_row(grads.dq, b, i0 + r, h, row);
        if (gate_grad) gate_rows[(static_cast<std::size_t>(b) * plan.Hq + h) * S + static_cast<std::size_t>(i0 + r)] = sums[static_cast<std::size_t>(r)];
      }
    };
    if (lanes == 0) {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
      for (std::int64_t task = 0; task < q_tasks; ++task) q_task(task, nullptr);
    } else {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
      for (std::int64_t item = 0; item < std::int64_t{plan.Hq} * lanes; ++item) {
        const int h = static_cast<int>(item / lanes), lane = static_cast<int>(item % lanes);
        for (int b = 0; b < B; ++b)
          for (int tile = lane; tile < query_tiles; tile += lanes)
            q_task((std::int64_t{b} * plan.Hq + h) * query_tiles + tile, table_partials.data() + static_cast<std::size_t>(item) * width);
      }
    }
  }
  // T5: the table's gradient, [bucket][h] += the partials of every task of head h, in task order.
  for (std::int64_t task = 0; t5_grad && task < q_tasks; ++task) {
    const int h = static_cast<int>(task / query_tiles % plan.Hq);
    for (int bucket = 0; bucket < buckets; ++bucket)
      grads.t5_table_grad[std::int64_t{bucket} * plan.Hq + h] += static_cast<float>(partials[static_cast<std::size_t>(task) * buckets + bucket]);
  }
  // A distance table's gradient: [h][column] += its lanes' sums, in lane order.
  for (int h = 0; table_grad && h < plan.Hq; ++h)
    for (std::int64_t x = 0; x < width; ++x) {
      double sum = 0;
      for (int lane = 0; lane < lanes; ++lane) sum += table_partials[(static_cast<std::size_t>(h) * lanes + lane) * width + x];
      grads.distance_table_grad[h * width + x] += static_cast<float>(sum);
    }
  // FoX: dc[past + i] += sum_j dS_ij (query i's own key index), dc[j] -= sum_i dS_ij.
  for (std::int64_t row = 0; gate_grad && row < std::int64_t{B} * plan.Hq; ++row)
    for (int j = 0; j < T; ++j) {
      const std::int64_t i = j - plan.past;
      const double own = i >= 0 && i < S ? gate_rows[static_cast<std::size_t>(row * S + i)] : 0.0;
      grads.gate_cumulative_grad[row * T + j] += static_cast<float>(own - gate_columns[static_cast<std::size_t>(row * T + j)]);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
