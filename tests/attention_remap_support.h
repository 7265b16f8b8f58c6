// What the remap tests share (attention_remap_test.cc, attention_remap_backward_test.cc): the
// remapped distance from the papers' formulas, and attention in double that rotates each
// (query, key) pair by that distance explicitly (no factorisation into query and key positions),
// forward and its analytic backward.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope_schedule.h"

#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc::attention_test {

// Dual Chunk Attention's distance as vLLM's dual_chunk_rope.py and dual_chunk_flash_attn.py
// form it (An et al. 2024): chunk length c = chunk_size - local_size; keys rotated at j mod c;
// the query at i mod c against its own chunk (q_t, k_t), at qc_t = min(i mod c + c, chunk_size)
// against the chunk before (q_succ), at qc_t[c - 1] against every earlier one (q_inter). A key
// in a later chunk (no causal mask) keeps its plain distance.
inline double dual_chunk_distance(const PositionRemap& r, std::int64_t i, std::int64_t j) {
  const std::int64_t c = r.chunk_size - r.local_size, kc = j % c;
  if (j / c >= i / c) return static_cast<double>(j / c == i / c ? i % c - kc : i - j);
  if (j / c == i / c - 1) return static_cast<double>(std::min(i % c + c, r.chunk_size) - kc);
  return static_cast<double>(std::min(c - 1 + c, r.chunk_size) - kc);
}

// The remapped distance of (query position i, key position j), from the papers (not the core's
// factorised far positions): Self-Extend (Jin et al. 2024), ReRoPE and leaky ReRoPE (Su 2023), DCA.
inline double paper_distance(const PositionRemap& r, std::int64_t i, std::int64_t j) {
  const std::int64_t d = i - j;
  if (r.kind == PositionRemapKind::kDualChunk) return dual_chunk_distance(r, i, j);
  if (r.kind == PositionRemapKind::kNone || d < r.window) return static_cast<double>(d);
  switch (r.kind) {
    case PositionRemapKind::kSelfExtend: return static_cast<double>(i / r.group - j / r.group + (r.window - r.window / r.group));
    case PositionRemapKind::kReRope: return static_cast<double>(r.window);
    case PositionRemapKind::kLeakyReRope: return static_cast<double>(r.window) + static_cast<double>(d - r.window) / r.leak;
    case PositionRemapKind::kDualChunk:
    case PositionRemapKind::kNone: break;
  }
  return static_cast<double>(d);
}

// Attention in double at the remapped distances: out [B, S, Hq, D], and with dout the
// gradients dq [B, S, Hq, D], dk and dv [B, T, Hk, D] (dense, in that index order).
struct ExplicitAttention {
  std::vector<double> out, dq, dk, dv;
};

// softmax(scale * q.R(d_ij) k + mask) v in double, d_ij = paper_distance of the positions: per
// rotation pair (a, b) of frequency w, m^2 ((qa ka + qb kb) cos(d w) + (qa kb - qb ka) sin(d w))
// (m the attention factor), the channels past the rotary dim plain. With dout, its backward
// (dS_ij = P_ij (dout_i.v_j - sum_j' P_ij' dout_i.v_j'), the score's derivatives by q and k from
// the same expression).
inline ExplicitAttention explicit_attention(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const AttentionParams& p,
                                            const RopeTensor* dout = nullptr) {
  const int B = q.batch, S = q.tokens, T = k.tokens, H = q.heads, Hk = k.heads, D = q.head_dim, group = q.heads / k.heads;
  const int half = p.rope.num_freqs;
  const bool interleaved = p.rope.layout != RopeLayout::kHalfSplit;
  const std::int64_t past = p.mask.past >= 0 ? p.mask.past : T - S;
  const double scale = p.scale > 0 ? p.scale : 1 / std::sqrt(static_cast<double>(D)), m2 = p.rope.attention_factor * p.rope.attention_factor;
  std::map<double, std::vector<double>> angles;  // distance -> cos[half], sin[half]
  const auto cos_sin = [&](double d) -> const std::vector<double>& {
    auto [it, fresh] = angles.try_emplace(d);
    if (fresh)
      for (int f = 0; f < 2 * half; ++f) {
        const double a = d * static_cast<double>(p.rope.inv_freq[f % half]);
        it->second.push_back(f < half ? std::cos(a) : std::sin(a));
      }
    return it->second;
  };
  const auto pair_of = [&](int f, int* ia, int* ib) { *ia = interleaved ? 2 * f : f, *ib = interleaved ? 2 * f + 1 : f + half; };
  const auto q_at = [&](int b, int i, int h) { return ((static_cast<std::size_t>(b) * S + i) * H + h) * D; };
  const auto k_at = [&](int b, int j, int hk) { return ((static_cast<std::size_t>(b) * T + j) * Hk + hk) * D; };
  ExplicitAttention r;
  r.out.assign(static_cast<std::size_t>(B) * S * H * D, 0.0);
  if (dout) {
    r.dq.assign(r.out.size(), 0.0);
    r.dk.assign(static_cast<std::size_t>(B) * T * Hk * D, 0.0);
    r.dv.assign(r.dk.size(), 0.0);
  }
  std::vector<double> s(static_cast<std::size_t>(T)), P(s.size()), dP(s.size());
  std::vector<const std::vector<double>*> rot(s.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < S; ++i) {
        const std::int64_t pos = past + i, qpos = p.q_positions.at(0, b, i, S);
        std::fill(s.begin(), s.end(), -std::numeric_limits<double>::infinity());
        double best = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < T; ++j) {
          bool ok = !(p.mask.causal && j > pos);
          ok = ok && !(p.mask.key_padding && !p.mask.key_padding[b * T + j]);
          ok = ok && !(p.mask.sliding_window > 0 && pos - j >= p.mask.sliding_window);
          ok = ok && !(p.mask.chunk > 0 && j / p.mask.chunk != pos / p.mask.chunk);
          if (!ok) continue;
          const std::vector<double>& cs = cos_sin(paper_distance(p.remap, qpos, p.k_positions.at(0, b, j, T)));
          rot[j] = &cs;
          double dot = 0;
          for (int f = 0; f < half; ++f) {
            int ia, ib;
            pair_of(f, &ia, &ib);
            const double qa = at(q, b, i, h, ia), qb = at(q, b, i, h, ib);
            const double ka = at(k, b, j, h / group, ia), kb = at(k, b, j, h / group, ib);
            dot += m2 * ((qa * ka + qb * kb) * cs[f] + (qa * kb - qb * ka) * cs[half + f]);
          }
          for (int c = 2 * half; c < D; ++c) dot += double{at(q, b, i, h, c)} * at(k, b, j, h / group, c);
          s[j] = dot * scale;
          best = std::max(best, s[j]);
        }
        double total = 0;
        for (int j = 0; j < T; ++j) total += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - best);
        if (!(total > 0)) continue;
        double Di = 0;
        for (int j = 0; j < T; ++j) {
          P[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - best) / total;
          dP[j] = 0;
          for (int c = 0; c < D; ++c) {
            r.out[q_at(b, i, h) + c] += P[j] * at(v, b, j, h / group, c);
            if (dout) dP[j] += double{at(*dout, b, i, h, c)} * at(v, b, j, h / group, c);
          }
          Di += P[j] * dP[j];
        }
        for (int j = 0; dout && j < T; ++j) {
          if (P[j] == 0) continue;
          const double dS = P[j] * (dP[j] - Di) * scale;
          const std::vector<double>& cs = *rot[j];
          double* dq = &r.dq[q_at(b, i, h)];
          double* dk = &r.dk[k_at(b, j, h / group)];
          for (int f = 0; f < half; ++f) {
            int ia, ib;
            pair_of(f, &ia, &ib);
            const double qa = at(q, b, i, h, ia), qb = at(q, b, i, h, ib);
            const double ka = at(k, b, j, h / group, ia), kb = at(k, b, j, h / group, ib);
            const double c = cs[f] * m2, sn = cs[half + f] * m2;
            dq[ia] += dS * (ka * c + kb * sn);
            dq[ib] += dS * (kb * c - ka * sn);
            dk[ia] += dS * (qa * c - qb * sn);
            dk[ib] += dS * (qb * c + qa * sn);
          }
          for (int c = 2 * half; c < D; ++c) {
            dq[c] += dS * at(k, b, j, h / group, c);
            dk[c] += dS * at(q, b, i, h, c);
          }
          for (int c = 0; c < D; ++c) r.dv[k_at(b, j, h / group) + c] += P[j] * at(*dout, b, i, h, c);
        }
      }
  return r;
}

// max |ref - o| over the elements of o ([B, tokens, heads, D], ref dense in that order).
inline double worst_vs(const std::vector<double>& ref, const RopeTensor& o) {
  double worst = 0;
  for (int b = 0; b < o.batch; ++b)
    for (int i = 0; i < o.tokens; ++i)
      for (int h = 0; h < o.heads; ++h)
        for (int c = 0; c < o.head_dim; ++c) {
          const double e = std::abs(ref[((static_cast<std::size_t>(b) * o.tokens + i) * o.heads + h) * o.head_dim + c] - at(o, b, i, h, c));
          worst = std::isnan(e) ? INFINITY : std::max(worst, e);
        }
  return worst;
}

inline PositionRemap remap_of(PositionRemapKind kind, std::int64_t window, std::int64_t group = 1, double leak = 0) {
  PositionRemap r;
  r.kind = kind;
  r.window = window;
  r.group = group;
  r.leak = leak;
  return r;
}

inline PositionRemap dual_chunk(std::int64_t chunk_size, std::int64_t local_size) {
  PositionRemap r;
  r.kind = PositionRemapKind::kDualChunk;
  r.chunk_size = chunk_size;
  r.local_size = local_size;
  return r;
}

// DCA: c = 32 with the successive query clamped at chunk_size 48 (inter query 48); c = 10 with
// local_size beyond c (never clamped; inter query 2c - 1 = 19).
inline const PositionRemap kRemaps[] = {remap_of(PositionRemapKind::kSelfExtend, 24, 4), remap_of(PositionRemapKind::kSelfExtend, 19, 3),
                                        remap_of(PositionRemapKind::kReRope, 32), remap_of(PositionRemapKind::kLeakyReRope, 16, 1, 5.5),
                                        dual_chunk(48, 16), dual_chunk(40, 30)};
constexpr int kRemapCount = sizeof(kRemaps) / sizeof(kRemaps[0]);

// YaRN over D (an attention factor) rotating 0.8 of its channels (the rest pass through).
inline RopeSchedule yarn_partial_schedule(int D) {
  RopeParams rp = testing::yarn_params(4.0, 64);
  rp.head_dim = D;
  rp.partial_rotary_factor = 0.8;
  return compute_schedule(rp);
}

// RoPE attention inputs: plain schedule over D (interleaved pairs when asked), positions 7 + index.
inline AttentionParams rope_params(const RopeSchedule& sched, BiasInputs& setup, int Hq, int B, int S, int T, std::mt19937& rng,
                                   RopeLayout layout = RopeLayout::kHalfSplit) {
  AttentionParams p = params_for(AttentionPositions::kRope, setup, Hq, B, T, rng);
  p.rope = rope_apply_params(sched, layout);
  p.q_positions.offset = 7 + T - S;
  p.k_positions.offset = 7;
  return p;
}

}  // namespace posenc::attention_test
