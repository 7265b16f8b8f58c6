// What one attention() call shares, private to the core: shapes, the masks' geometry and the
// position terms, as scalar helpers that the reference and every SIMD target use alike.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "posenc/attention.h"
#include "posenc/half.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_xpos.h"
#include "posenc/t5_bias.h"
#include "attention_remap.h"

namespace posenc::attention_detail {

// Tile sizes. Each key tile is loaded, converted and transposed once per query tile, so the
// query tile is what amortises it: measured at S = T = 4096, 8 heads, D = 64, causal ALiBi on
// one Zen 4 thread, 32 rows gave 43.8 GFLOP/s, 64 rows 49.5, 128 rows 58.3, 256 rows 55.8 (and
// 128 x 128 keys 55.6). The tiles of one thread (query, accumulators, scores, key, value: 128 KiB
// at D = 64) stay in L2.
inline constexpr int kQueryTile = 128, kKeyTile = 64;
// The backward pass sums a distance table's gradient per head in this many lanes (a run of query
// tiles each, attention_backward.h): a fixed count, so the bits do not depend on the threads;
// heads x lanes work items keep 8-16 threads busy, at heads x lanes x width doubles.
inline constexpr int kTableLanes = 8;
// The SIMD kernels block 4 query rows at a time: the query tile rounded up to that (zero rows
// cost a little and are never stored).
inline constexpr int kRowBlock = 4;
inline constexpr int kPaddedRows = (kQueryTile + kRowBlock - 1) / kRowBlock * kRowBlock;
// ln(FLT_MIN) = -87.33654...: a softmax weight exp(x) below it is 0, not a subnormal. Its share
// of a row is below 1e-38 of the largest weight, and subnormal operands in the products that
// follow take the CPU's slow path (ALiBi's steep slopes put most far keys there; the backward ran
// at half speed: 912 against 577 ms with slopes / 1000, S 2048).
inline constexpr float kLeastNormalExponent = -87.3365f;

// Floats of one thread's tiles (attention_kernels-inl.h): query tile and accumulators, key
// and value tiles, scores, row maximum and sum, a row of scratch; with a remap also its far
// query tiles (Remap::far_queries), far keys and far scores.
inline std::size_t tile_floats(int D, int far_queries) {
  const std::size_t d = static_cast<std::size_t>(D);
  const std::size_t far = far_queries ? far_queries * kPaddedRows * d + kKeyTile * d + std::size_t{kPaddedRows} * kKeyTile : 0;
  return kPaddedRows * d * 2 + kKeyTile * d * 2 + std::size_t{kPaddedRows} * kKeyTile + 2 * kPaddedRows + d + far;
}

inline std::int64_t offset_of(const RopeTensor& x, int b, int t, int h) {
  return b * x.batch_stride + t * x.token_stride + h * x.head_stride;
}

inline void load_row(const RopeTensor& x, int b, int t, int h, float* out) {
  const std::int64_t at = offset_of(x, b, t, h);
  switch (x.dtype) {
    case DType::kF32: std::copy_n(static_cast<const float*>(x.data) + at, x.head_dim, out); break;
    case DType::kBF16:
      for (int c = 0; c < x.head_dim; ++c) out[c] = bf16_to_float(static_cast<const std::uint16_t*>(x.data)[at + c]);
      break;
    case DType::kF16:
      for (int c = 0; c < x.head_dim; ++c) out[c] = f16_to_float(static_cast<const std::uint16_t*>(x.data)[at + c]);
      break;
  }
}

inline void store_row(const RopeTensor& x, int b, int t, int h, const float* in) {
  const std::int64_t at = offset_of(x, b, t, h);
  switch (x.dtype) {
    case DType::kF32: std::copy_n(in, x.head_dim, static_cast<float*>(x.data) + at); break;
    case DType::kBF16:
      for (int c = 0; c < x.head_dim; ++c) static_cast<std::uint16_t*>(x.data)[at + c] = float_to_bf16(in[c]);
      break;
    case DType::kF16:
      for (int c = 0; c < x.head_dim; ++c) static_cast<std::uint16_t*>(x.data)[at + c] = float_to_f16(in[c]);
      break;
  }
}

struct Plan {
  const RopeTensor *q, *k, *v, *out;
  const AttentionParams* p;
  int S, T, Hq, group, D;
  std::int64_t past;
  float scale;
  // RoPE's cos/sin by position id, [position][num_freqs] each, covering every position of the
  // call: a snapshot of options.table, or of a table built for the call (make_plan). Each key
  // is rotated once per query tile that reads it, and the table turns its num_freqs sincos into
  // loads. Null: computed per row (rope_row_reference: the same bits, rope_cos_sin's).
  std::shared_ptr<const RopeTable::Rows> angles;
  Remap remap;  // RoPE's remapped distances (attention_remap.h); off unless params.remap

  // xPos's per-position scales (rope_xpos.h), when params.rope.xpos is on (make_plan), and the
  // id that keeps one thread's cached block of scales (XPosScales::Block) to this plan's.
  std::shared_ptr<const XPosScales> xpos;
  std::uint64_t xpos_id = 0;

  // Whether head h of q (kv head h of k) rotates. RoPE on a subset of heads (rotated_heads n):
  // query heads h < n, and the kv heads they read, h < n / group (validate_attention: n a
  // multiple of the group, so a kv head's query heads all rotate or none does).
  bool rotates(bool key, int h) const {
    const int n = p->rope.rotated_heads;
    return n == 0 || h < (key ? n / group : n);
  }

  // Rotates row[D] of q or k (token t of batch row b, head h) in place by RoPE when that is the
  // scheme: the rotary channels [channel_offset, channel_offset + 2 num_freqs), each pair's cos
  // and sin times xPos's query or key scale when xPos is on (rope_apply_reference's products, so
  // the same bits). direction +1 as the forward rotates, -1 its transpose, which turns a gradient
  // w.r.t. the rotated row into one w.r.t. the row as stored (xPos's scale is its own transpose:
  // both channels of a pair take it). tmp: D floats.
  void rotate(const RopeTensor& x, const PositionIds& ids, int b, int t, int h, bool key, float* row, float* tmp,
              int direction) const {
    if (p->positions != AttentionPositions::kRope || !rotates(key, h)) return;
    const RopeApplyParams& rope = p->rope;
    const int half = rope.num_freqs;
    row += rope.channel_offset;
    std::copy_n(row, 2 * half, tmp);
    // The row's own cos/sin [2][num_freqs] where the table's rows cannot be read as they are:
    // no table, frequencies on different axes (M-RoPE), the transpose (rope_cos_sin's -sin is
    // exactly the negated +sin the table holds), or xPos's scales.
    thread_local std::vector<float> own;
    own.resize(2 * static_cast<std::size_t>(half));
    float* own_cos = own.data();
    float* own_sin = own.data() + half;
    const float* cos = own_cos;
    const float* sin = own_sin;
    const auto axis = [&](int j) { return rope.axis_of_freq ? rope.axis_of_freq[j] : 0; };
    if (!angles) {
      RopeApplyParams turned = rope;
      turned.direction = direction;
      for (int j = 0; j < half; ++j) rope_cos_sin(rope.inv_freq[j], ids.at(axis(j), b, t, x.tokens), turned, own_cos + j, own_sin + j);
    } else if (!rope.axis_of_freq && direction > 0 && !xpos) {
      const std::size_t at = static_cast<std::size_t>(ids.at(0, b, t, x.tokens)) * half;
      cos = angles->cos.data() + at;
      sin = angles->sin.data() + at;
    } else {
      for (int j = 0; j < half; ++j) {
        const std::size_t at = static_cast<std::size_t>(ids.at(axis(j), b, t, x.tokens)) * half + j;
        own_cos[j] = angles->cos[at];
        own_sin[j] = direction > 0 ? angles->sin[at] : -angles->sin[at];
      }
    }
    if (xpos) scale_by_xpos(ids.at(0, b, t, x.tokens), key, own_cos, own_sin);
    rope_rotate_row(tmp, row, cos, sin, half, rope.layout, direction);
  }
  // cos[j] and sin[j] times xPos's scale of pair j at `position` for a query or a key.
  void scale_by_xpos(std::int64_t position, bool key, float* cos, float* sin) const;  // attention.cc
  // Row of q or k, rotated when the scheme is RoPE, into out[D] (tmp: D floats).
  void load_query(int b, int t, int h, float* out, float* tmp) const {
    load_row(*q, b, t, h, out);
    rotate(*q, p->q_positions, b, t, h, false, out, tmp, 1);
  }
  void load_key(int b, int t, int h, float* out, float* tmp) const {
    load_row(*k, b, t, h, out);
    rotate(*k, p->k_positions, b, t, h, true, out, tmp, 1);
  }
  // A remap's far branch (Remap::kFar, or DCA's kFar2): the row rotated at its far position
  // (Remap::query / key). 1-D positions; table rows where the position is integral
  // (Self-Extend, ReRoPE, DCA: make_plan's table covers them), a leaky row from remap.keys or
  // remap.queries, else rope_cos_sin_at. direction -1: the transpose (the backward's).
  void rotate_query_far(int b, int t, float* row, float* tmp, int branch, int direction) const {
    if (!remap.queries) return rotate_at(remap.query(p->q_positions.at(0, b, t, S), branch), nullptr, nullptr, row, tmp, direction);
    const std::size_t at = static_cast<std::size_t>(remap.queries->per_batch_row ? std::int64_t{b} * S + t : t) * p->rope.num_freqs;
    rotate_at(0, remap.queries->cos.data() + at, remap.queries->sin.data() + at, row, tmp, direction);
  }
  void rotate_key_far(int b, int t, float* row, float* tmp, int direction) const {
    if (!remap.keys) return rotate_at(remap.key(p->k_positions.at(0, b, t, T)), nullptr, nullptr, row, tmp, direction);
    const std::size_t at = static_cast<std::size_t>(remap.keys->per_batch_row ? std::int64_t{b} * T + t : t) * p->rope.num_freqs;
    rotate_at(0, remap.keys->cos.data() + at, remap.keys->sin.data() + at, row, tmp, direction);
  }
  void load_query_far(int b, int t, int h, float* out, float* tmp, int branch) const {
    load_row(*q, b, t, h, out);
    rotate_query_far(b, t, out, tmp, branch, 1);
  }
  void load_key_far(int b, int t, int h, float* out, float* tmp) const {
    load_row(*k, b, t, h, out);
    rotate_key_far(b, t, out, tmp, 1);
  }
  // row rotated in place by the given cos/sin row, or at `position` when cos is null; direction
  // -1 rotates back (sin negated, as rotate's transpose).
  void rotate_at(double position, const float* cos, const float* sin, float* row, float* tmp, int direction = 1) const {
    const RopeApplyParams& rope = p->rope;
    const int half = rope.num_freqs;
    std::copy_n(row, 2 * half, tmp);
    const auto whole = static_cast<std::int64_t>(position);
    if (!cos && angles && static_cast<double>(whole) == position && whole < angles->positions) {
      cos = angles->cos.data() + static_cast<std::size_t>(whole) * half;
      sin = angles->sin.data() + static_cast<std::size_t>(whole) * half;
    }
    thread_local std::vector<float> own;  // [cos][sin][-sin]
    own.resize(3 * static_cast<std::size_t>(half));
    if (!cos) {
      for (int j = 0; j < half; ++j) rope_cos_sin_at(rope.inv_freq[j], position, rope, &own[static_cast<std::size_t>(j)], &own[static_cast<std::size_t>(half + j)]);
      cos = own.data();
      sin = own.data() + half;
    }
    if (direction < 0) {
      for (int j = 0; j < half; ++j) own[static_cast<std::size_t>(2 * half + j)] = -sin[j];
      sin = own.data() + 2 * half;
    }
    rope_rotate_row(tmp, row, cos, sin, half, rope.layout, direction);
  }
  void unrotate_query(int b, int t, int h, float* row, float* tmp) const { rotate(*q, p->q_positions, b, t, h, false, row, tmp, -1); }
  void unrotate_key(int b, int t, int h, float* row, float* tmp) const { rotate(*k, p->k_positions, b, t, h, true, row, tmp, -1); }

  bool visible(int b, std::int64_t query_index, std::int64_t j) const {
    const AttentionMask& m = p->mask;
    if (m.causal && j > query_index) return false;
    if (m.key_padding && !m.key_padding[std::int64_t{b} * T + j]) return false;
    if (m.sliding_window > 0 && query_index - j >= m.sliding_window) return false;
    if (m.chunk > 0 && j / m.chunk != query_index / m.chunk) return false;
    return true;
  }

  // Whether the scheme adds a position term to the scores (add_bias_tile).
  bool has_bias() const {
    const AttentionPositions x = p->positions;
    return x == AttentionPositions::kAlibi || x == AttentionPositions::kT5 || x == AttentionPositions::kDistanceTable ||
           x == AttentionPositions::kForgetGate;
  }
  // A distance table's column of (query position qpos, key position kpos), and FoX's c row of
  // (b, h): c[b][h][0 .. T).
  std::int64_t distance_column(std::int64_t qpos, std::int64_t kpos) const { return p->distance_table.column(qpos - kpos); }
  const float* gate_row(int b, int h) const { return p->gate_cumulative + (std::int64_t{b} * Hq + h) * T; }

  // The additive position term of (query i, key j) for query head h, for the references: the
  // float terms as the kernel adds them, FoX's difference in double.
  double bias(int b, int h, int i, int j) const {
    if (p->positions == AttentionPositions::kAlibi) {
      const double d = static_cast<double>(p->q_positions.at(0, b, i, S) - p->k_positions.at(0, b, j, T));
      return static_cast<float>(-p->alibi_slopes[h] * (p->alibi_mode == AlibiMode::kSymmetric ? std::abs(d) : d));
    }
    if (p->positions == AttentionPositions::kT5) {
      const int bucket = t5_bucket(p->k_positions.at(0, b, j, T) - p->q_positions.at(0, b, i, S), p->t5);
      return p->t5_table[std::int64_t{bucket} * Hq + h];
    }
    if (p->positions == AttentionPositions::kDistanceTable)
      return p->distance_table.values[h * p->distance_table.width() +
                                      distance_column(p->q_positions.at(0, b, i, S), p->k_positions.at(0, b, j, T))];
    if (p->positions == AttentionPositions::kForgetGate) return static_cast<double>(gate_row(b, h)[past + i]) - gate_row(b, h)[j];
    return 0.0;
  }

  // Adds the position term to S[r][c] (row stride ld) for queries i0 .. i0+rows-1 and keys
  // j0 .. j0+cols-1: ALiBi as a row of key positions per query, T5 by for_each_t5_bucket. pos:
  // scratch of rows + cols int64; lut: scratch, grows as needed.
  void add_bias_tile(int b, int h, int i0, int rows, std::int64_t j0, int cols, float* S, int ld, std::int64_t* pos,
                     std::vector<int>& lut) const {
    if (p->positions == AttentionPositions::kForgetGate) {  // c_i - c_j: by key index, no positions
      const float* c = gate_row(b, h);
      const float* ck = c + j0;
      for (int r = 0; r < rows; ++r) {
        const float ci = c[past + i0 + r];
        float* srow = S + r * ld;
        for (int x = 0; x < cols; ++x) srow[x] += ci - ck[x];
      }
      return;
    }
    tile_positions(b, i0, rows, j0, cols, pos);
    const std::int64_t* qp = pos;
    const std::int64_t* kp = pos + rows;
    if (p->positions == AttentionPositions::kAlibi) {
      const float slope = static_cast<float>(p->alibi_slopes[h]);
      const bool symmetric = p->alibi_mode == AlibiMode::kSymmetric;
      // Keys at consecutive positions (the usual tile) and every |distance| below 2^24: then
      // float(qp - kp[c]) is float(qp - kp[0]) - c exactly (integers below 2^24 are exact
      // floats), float arithmetic that vectorizes, where the int64 -> float conversion per
      // element does not (x86 has no vector form before AVX-512DQ, and this code is also built
      // for the baseline). The same bits either way.
      if (rows == 0 || cols == 0) return;
      const auto [qmin, qmax] = std::minmax_element(qp, qp + rows);
      const bool consecutive = kp[cols - 1] - kp[0] == cols - 1 &&
                               std::adjacent_find(kp, kp + cols, [](std::int64_t a, std::int64_t b) { return b != a + 1; }) == kp + cols;
      constexpr std::int64_t kExact = std::int64_t{1} << 24;
      if (consecutive && *qmax - kp[0] < kExact && kp[cols - 1] - *qmin < kExact) {
        for (int r = 0; r < rows; ++r) {
          const float base = static_cast<float>(qp[r] - kp[0]);
          float* srow = S + r * ld;
          for (int c = 0; c < cols; ++c) {
            const float d = base - static_cast<float>(c);
            srow[c] -= slope * (symmetric ? std::abs(d) : d);
          }
        }
        return;
      }
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
          const float d = static_cast<float>(qp[r] - kp[c]);
          S[r * ld + c] -= slope * (symmetric ? std::abs(d) : d);
        }
      return;
    }
    if (p->positions == AttentionPositions::kDistanceTable) {
      // One table row per head; distances of a tile are a band, each looked up, no S x T table.
      const DistanceTable& table = p->distance_table;
      const float* row = table.values + h * table.width();
      const std::int64_t shift = table.side == DistanceSide::kSigned ? table.length - 1 : 0;
      // A signed table, or a tile whose every Delta is >= 0 (the least query position at or after
      // the largest key position): column = Delta + shift, without an abs per element.
      if (table.side == DistanceSide::kSigned || *std::min_element(qp, qp + rows) >= *std::max_element(kp, kp + cols)) {
        for (int r = 0; r < rows; ++r) {
          const float* at = row + qp[r] + shift;
          float* srow = S + r * ld;
          for (int c = 0; c < cols; ++c) srow[c] += at[-kp[c]];
        }
        return;
      }
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) S[r * ld + c] += row[std::llabs(qp[r] - kp[c])];
      return;
    }
    if (p->positions != AttentionPositions::kT5) return;
    for_each_t5_bucket(qp, rows, kp, cols, lut, [&](int r, int c, int bucket) { S[r * ld + c] += p->t5_table[std::int64_t{bucket} * Hq + h]; });
  }

  // Calls f(r, c, bucket) with T5's bucket of (query positions qp[r], key positions kp[c]) for
  // every r < rows, c < cols: through a table of the tile's distinct distances (rows + cols of
  // them, not rows x cols bucket logs), or per element for scattered explicit ids. lut: scratch.
  template <class F>
  void for_each_t5_bucket(const std::int64_t* qp, int rows, const std::int64_t* kp, int cols, std::vector<int>& lut, F&& f) const {
    const auto [kmin, kmax] = std::minmax_element(kp, kp + cols);
    const auto [qmin, qmax] = std::minmax_element(qp, qp + rows);
    const std::int64_t lo = *kmin - *qmax, span = *kmax - *qmin - lo + 1;
    if (span > 8 * static_cast<std::int64_t>(rows + cols)) {
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) f(r, c, t5_bucket(kp[c] - qp[r], p->t5));
      return;
    }
    lut.resize(static_cast<std::size_t>(span));
    for (std::int64_t d = 0; d < span; ++d) lut[static_cast<std::size_t>(d)] = t5_bucket(lo + d, p->t5);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) f(r, c, lut[static_cast<std::size_t>(kp[c] - qp[r] - lo)]);
  }

  // Query and key positions of a tile into pos[0 .. rows) and pos[rows .. rows + cols).
  void tile_positions(int b, int i0, int rows, std::int64_t j0, int cols, std::int64_t* pos) const {
    for (int r = 0; r < rows; ++r) pos[r] = p->q_positions.at(0, b, i0 + r, S);
    for (int c = 0; c < cols; ++c) pos[rows + c] = p->k_positions.at(0, b, static_cast<int>(j0 + c), T);
  }

  // Sets S[r][c] (row stride kKeyTile) to -inf where query i0 + r cannot see key j0 + c, and in
  // the padding columns [cols, kKeyTile), for r < rows. A tile whose four corners are visible
  // and that has no key padding is wholly visible (every mask is a band in (query, key)), so
  // it needs no per-element test.
  void mask_tile(int b, int i0, int rows, std::int64_t j0, int cols, float* Sc) const {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const std::int64_t first = past + i0, last = past + i0 + rows - 1;
    const bool all_visible = !p->mask.key_padding && visible(b, first, j0 + cols - 1) && visible(b, last, j0) &&
                             visible(b, first, j0) && visible(b, last, j0 + cols - 1);
    for (int r = 0; r < rows; ++r) {
      float* srow = Sc + r * kKeyTile;
      std::fill(srow + cols, srow + kKeyTile, neg_inf);
      for (int c = 0; !all_visible && c < cols; ++c)
        if (!visible(b, past + i0 + r, j0 + c)) srow[c] = neg_inf;
    }
  }

  // Keys [lo, hi) that any query of [i0, i1) can see, from the masks' geometry alone.
  void key_range(int i0, int i1, std::int64_t* lo, std::int64_t* hi) const {
    const AttentionMask& m = p->mask;
    const std::int64_t first = past + i0, last = past + i1 - 1;
    *lo = 0;
    *hi = T;
    if (m.causal) *hi = std::min<std::int64_t>(*hi, last + 1);
    if (m.sliding_window > 0) *lo = std::max<std::int64_t>(*lo, first - m.sliding_window + 1);
    if (m.chunk > 0) {
      *lo = std::max<std::int64_t>(*lo, first / m.chunk * m.chunk);
      *hi = std::min<std::int64_t>(*hi, (last / m.chunk + 1) * m.chunk);
    }
    *hi = std::max(*hi, *lo);
  }
};

// The largest position id of q's and k's rows on any axis (0 for none).
std::int64_t largest_position(const RopeTensor& q, const RopeTensor& k, const AttentionParams& params);
// The largest position RoPE's table must hold: largest_position, or a Self-Extend / ReRoPE far
// query position beyond it.
std::int64_t table_position(const RopeTensor& q, const RopeTensor& k, const AttentionParams& params);
// Whether attention without a table builds one for the call: the positions span at most twice
// the call's tokens plus 4096 (a table then costs about what rotating every row would).
bool builds_own_table(const RopeTensor& q, const RopeTensor& k, std::int64_t largest);

// Validates and fills the plan (q, k, v, out, params and table must outlive it). table: the
// caller's (KernelOptions::table), or nullptr (one built for the call, or cos/sin per row).
Plan make_plan(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
               const AttentionParams& params, const RopeTable* table);

}  // namespace posenc::attention_detail
