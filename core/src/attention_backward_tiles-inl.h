// The attention backward pass's tiles and per-tile steps (attention_backward_kernels-inl.h),
// compiled per Highway target inside its foreach_target unit: loading a query or key tile
// (rotated as the forward rotates them, with a remap's far rotations), recomputing P and dS of a
// tile pair, a remap branch's share of dS, a distance table's gradient, D_i.
#if defined(POSENC_ATTENTION_BACKWARD_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_BACKWARD_TILES_INL_H_
#undef POSENC_ATTENTION_BACKWARD_TILES_INL_H_
#else
#define POSENC_ATTENTION_BACKWARD_TILES_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "attention_packed.h"
#include "attention_plan.h"
#include "attention_softmax-inl.h"
#include "attention_tiles-inl.h"
#include "posenc/attention_backward.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One thread's tiles (floats, one aligned allocation). Query side [kPaddedRows][D], key side
// [kKeyTile][D] or transposed [D][kKeyTile], score-shaped [kPaddedRows][kKeyTile]. With a remap
// (attention_remap.h) also its far query tiles (Remap::far_queries: DCA has two) and their dQ,
// the far keys (transposed and as rows) and their dK, far scores and one branch's dS.
struct BackwardTiles {
  static constexpr int kRows = attention_detail::kPaddedRows, kKeys = attention_detail::kKeyTile;
  static std::size_t floats(int D, int far_queries) {
    const std::size_t far = far_queries ? std::size_t{2} * far_queries * kRows * D + std::size_t{3} * kKeys * D + std::size_t{2} * kRows * kKeys : 0;
    return std::size_t{3} * kRows * D + std::size_t{5} * kKeys * D + std::size_t{2} * kRows * kKeys + 2 * kRows + 2 * D + far;
  }
  BackwardTiles(int D, int far_queries) : buffer(hwy::AllocateAligned<float>(floats(D, far_queries))) {
    float* x = buffer.get();
    const auto take = [&x](std::size_t n) { float* at = x; x += n; return at; };
    Q = Q_own = take(std::size_t{kRows} * D);    // rotated queries times scale
    dO = dO_own = take(std::size_t{kRows} * D);
    dQ = take(std::size_t{kRows} * D);   // pass Q's accumulator
    Kt = Kt_own = take(std::size_t{kKeys} * D);   // rotated keys, [D][kKeyTile]
    Vt = Vt_own = take(std::size_t{kKeys} * D);   // values, [D][kKeyTile]
    K = K_own = take(std::size_t{kKeys} * D);     // rotated keys, [kKeyTile][D] (pass Q)
    dK = take(std::size_t{kKeys} * D);   // pass K's accumulators, rotated frame
    dV = take(std::size_t{kKeys} * D);
    P = take(std::size_t{kRows} * kKeys);
    dS = take(std::size_t{kRows} * kKeys);  // dP, then dS in place
    lse = take(kRows);
    Di = take(kRows);
    tmp = take(2 * std::size_t(D));
    for (int f = 0; f < far_queries; ++f) {
      Qf[f] = take(std::size_t{kRows} * D);   // far queries times scale (f 1: DCA's inter-chunk)
      dQf[f] = take(std::size_t{kRows} * D);  // their accumulators, each in its own rotated frame
    }
    if (!far_queries) return;
    Ktf = take(std::size_t{kKeys} * D);  // far keys, [D][kKeyTile], and as rows (pass Q)
    Kf = take(std::size_t{kKeys} * D);
    dKf = take(std::size_t{kKeys} * D);  // their accumulator, far frame
    Sf = take(std::size_t{kRows} * kKeys);   // a further branch's scores
    dSb = take(std::size_t{kRows} * kKeys);  // one branch's share of dS
  }
  hwy::AlignedFreeUniquePtr<float[]> buffer;
  // Q, dO, Kt, Vt and K point at this thread's own tiles (*_own) or at packed ones (attention_packed.h).
  const float *Q, *dO, *Kt, *Vt, *K;
  float *Q_own, *dO_own, *Kt_own, *Vt_own, *K_own;
  float *dQ, *dK, *dV, *P, *dS, *lse, *Di, *tmp;
  float *Qf[2] = {nullptr, nullptr}, *dQf[2] = {nullptr, nullptr}, *Ktf = nullptr, *Kf = nullptr, *dKf = nullptr, *Sf = nullptr,
        *dSb = nullptr;
  int branches = attention_detail::Remap::kNear;  // the loaded tile pair's (TileGradients)
  struct { int b, h, i0, rows; } query = {0, 0, 0, 0};  // the loaded query tile (LoadQueryTile)
  int far_loaded = 0;                                  // its far tiles loaded so far (LoadFarQueries)
  std::vector<std::int64_t> positions = std::vector<std::int64_t>(attention_detail::kQueryTile + attention_detail::kKeyTile);
  std::vector<int> lut;
  // A branch's query tile (times scale), key tile ([D][kKeyTile] or rows) and accumulators.
  const float* query_of(int which) const { return which == attention_detail::Remap::kNear ? Q : Qf[which == attention_detail::Remap::kFar ? 0 : 1]; }
  const float* keys_of(int which) const { return which == attention_detail::Remap::kNear ? Kt : Ktf; }
  const float* key_rows_of(int which) const { return which == attention_detail::Remap::kNear ? K : Kf; }
  float* dq_of(int which) const { return which == attention_detail::Remap::kNear ? dQ : dQf[which == attention_detail::Remap::kFar ? 0 : 1]; }
  float* dk_of(int which) const { return which == attention_detail::Remap::kNear ? dK : dKf; }
};

// Queries i0 .. i0+rows-1 of head h: Q (rotated, times scale), dO, lse and D_i; the padding
// rows zero with lse +inf, so that their P is 0. A row that saw no key (lse -inf) also gets
// +inf: its scores are all -inf and exp(-inf - lse) must be 0, not NaN.
// With packed queries, Q and dO point into them (the same values: rotated, then times scale).
void LoadQueryTile(const attention_detail::Plan& plan, const AttentionBackwardInputs& in, const float* Di, int b, int h, int i0,
                   int rows, const attention_detail::PackedQueries& packed, BackwardTiles& t) {
  const int D = plan.D;
  const float inf = std::numeric_limits<float>::infinity();
  const bool own = packed.empty();
  t.Q = own ? t.Q_own : packed.q(b, h, i0);
  t.dO = own ? t.dO_own : packed.dout(b, h, i0);
  if (own) {
    std::fill(t.Q_own, t.Q_own + BackwardTiles::kRows * D, 0.0f);
    std::fill(t.dO_own, t.dO_own + BackwardTiles::kRows * D, 0.0f);
  }
  std::fill(t.lse, t.lse + BackwardTiles::kRows, inf);
  std::fill(t.Di, t.Di + BackwardTiles::kRows, 0.0f);
  t.query = {b, h, i0, rows};
  t.far_loaded = 0;
  for (int r = 0; r < rows; ++r) {
    if (own) {
      plan.load_query(b, i0 + r, h, t.Q_own + r * D, t.tmp);
      for (int x = 0; x < D; ++x) t.Q_own[r * D + x] *= plan.scale;
      attention_detail::load_row(in.dout, b, i0 + r, h, t.dO_own + r * D);
    }
    const std::int64_t row = (std::int64_t{b} * plan.Hq + h) * plan.S + i0 + r;
    t.lse[r] = in.lse[row] == -inf ? inf : in.lse[row];
    t.Di[r] = Di[row];
  }
}

// A remap's far query tile `which` (Remap::kFar or kFar2) of the loaded query tile, times scale,
// on its first need: pass K reloads each query tile per key tile, and most tile pairs need no
// far branch (rotating at a far position off the table costs num_freqs sincos per row).
void LoadFarQueries(const attention_detail::Plan& plan, int which, BackwardTiles& t) {
  if (t.far_loaded & which) return;
  float* Qf = t.Qf[which == attention_detail::Remap::kFar ? 0 : 1];
  const int D = plan.D;
  std::fill(Qf, Qf + BackwardTiles::kRows * D, 0.0f);
  for (int r = 0; r < t.query.rows; ++r) {
    plan.load_query_far(t.query.b, t.query.i0 + r, t.query.h, Qf + r * D, t.tmp, which);
    for (int x = 0; x < D; ++x) Qf[r * D + x] *= plan.scale;
  }
  t.far_loaded |= which;
}

// Keys j0 .. j0+cols-1 of kv head hk: Kt and Vt transposed, and with_rows: K as rows; with a
// remap the far keys alike (Ktf, Kf); zero beyond cols. With packed keys (j0 a multiple of
// kKeyTile) Kt, Vt and K point into them; only a remap's far keys are loaded here.
void LoadKeyTile(const attention_detail::Plan& plan, int b, int hk, std::int64_t j0, int cols, bool with_rows,
                 const attention_detail::PackedKeys& packed, BackwardTiles& t) {
  const int D = plan.D, n = BackwardTiles::kKeys;
  const bool remapped = plan.remap.on(), own = packed.empty();
  const std::int64_t tile = j0 / n;
  t.Kt = own ? t.Kt_own : packed.kt(b, hk, tile);
  t.Vt = own ? t.Vt_own : packed.vt(b, hk, tile);
  t.K = own ? t.K_own : packed.k_rows(b, hk, tile);
  for (float* x : {own ? t.Kt_own : nullptr, own ? t.Vt_own : nullptr, own && with_rows ? t.K_own : nullptr,
                   remapped ? t.Ktf : nullptr, remapped && with_rows ? t.Kf : nullptr})
    if (x) std::fill(x, x + n * D, 0.0f);
  float* krow = t.tmp + D;
  for (int c = 0; c < cols && (own || remapped); ++c) {
    const int j = static_cast<int>(j0 + c);
    if (remapped) {
      plan.load_key_far(b, j, hk, krow, t.tmp);
      for (int x = 0; x < D; ++x) t.Ktf[x * n + c] = krow[x];
      if (with_rows) std::copy_n(krow, D, t.Kf + c * D);
    }
    if (!own) continue;
    plan.load_key(b, j, hk, krow, t.tmp);
    for (int x = 0; x < D; ++x) t.Kt_own[x * n + c] = krow[x];
    if (with_rows) std::copy_n(krow, D, t.K_own + c * D);
    attention_detail::load_row(*plan.v, b, j, hk, krow);
    for (int x = 0; x < D; ++x) t.Vt_own[x * n + c] = krow[x];
  }
}

// P = exp(s - lse) over one row of kKeyTile scores (masked: -inf, so 0), the forward's weights
// (SoftmaxWeight, attention_softmax-inl.h): 0 below kLeastNormalExponent.
void ExpMinusLseRow(float* HWY_RESTRICT s, float lse) {
  const DA d;
  const int N = static_cast<int>(hn::Lanes(d));
  const auto l = hn::Set(d, lse);
  int c = 0;
  for (; c + N <= BackwardTiles::kKeys; c += N) hn::StoreU(SoftmaxWeight(d, hn::Sub(hn::LoadU(d, s + c), l)), d, s + c);
  for (; c < BackwardTiles::kKeys; ++c) {
    const float x = s[c] - lse;
    s[c] = x >= kLeastNormalExponent ? std::exp(x) : 0.0f;
  }
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
// forward computes them (a remap's branches too: t.branches), then exp(S - lse); dP = dO V^T;
// dS = P (dP - D_i). Every padding row and column ends 0 in both.
void TileGradients(const attention_detail::Plan& plan, int b, int h, int i0, int rows, std::int64_t j0, int cols, BackwardTiles& t) {
  using attention_detail::Remap;
  const int D = plan.D, rows4 = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
  t.branches = Remap::kNear;
  if (plan.remap.on()) {
    plan.tile_positions(b, i0, rows, j0, cols, t.positions.data());
    t.branches = plan.remap.branches(t.positions.data(), rows, t.positions.data() + rows, cols);
  }
  bool first = true;  // the first branch scores into P, each further one into Sf, taken per element
  for (const int which : {Remap::kNear, Remap::kFar, Remap::kFar2}) {
    if (!(t.branches & which)) continue;
    if (which != Remap::kNear) LoadFarQueries(plan, which, t);
    ScoreTile(t.query_of(which), t.keys_of(which), rows4, D, first ? t.P : t.Sf);
    if (!first) plan.remap.merge(which, t.positions.data(), rows, t.positions.data() + rows, cols, t.Sf, t.P, BackwardTiles::kKeys);
    first = false;
  }
  if (plan.has_bias())
    plan.add_bias_tile(b, h, i0, rows, j0, cols, t.P, BackwardTiles::kKeys, t.positions.data(), t.lut);
  plan.mask_tile(b, i0, rows, j0, cols, t.P);
  for (int r = 0; r < rows; ++r) ExpMinusLseRow(t.P + r * BackwardTiles::kKeys, t.lse[r]);
  std::fill(t.P + rows * BackwardTiles::kKeys, t.P + rows4 * BackwardTiles::kKeys, 0.0f);
  ScoreTile(t.dO, t.Vt, rows4, D, t.dS);
  for (int r = 0; r < rows4; ++r) ScoreGradRow(t.P + r * BackwardTiles::kKeys, t.Di[r], t.dS + r * BackwardTiles::kKeys);
}

// One remap branch's share of the tile's dS (zero elsewhere): dS itself when the tile has that
// branch alone (t.branches, positions: TileGradients').
const float* BranchScores(const attention_detail::Plan& plan, int which, int rows, int cols, BackwardTiles& t) {
  if (t.branches == which) return t.dS;
  std::fill(t.dSb, t.dSb + BackwardTiles::kRows * BackwardTiles::kKeys, 0.0f);
  const std::int64_t* qp = t.positions.data();
  const std::int64_t* kp = qp + rows;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      if (plan.remap.branch(qp[r], kp[c]) == which) t.dSb[r * BackwardTiles::kKeys + c] = t.dS[r * BackwardTiles::kKeys + c];
  return t.dSb;
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

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
