#include "posenc/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_plan.h"
#include "posenc/error.h"
#include "posenc/half.h"

namespace posenc {
namespace attention_detail {

Plan make_plan(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out, const AttentionParams& p,
               const RopeTable* table) {
  validate_attention(q, k, v, out, p);
  Plan plan{&q, &k, &v, &out, &p, q.tokens, k.tokens, q.heads, q.heads / k.heads, q.head_dim,
            p.mask.past >= 0 ? p.mask.past : std::int64_t{k.tokens} - q.tokens,
            static_cast<float>(p.scale > 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(q.head_dim))), nullptr, {}, nullptr, 0};
  if (p.positions != AttentionPositions::kRope) return plan;
  if (table && !table->matches(p.rope))
    throw Error("attention: the RoPE table was built for other frequencies, attention factor or angle mode");
  plan.remap = {p.remap, remap_rows(k, p, false), remap_rows(q, p, true)};
  if (p.rope.xpos.enabled()) {
    static std::atomic<std::uint64_t> plans{0};
    plan.xpos = std::make_shared<const XPosScales>(p.rope.xpos, p.rope.num_freqs);
    plan.xpos_id = ++plans;
  }
  const std::int64_t largest = table_position(q, k, p);
  if (table)
    plan.angles = table->ensure(largest);
  else if (builds_own_table(q, k, largest))
    plan.angles = RopeTable(p.rope, largest + 1).ensure(largest);
  return plan;
}

std::int64_t largest_position(const RopeTensor& q, const RopeTensor& k, const AttentionParams& p) {
  std::int64_t largest = 0;
  for (const auto& [x, ids] : {std::pair{&q, &p.q_positions}, std::pair{&k, &p.k_positions}})
    for (int a = 0; a < ids->axes; ++a)
      for (int b = 0; b < (ids->same_for_every_batch_row() ? std::min(x->batch, 1) : x->batch); ++b)
        for (int t = 0; t < x->tokens; ++t) largest = std::max(largest, ids->at(a, b, t, x->tokens));
  return largest;
}

std::int64_t table_position(const RopeTensor& q, const RopeTensor& k, const AttentionParams& p) {
  const std::int64_t largest = largest_position(q, k, p);
  const Remap remap{p.remap, nullptr, nullptr};
  return remap.integral() ? std::max(largest, static_cast<std::int64_t>(remap.far_bound(largest))) : largest;
}

void Plan::scale_by_xpos(std::int64_t position, bool key, float* cos, float* sin) const {
  struct Cache {  // one thread's last block of scales, kept while the thread works for this plan
    std::uint64_t plan = 0;
    XPosScales::Block block;
    std::vector<float> query, key;
  };
  thread_local Cache cache;
  const std::size_t half = static_cast<std::size_t>(p->rope.num_freqs);
  if (cache.plan != xpos_id) cache = Cache{xpos_id, {}, std::vector<float>(half), std::vector<float>(half)};
  xpos->at(position, cache.query.data(), cache.key.data(), cache.block);
  const std::vector<float>& scale = key ? cache.key : cache.query;
  for (std::size_t j = 0; j < half; ++j) {
    cos[j] *= scale[j];
    sin[j] *= scale[j];
  }
}

bool builds_own_table(const RopeTensor& q, const RopeTensor& k, std::int64_t largest) {
  return largest <= 2 * (std::int64_t{q.tokens} + k.tokens) + 4096;
}

}  // namespace attention_detail

namespace {

using namespace attention_detail;

void check_view(const RopeTensor& x, const char* name) {
  if (!x.data || x.batch < 0 || x.tokens < 0 || x.heads < 1 || x.head_dim < 1)
    throw Error(std::string("attention: ") + name + " needs data, batch and tokens >= 0, heads and head_dim >= 1");
}

// FoX: c [B][Hq][T] present and finite, and each query's own key index past + i inside it.
void check_gate(const RopeTensor& q, const RopeTensor& k, const AttentionParams& p) {
  if (!p.gate_cumulative) throw Error("attention: forget-gate needs c, the cumulative log gate [B][Hq][T] (gate_cumulative)");
  const std::int64_t past = p.mask.past >= 0 ? p.mask.past : std::int64_t{k.tokens} - q.tokens;
  if (past + q.tokens > k.tokens)
    throw Error("attention: forget-gate reads query i's c at key index past + i; past (" + std::to_string(past) + ") + S (" +
                std::to_string(q.tokens) + ") must be <= T (" + std::to_string(k.tokens) + ")");
  const std::int64_t n = std::int64_t{q.batch} * q.heads * k.tokens;
  for (std::int64_t x = 0; x < n; ++x)
    if (!std::isfinite(p.gate_cumulative[x]))
      throw Error("attention: forget-gate c [" + std::to_string(x / k.tokens / q.heads) + "][" + std::to_string(x / k.tokens % q.heads) + "][" +
                  std::to_string(x % k.tokens) + "] is " + format_number(p.gate_cumulative[x]) + "; expected a finite number");
}

// Every (query, key) pair of the call, masked or not (the kernel reads whole tiles), within the
// distance table: |qpos - kpos| <= length - 1, per batch row from the positions' extremes.
void check_table_covers(const RopeTensor& q, const RopeTensor& k, const AttentionParams& p) {
  if (q.tokens == 0 || k.tokens == 0) return;
  const auto extremes = [](const RopeTensor& x, const PositionIds& ids, int b) {
    std::int64_t lo = ids.at(0, b, 0, x.tokens), hi = lo;
    for (int t = 1; t < x.tokens; ++t) {
      lo = std::min(lo, ids.at(0, b, t, x.tokens));
      hi = std::max(hi, ids.at(0, b, t, x.tokens));
    }
    return std::pair{lo, hi};
  };
  for (int b = 0; b < (p.q_positions.same_for_every_batch_row() && p.k_positions.same_for_every_batch_row() ? std::min(q.batch, 1) : q.batch); ++b) {
    const auto [qlo, qhi] = extremes(q, p.q_positions, b);
    const auto [klo, khi] = extremes(k, p.k_positions, b);
    const std::int64_t need = std::max(qhi - klo, khi - qlo);
    if (need > p.distance_table.length - 1)
      throw Error("attention: distance table length " + std::to_string(p.distance_table.length) + " covers |qpos - kpos| <= " +
                  std::to_string(p.distance_table.length - 1) + ", but batch row " + std::to_string(b) + " has positions " +
                  std::to_string(need) + " apart (queries " + std::to_string(qlo) + ".." + std::to_string(qhi) + ", keys " +
                  std::to_string(klo) + ".." + std::to_string(khi) + "); expected length >= " + std::to_string(need + 1));
  }
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
      // A remap's far rows rotate every head's first pairs, unscaled: refused rather than ignored.
      if (p.remap.kind != PositionRemapKind::kNone &&
          (p.rope.xpos.enabled() || p.rope.channel_offset != 0 || p.rope.rotated_heads != 0))
        throw Error("attention: a distance remap takes plain RoPE (xpos scale_base " + format_number(p.rope.xpos.scale_base) +
                    ", channel_offset " + std::to_string(p.rope.channel_offset) + ", rotated_heads " +
                    std::to_string(p.rope.rotated_heads) + " given)");
      if (p.rope.rotated_heads % (q.heads / k.heads) != 0)
        throw Error("attention: rotated_heads " + std::to_string(p.rope.rotated_heads) + " must be a multiple of the " +
                    std::to_string(q.heads / k.heads) + " query heads that share a kv head, so that each kv head's "
                    "query heads all rotate or none does");
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
    case AttentionPositions::kDistanceTable: validate(p.distance_table, q.heads, "attention: distance table"); break;
    case AttentionPositions::kForgetGate: check_gate(q, k, p); break;
  }
  validate_remap(q, k, p);
  if (p.positions == AttentionPositions::kAlibi || p.positions == AttentionPositions::kT5 ||
      p.positions == AttentionPositions::kDistanceTable)
    for (const auto& [x, ids, name] : {std::tuple{&q, &p.q_positions, "query"}, std::tuple{&k, &p.k_positions, "key"}}) {
      if (ids->axes != 1) throw Error(std::string("attention: ") + name + " positions for a bias have one axis");
      for (int b = 0; b < x->batch; ++b)
        for (int t = 0; t < x->tokens; ++t) {
          const std::int64_t v = ids->at(0, b, t, x->tokens);
          if (v < 0 || v > kMaxPosition)
            throw Error(std::string("attention: ") + name + " position " + std::to_string(v) + " must be in [0, 2^31-1]");
        }
    }
  if (p.positions == AttentionPositions::kDistanceTable) check_table_covers(q, k, p);
}

void attention_reference(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
                         const AttentionParams& params, const AttentionOptions& options) {
  const Plan plan = make_plan(q, k, v, out, params, options.table);
  const int D = plan.D;
  std::vector<float> qr(D), qf(D), qf2(D), kr(D), vr(D), tmp(D), o(D);
  std::vector<double> scores(static_cast<std::size_t>(plan.T)), acc(D);
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < plan.Hq; ++h)
      for (int i = 0; i < plan.S; ++i) {
        plan.load_query(b, i, h, qr.data(), tmp.data());
        if (plan.remap.on()) plan.load_query_far(b, i, h, qf.data(), tmp.data(), Remap::kFar);
        if (plan.remap.far_queries() > 1) plan.load_query_far(b, i, h, qf2.data(), tmp.data(), Remap::kFar2);
        double best = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < plan.T; ++j) {
          scores[j] = -std::numeric_limits<double>::infinity();
          if (!plan.visible(b, plan.past + i, j)) continue;
          // A remap's far pairs: both rows rotated at their far positions (attention_remap.h).
          const int branch = plan.remap.on() ? plan.remap.branch(params.q_positions.at(0, b, i, plan.S), params.k_positions.at(0, b, j, plan.T))
                                             : Remap::kNear;
          if (branch != Remap::kNear)
            plan.load_key_far(b, j, h / plan.group, kr.data(), tmp.data());
          else
            plan.load_key(b, j, h / plan.group, kr.data(), tmp.data());
          const std::vector<float>& qrow = branch == Remap::kNear ? qr : branch == Remap::kFar ? qf : qf2;
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += static_cast<double>(qrow[c]) * kr[c];
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
        if (options.lse)
          options.lse[(std::int64_t{b} * plan.Hq + h) * plan.S + i] =
              total > 0 ? static_cast<float>(best + std::log(total)) : -std::numeric_limits<float>::infinity();
      }
}

}  // namespace posenc
