#include "posenc/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "posenc/error.h"
#include "posenc/half.h"
#include "posenc/rope_kernels.h"

namespace posenc {
namespace {

// Tile sizes: a query tile and a key tile of D <= 256 floats each stay in L1/L2 together with
// the tile of scores (32 x 64 floats = 8 KiB).
constexpr int kQueryTile = 32, kKeyTile = 64;

std::int64_t offset_of(const RopeTensor& x, int b, int t, int h) {
  return b * x.batch_stride + t * x.token_stride + h * x.head_stride;
}

void load_row(const RopeTensor& x, int b, int t, int h, float* out) {
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

void store_row(const RopeTensor& x, int b, int t, int h, const float* in) {
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

// Everything one call shares: shapes, the masks' geometry and the position terms.
struct Plan {
  const RopeTensor *q, *k, *v, *out;
  const AttentionParams* p;
  int S, T, Hq, group, D;
  std::int64_t past;
  float scale;

  // Row of q or k, rotated when the scheme is RoPE, into out[D] (tmp: D floats).
  void load_rotated(const RopeTensor& x, const PositionIds& ids, int b, int t, int h, float* out, float* tmp) const {
    load_row(x, b, t, h, out);
    if (p->positions != AttentionPositions::kRope) return;
    const int rotary = 2 * p->rope.num_freqs;
    std::copy_n(out, rotary, tmp);
    rope_row_reference(tmp, out, ids, b, t, x.tokens, p->rope);
  }

  bool visible(int b, std::int64_t query_index, std::int64_t j) const {
    const AttentionMask& m = p->mask;
    if (m.causal && j > query_index) return false;
    if (m.key_padding && !m.key_padding[std::int64_t{b} * T + j]) return false;
    if (m.sliding_window > 0 && query_index - j >= m.sliding_window) return false;
    if (m.chunk > 0 && j / m.chunk != query_index / m.chunk) return false;
    return true;
  }

  // The additive position term of (query i, key j) for query head h.
  float bias(int b, int h, int i, int j) const {
    if (p->positions == AttentionPositions::kAlibi) {
      const double d = static_cast<double>(p->q_positions.at(0, b, i, S) - p->k_positions.at(0, b, j, T));
      return static_cast<float>(-p->alibi_slopes[h] * (p->alibi_mode == AlibiMode::kSymmetric ? std::abs(d) : d));
    }
    if (p->positions == AttentionPositions::kT5) {
      const int bucket = t5_bucket(p->k_positions.at(0, b, j, T) - p->q_positions.at(0, b, i, S), p->t5);
      return p->t5_table[std::int64_t{bucket} * Hq + h];
    }
    return 0.0f;
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

Plan make_plan(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out, const AttentionParams& p) {
  validate_attention(q, k, v, out, p);
  Plan plan{&q, &k, &v, &out, &p, q.tokens, k.tokens, q.heads, q.heads / k.heads, q.head_dim,
            p.mask.past >= 0 ? p.mask.past : std::int64_t{k.tokens} - q.tokens,
            static_cast<float>(p.scale > 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(q.head_dim)))};
  return plan;
}

void check_view(const RopeTensor& x, const char* name) {
  if (!x.data || x.batch < 0 || x.tokens < 0 || x.heads < 1 || x.head_dim < 1)
    throw Error(std::string("attention: ") + name + " needs data, batch and tokens >= 0, heads and head_dim >= 1");
}

}  // namespace

void validate_attention(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
                        const AttentionParams& p) {
  check_view(q, "q");
  check_view(k, "k");
  check_view(v, "v");
  check_view(out, "out");
  const auto dims = [](const RopeTensor& x) {
    return std::to_string(x.batch) + "x" + std::to_string(x.tokens) + "x" + std::to_string(x.heads) + "x" +
           std::to_string(x.head_dim);
  };
  if (k.batch != q.batch || k.head_dim != q.head_dim || v.batch != k.batch || v.tokens != k.tokens ||
      v.heads != k.heads || v.head_dim != k.head_dim)
    throw Error("attention: q [B,S,Hq,D] = " + dims(q) + ", k " + dims(k) + " and v " + dims(v) +
                " must share B and D, and k and v their whole shape");
  if (out.batch != q.batch || out.tokens != q.tokens || out.heads != q.heads || out.head_dim != q.head_dim)
    throw Error("attention: out " + dims(out) + " must have q's shape " + dims(q));
  if (q.heads % k.heads != 0)
    throw Error("attention: query heads " + std::to_string(q.heads) + " must be a multiple of kv heads " +
                std::to_string(k.heads));
  const AttentionMask& m = p.mask;
  if (!(p.scale >= 0) || !std::isfinite(p.scale)) throw Error("attention: scale must be finite and >= 0, got " + format_number(p.scale));
  if (m.past < -1 || m.past > kMaxPosition) throw Error("attention: past must be -1 (T - S) or in [0, 2^31-1], got " + std::to_string(m.past));
  if (m.past < 0 && k.tokens < q.tokens)
    throw Error("attention: with past = T - S, T (" + std::to_string(k.tokens) + ") must be >= S (" + std::to_string(q.tokens) + ")");
  if (m.sliding_window < 0 || m.chunk < 0)
    throw Error("attention: sliding_window and chunk must be >= 0 (0: none)");
  switch (p.positions) {
    case AttentionPositions::kNone: break;
    case AttentionPositions::kRope:
      if (p.rope.direction != 1) throw Error("attention: RoPE direction must be +1");
      validate(q, p.q_positions, p.rope);
      validate(k, p.k_positions, p.rope);
      break;
    case AttentionPositions::kAlibi:
      if (!p.alibi_slopes) throw Error("attention: ALiBi needs one slope per query head");
      break;
    case AttentionPositions::kT5:
      if (!p.t5_table) throw Error("attention: T5 needs its bias table [num_buckets][Hq]");
      validate(p.t5);
      break;
  }
  if (p.positions == AttentionPositions::kAlibi || p.positions == AttentionPositions::kT5)
    for (const auto& [x, ids, name] : {std::tuple{&q, &p.q_positions, "query"}, std::tuple{&k, &p.k_positions, "key"}}) {
      if (ids->axes != 1) throw Error(std::string("attention: ") + name + " positions for a bias have one axis");
      for (int b = 0; b < x->batch; ++b)
        for (int t = 0; t < x->tokens; ++t) {
          const std::int64_t v = ids->at(0, b, t, x->tokens);
          if (v < 0 || v > kMaxPosition)
            throw Error(std::string("attention: ") + name + " position " + std::to_string(v) + " must be in [0, 2^31-1]");
        }
    }
}

void attention_reference(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
                         const AttentionParams& params) {
  const Plan plan = make_plan(q, k, v, out, params);
  const int D = plan.D;
  std::vector<float> qr(D), kr(D), vr(D), tmp(D), o(D);
  std::vector<double> scores(static_cast<std::size_t>(plan.T)), acc(D);
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < plan.Hq; ++h)
      for (int i = 0; i < plan.S; ++i) {
        plan.load_rotated(q, params.q_positions, b, i, h, qr.data(), tmp.data());
        double best = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < plan.T; ++j) {
          scores[j] = -std::numeric_limits<double>::infinity();
          if (!plan.visible(b, plan.past + i, j)) continue;
          plan.load_rotated(k, params.k_positions, b, j, h / plan.group, kr.data(), tmp.data());
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += static_cast<double>(qr[c]) * kr[c];
          scores[j] = dot * plan.scale + plan.bias(b, h, i, j);
          best = std::max(best, scores[j]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double total = 0;
        for (int j = 0; best > -std::numeric_limits<double>::infinity() && j < plan.T; ++j) {
          if (scores[j] == -std::numeric_limits<double>::infinity()) continue;
          const double w = std::exp(scores[j] - best);
          total += w;
          load_row(v, b, j, h / plan.group, vr.data());
          for (int c = 0; c < D; ++c) acc[c] += w * vr[c];
        }
        for (int c = 0; c < D; ++c) o[c] = total > 0 ? static_cast<float>(acc[c] / total) : 0.0f;
        store_row(out, b, i, h, o.data());
      }
}

std::int64_t attention_workspace_bytes(int head_dim, int threads) {
  // q tile, k tile, v tile and accumulators (tile x D each), scores, row max/sum, one row.
  const std::int64_t floats = std::int64_t{kQueryTile} * head_dim * 2 + std::int64_t{kKeyTile} * head_dim * 2 +
                              std::int64_t{kQueryTile} * kKeyTile + 2 * kQueryTile + head_dim;
  return floats * static_cast<std::int64_t>(sizeof(float)) * std::max(threads, 1);
}

void attention(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
               const AttentionParams& params, const AttentionOptions& options) {
  if (options.threads < 0 || options.threads > kMaxThreads)
    throw Error("attention: threads must be in [0, " + std::to_string(kMaxThreads) + "], got " + std::to_string(options.threads));
  const Plan plan = make_plan(q, k, v, out, params);
  const int D = plan.D, S = plan.S;
  const int query_tiles = (S + kQueryTile - 1) / kQueryTile;
  const std::int64_t tasks = std::int64_t{q.batch} * plan.Hq * query_tiles;
  const float neg_inf = -std::numeric_limits<float>::infinity();
#ifdef _OPENMP
#pragma omp parallel num_threads(options.threads > 0 ? options.threads : omp_get_max_threads())
#endif
  {
    std::vector<float> qt(static_cast<std::size_t>(kQueryTile) * D), kt(static_cast<std::size_t>(kKeyTile) * D),
        vt(static_cast<std::size_t>(kKeyTile) * D), acc(static_cast<std::size_t>(kQueryTile) * D),
        st(static_cast<std::size_t>(kQueryTile) * kKeyTile), row_max(kQueryTile), row_sum(kQueryTile), tmp(D);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t task = 0; task < tasks; ++task) {
      const int tile = static_cast<int>(task % query_tiles), h = static_cast<int>(task / query_tiles % plan.Hq);
      const int b = static_cast<int>(task / query_tiles / plan.Hq), hk = h / plan.group;
      const int i0 = tile * kQueryTile, rows = std::min(kQueryTile, S - i0);
      for (int r = 0; r < rows; ++r) {
        float* qrow = &qt[static_cast<std::size_t>(r) * D];
        plan.load_rotated(q, params.q_positions, b, i0 + r, h, qrow, tmp.data());
        for (int c = 0; c < D; ++c) qrow[c] *= plan.scale;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(row_max.begin(), row_max.end(), neg_inf);
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      std::int64_t lo, hi;
      plan.key_range(i0, i0 + rows, &lo, &hi);
      for (std::int64_t j0 = lo; j0 < hi; j0 += kKeyTile) {
        const int cols = static_cast<int>(std::min<std::int64_t>(kKeyTile, hi - j0));
        for (int c = 0; c < cols; ++c) {
          plan.load_rotated(k, params.k_positions, b, static_cast<int>(j0 + c), hk, &kt[static_cast<std::size_t>(c) * D], tmp.data());
          load_row(v, b, static_cast<int>(j0 + c), hk, &vt[static_cast<std::size_t>(c) * D]);
        }
        for (int r = 0; r < rows; ++r) {
          const float* qrow = &qt[static_cast<std::size_t>(r) * D];
          float* srow = &st[static_cast<std::size_t>(r) * kKeyTile];
          float tile_max = neg_inf;
          for (int c = 0; c < cols; ++c) {
            const std::int64_t j = j0 + c;
            if (!plan.visible(b, plan.past + i0 + r, j)) {
              srow[c] = neg_inf;
              continue;
            }
            const float* krow = &kt[static_cast<std::size_t>(c) * D];
            float dot = 0;
            for (int d = 0; d < D; ++d) dot += qrow[d] * krow[d];
            srow[c] = dot + plan.bias(b, h, i0 + r, static_cast<int>(j));
            tile_max = std::max(tile_max, srow[c]);
          }
          if (tile_max == neg_inf) continue;  // nothing visible in this tile for this row
          // Online softmax (Milakov & Gimelshein 2018; FlashAttention-2): rescale what was
          // accumulated under the old maximum.
          const float new_max = std::max(row_max[r], tile_max);
          const float correction = row_max[r] == neg_inf ? 0.0f : std::exp(row_max[r] - new_max);
          float* arow = &acc[static_cast<std::size_t>(r) * D];
          if (correction != 1.0f)
            for (int d = 0; d < D; ++d) arow[d] *= correction;
          float sum = 0;
          for (int c = 0; c < cols; ++c) {
            if (srow[c] == neg_inf) continue;
            const float w = std::exp(srow[c] - new_max);
            sum += w;
            const float* vrow = &vt[static_cast<std::size_t>(c) * D];
            for (int d = 0; d < D; ++d) arow[d] += w * vrow[d];
          }
          row_sum[r] = row_sum[r] * correction + sum;
          row_max[r] = new_max;
        }
      }
      for (int r = 0; r < rows; ++r) {
        float* arow = &acc[static_cast<std::size_t>(r) * D];
        const float inv = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;  // a row that saw no key: zeros
        for (int d = 0; d < D; ++d) arow[d] *= inv;
        store_row(out, b, i0 + r, h, arow);
      }
    }
  }
}

}  // namespace posenc
