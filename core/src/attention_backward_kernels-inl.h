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
// transposed key or value tile; the three accumulations by AccumulateTile, P and dS transposed
// ([keys][queries]) for the key side.
#if defined(POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_
#undef POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_
#else
#define POSENC_ATTENTION_BACKWARD_KERNELS_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "attention_plan.h"
#include "attention_tiles-inl.h"
#include "posenc/attention_backward.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One thread's tiles (floats, one aligned allocation). Query side [kPaddedRows][D], key side
// [kKeyTile][D] or transposed [D][kKeyTile], score-shaped [kPaddedRows][kKeyTile].
struct BackwardTiles {
  static constexpr int kRows = attention_detail::kPaddedRows, kKeys = attention_detail::kKeyTile;
  static std::size_t floats(int D) { return std::size_t{3} * kRows * D + std::size_t{5} * kKeys * D + std::size_t{3} * kRows * kKeys + 2 * kRows + 2 * D; }
  explicit BackwardTiles(int D) : buffer(hwy::AllocateAligned<float>(floats(D))) {
    float* x = buffer.get();
    const auto take = [&x](std::size_t n) { float* at = x; x += n; return at; };
    Q = take(std::size_t{kRows} * D);    // rotated queries times scale
    dO = take(std::size_t{kRows} * D);
    dQ = take(std::size_t{kRows} * D);   // pass Q's accumulator
    Kt = take(std::size_t{kKeys} * D);   // rotated keys, [D][kKeyTile]
    Vt = take(std::size_t{kKeys} * D);   // values, [D][kKeyTile]
    K = take(std::size_t{kKeys} * D);    // rotated keys, [kKeyTile][D] (pass Q)
    dK = take(std::size_t{kKeys} * D);   // pass K's accumulators, rotated frame
    dV = take(std::size_t{kKeys} * D);
    P = take(std::size_t{kRows} * kKeys);
    dS = take(std::size_t{kRows} * kKeys);  // dP, then dS in place
    Tr = take(std::size_t{kRows} * kKeys);  // P or dS transposed, [kKeyTile][kPaddedRows]
    lse = take(kRows);
    Di = take(kRows);
    tmp = take(2 * std::size_t(D));
  }
  hwy::AlignedFreeUniquePtr<float[]> buffer;
  float *Q, *dO, *dQ, *Kt, *Vt, *K, *dK, *dV, *P, *dS, *Tr, *lse, *Di, *tmp;
  std::vector<std::int64_t> positions = std::vector<std::int64_t>(attention_detail::kQueryTile + attention_detail::kKeyTile);
  std::vector<int> lut;
};

// Queries i0 .. i0+rows-1 of head h: Q (rotated, times scale), dO, lse and D_i; the padding
// rows zero with lse +inf, so that their P is 0. A row that saw no key (lse -inf) also gets
// +inf: its scores are all -inf and exp(-inf - lse) must be 0, not NaN.
void LoadQueryTile(const attention_detail::Plan& plan, const AttentionBackwardInputs& in, const float* Di, int b, int h, int i0,
                   int rows, BackwardTiles& t) {
  const int D = plan.D;
  const float inf = std::numeric_limits<float>::infinity();
  std::fill(t.Q, t.Q + BackwardTiles::kRows * D, 0.0f);
  std::fill(t.dO, t.dO + BackwardTiles::kRows * D, 0.0f);
  std::fill(t.lse, t.lse + BackwardTiles::kRows, inf);
  std::fill(t.Di, t.Di + BackwardTiles::kRows, 0.0f);
  for (int r = 0; r < rows; ++r) {
    plan.load_query(b, i0 + r, h, t.Q + r * D, t.tmp);
    for (int x = 0; x < D; ++x) t.Q[r * D + x] *= plan.scale;
    attention_detail::load_row(in.dout, b, i0 + r, h, t.dO + r * D);
    const std::int64_t row = (std::int64_t{b} * plan.Hq + h) * plan.S + i0 + r;
    t.lse[r] = in.lse[row] == -inf ? inf : in.lse[row];
    t.Di[r] = Di[row];
  }
}

// Keys j0 .. j0+cols-1 of kv head hk: Kt and Vt transposed, and with_rows: K as rows; zero
// beyond cols.
void LoadKeyTile(const attention_detail::Plan& plan, int b, int hk, std::int64_t j0, int cols, bool with_rows, BackwardTiles& t) {
  const int D = plan.D, n = BackwardTiles::kKeys;
  std::fill(t.Kt, t.Kt + n * D, 0.0f);
  std::fill(t.Vt, t.Vt + n * D, 0.0f);
  if (with_rows) std::fill(t.K, t.K + n * D, 0.0f);
  float* krow = t.tmp + D;
  for (int c = 0; c < cols; ++c) {
    const int j = static_cast<int>(j0 + c);
    plan.load_key(b, j, hk, krow, t.tmp);
    for (int x = 0; x < D; ++x) t.Kt[x * n + c] = krow[x];
    if (with_rows) std::copy_n(krow, D, t.K + c * D);
    attention_detail::load_row(*plan.v, b, j, hk, krow);
    for (int x = 0; x < D; ++x) t.Vt[x * n + c] = krow[x];
  }
}

// P = exp(s - lse) over one row of kKeyTile scores (masked: -inf, so 0). Highway's Exp is valid
// on [-FLT_MAX, 104]: the argument goes through a finite floor, as in the forward.
void ExpMinusLseRow(float* HWY_RESTRICT s, float lse) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  const auto l = hn::Set(d, lse), floor = hn::Set(d, -1e30f);
  int c = 0;
  for (; c + N <= BackwardTiles::kKeys; c += N) hn::StoreU(hn::Exp(d, hn::Max(hn::Sub(hn::LoadU(d, s + c), l), floor)), d, s + c);
  for (; c < BackwardTiles::kKeys; ++c) s[c] = std::exp(std::max(s[c] - lse, -1e30f));
}

// dS = P * (dP - D_i) over one row, in place on dP.
void ScoreGradRow(const float* HWY_RESTRICT p, float Di, float* HWY_RESTRICT ds) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  const auto di = hn::Set(d, Di);
  int c = 0;
  for (; c + N <= BackwardTiles::kKeys; c += N) hn::StoreU(hn::Mul(hn::LoadU(d, p + c), hn::Sub(hn::LoadU(d, ds + c), di)), d, ds + c);
  for (; c < BackwardTiles::kKeys; ++c) ds[c] = p[c] * (ds[c] - Di);
}

// P and dS of (the loaded query tile, the loaded key tile): scores, bias and masks as the
// forward computes them, then exp(S - lse); dP = dO V^T; dS = P (dP - D_i). Every padding row
// and column ends 0 in both.
void TileGradients(const attention_detail::Plan& plan, int b, int h, int i0, int rows, std::int64_t j0, int cols, BackwardTiles& t) {
  const int D = plan.D, rows4 = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
  ScoreTile(t.Q, t.Kt, rows4, D, t.P);
  if (plan.has_bias())
    plan.add_bias_tile(b, h, i0, rows, j0, cols, t.P, BackwardTiles::kKeys, t.positions.data(), t.lut);
  plan.mask_tile(b, i0, rows, j0, cols, t.P);
  for (int r = 0; r < rows; ++r) ExpMinusLseRow(t.P + r * BackwardTiles::kKeys, t.lse[r]);
  std::fill(t.P + rows * BackwardTiles::kKeys, t.P + rows4 * BackwardTiles::kKeys, 0.0f);
  ScoreTile(t.dO, t.Vt, rows4, D, t.dS);
  for (int r = 0; r < rows4; ++r) ScoreGradRow(t.P + r * BackwardTiles::kKeys, t.Di[r], t.dS + r * BackwardTiles::kKeys);
}

// A distance table's gradient: partial[column(qpos - kpos)] += dS over one tile (the table's
// row of the task's head; dS is 0 where the masks hide a key). Consecutive positions (the usual
// case) put each distance on one diagonal of the tile: its rows + cols - 1 diagonals are summed in
// float (at most kQueryTile terms each) and added to the double partial once per tile; scattered
// explicit ids go element by element.
void AddDistanceGradients(const attention_detail::Plan& plan, int b, int i0, int rows, std::int64_t j0, int cols, BackwardTiles& t,
                          double* partial) {
  plan.tile_positions(b, i0, rows, j0, cols, t.positions.data());
  const std::int64_t* qp = t.positions.data();
  const std::int64_t* kp = qp + rows;
  const DistanceTable& table = plan.p->distance_table;
  bool consecutive = true;
  for (int r = 1; consecutive && r < rows; ++r) consecutive = qp[r] == qp[0] + r;
  for (int c = 1; consecutive && c < cols; ++c) consecutive = kp[c] == kp[0] + c;
  if (!consecutive) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) partial[table.column(qp[r] - kp[c])] += t.dS[r * BackwardTiles::kKeys + c];
    return;
  }
  float diagonals[BackwardTiles::kRows + BackwardTiles::kKeys] = {};  // [r - c + cols - 1]
  for (int r = 0; r < rows; ++r) {
    float* d = diagonals + r + cols - 1;
    const float* ds = t.dS + r * BackwardTiles::kKeys;
    for (int c = 0; c < cols; ++c) d[-c] += ds[c];
  }
  const std::int64_t first = qp[0] - kp[0] - (cols - 1);  // the distance of diagonal 0
  for (int x = 0; x < rows + cols - 1; ++x) partial[table.column(first + x)] += diagonals[x];
}

// X [rows4][kKeyTile] -> T [cols4][kPaddedRows].
void TransposeTile(const float* HWY_RESTRICT X, int rows4, int cols4, float* HWY_RESTRICT T) {
  for (int c = 0; c < cols4; ++c)
    for (int r = 0; r < rows4; ++r) T[c * BackwardTiles::kRows + r] = X[r * BackwardTiles::kKeys + c];
}

// D_i = dO_i . O_i for every (b, h, i), [B, Hq, S].
void RowDots(const AttentionBackwardInputs& in, int threads, float* Di) {
  const int S = in.q.tokens, Hq = in.q.heads, D = in.q.head_dim;
  const std::int64_t rows = std::int64_t{in.q.batch} * Hq * S;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
  for (std::int64_t row = 0; row < rows; ++row) {
    const int i = static_cast<int>(row % S), h = static_cast<int>(row / S % Hq), b = static_cast<int>(row / S / Hq);
    const float* o = static_cast<const float*>(in.out.data) + attention_detail::offset_of(in.out, b, i, h);
    const float* g = static_cast<const float*>(in.dout.data) + attention_detail::offset_of(in.dout, b, i, h);
    double sum = 0;
    for (int x = 0; x < D; ++x) sum += static_cast<double>(o[x]) * g[x];
    Di[row] = static_cast<float>(sum);
  }
}

void AttentionBackwardAll(const attention_detail::Plan& plan, const AttentionBackwardInputs& in, const AttentionGradients& grads,
                          int threads) {
  using attention_detail::kKeyTile;
  using attention_detail::kQueryTile;
  const int D = plan.D, S = plan.S, T = plan.T, B = in.q.batch, Hk = in.k.heads;
  const int query_tiles = (S + kQueryTile - 1) / kQueryTile, key_tiles = (T + kKeyTile - 1) / kKeyTile;
  std::vector<float> Di(static_cast<std::size_t>(B) * plan.Hq * S);
  RowDots(in, threads, Di.data());
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
    BackwardTiles t(D);
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
      LoadKeyTile(plan, b, hk, j0, cols, false, t);
      std::fill(t.dK, t.dK + kKeyTile * D, 0.0f);
      std::fill(t.dV, t.dV + kKeyTile * D, 0.0f);
      for (int h = hk * plan.group; h < (hk + 1) * plan.group; ++h) {
        std::fill(sums.begin(), sums.end(), 0.0);
        for (int i0 = 0; i0 < S; i0 += kQueryTile) {
          const int rows = std::min(kQueryTile, S - i0), rows4 = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
          std::int64_t lo, hi;
          plan.key_range(i0, i0 + rows, &lo, &hi);
          if (hi <= j0 || lo >= j0 + cols) continue;  // the masks hide this key tile from these queries
          LoadQueryTile(plan, in, Di.data(), b, h, i0, rows, t);
          TileGradients(plan, b, h, i0, rows, j0, cols, t);
          TransposeTile(t.P, rows4, cols4, t.Tr);
          AccumulateTile(t.Tr, BackwardTiles::kRows, t.dO, cols4, rows4, D, t.dV);
          TransposeTile(t.dS, rows4, cols4, t.Tr);
          AccumulateTile(t.Tr, BackwardTiles::kRows, t.Q, cols4, rows4, D, t.dK);  // Q holds scale * q
          for (int c = 0; gate_grad && c < cols; ++c) {
            double column = 0;
            for (int r = 0; r < rows; ++r) column += t.Tr[c * BackwardTiles::kRows + r];
            sums[static_cast<std::size_t>(c)] += column;
          }
        }
        for (int c = 0; gate_grad && c < cols; ++c)
          gate_columns[(static_cast<std::size_t>(b) * plan.Hq + h) * T + static_cast<std::size_t>(j0 + c)] = sums[static_cast<std::size_t>(c)];
      }
      for (int c = 0; c < cols; ++c) {
        const int j = static_cast<int>(j0 + c);
        plan.unrotate_key(b, j, t.dK + c * D, t.tmp);
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
      LoadQueryTile(plan, in, Di.data(), b, h, i0, rows, t);
      std::fill(t.dQ, t.dQ + BackwardTiles::kRows * D, 0.0f);
      std::fill(sums.begin(), sums.end(), 0.0);
      double* partial = t5_grad ? partials.data() + static_cast<std::size_t>(task) * buckets : nullptr;
      std::int64_t lo, hi;
      plan.key_range(i0, i0 + rows, &lo, &hi);
      // Whole key tiles from 0, as pass K cuts them: the same P for the same (query, key).
      for (std::int64_t j0 = lo / kKeyTile * kKeyTile; j0 < hi; j0 += kKeyTile) {
        const int cols = static_cast<int>(std::min<std::int64_t>(kKeyTile, T - j0));
        LoadKeyTile(plan, b, hk, j0, cols, true, t);
        TileGradients(plan, b, h, i0, rows, j0, cols, t);
        AccumulateTile(t.dS, kKeyTile, t.K, rows4, cols, D, t.dQ);
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
        plan.unrotate_query(b, i0 + r, row, t.tmp);
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
