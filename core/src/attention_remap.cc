#include "attention_remap.h"

#include <cmath>
#include <string>

#include "attention_plan.h"
#include "posenc/error.h"

namespace posenc {

double remapped_distance(const PositionRemap& remap, std::int64_t query_position, std::int64_t key_position) {
  const attention_detail::Remap r{remap, nullptr, nullptr};
  const int branch = r.on() ? r.branch(query_position, key_position) : attention_detail::Remap::kNear;
  if (branch == attention_detail::Remap::kNear) return static_cast<double>(query_position - key_position);
  return r.query(query_position, branch) - r.key(key_position);
}

double remap_far_bound(const PositionRemap& remap, std::int64_t largest) {
  const attention_detail::Remap r{remap, nullptr, nullptr};
  return r.on() ? r.far_bound(largest) : static_cast<double>(largest);
}

void validate_remap_settings(const PositionRemap& r, const std::string& who) {
  switch (r.kind) {
    case PositionRemapKind::kNone: return;
    case PositionRemapKind::kSelfExtend:
    case PositionRemapKind::kReRope:
    case PositionRemapKind::kLeakyReRope:
    case PositionRemapKind::kDualChunk: break;
    default:
      throw Error(who + ": unknown remap kind " + std::to_string(static_cast<int>(r.kind)) +
                  "; expected none, self-extend, rerope, leaky-rerope or dual-chunk");
  }
  const std::string name = who + ": remap " + to_string(r.kind);
  if (r.window < 0 || r.window > kMaxPosition)
    throw Error(name + ": window w = " + std::to_string(r.window) + " must be in [0, 2^31-1]");
  if (r.kind == PositionRemapKind::kSelfExtend && (r.group < 1 || r.group > kMaxPosition))
    throw Error(name + ": group G = " + std::to_string(r.group) + " must be in [1, 2^31-1] (1: plain RoPE)");
  if (r.kind == PositionRemapKind::kLeakyReRope && !(r.leak > 0 && std::isfinite(r.leak)))
    throw Error(name + ": leak k = " + format_number(r.leak) + " must be > 0 and finite (1: plain RoPE)");
  if (r.kind == PositionRemapKind::kDualChunk) {
    if (r.local_size < 1 || r.local_size > kMaxPosition)
      throw Error(name + ": local_size = " + std::to_string(r.local_size) + " must be in [1, 2^31-1]");
    if (r.chunk_size <= r.local_size || r.chunk_size > kMaxPosition)
      throw Error(name + ": chunk_size = " + std::to_string(r.chunk_size) + " must be > local_size = " + std::to_string(r.local_size) +
                  " (the chunk length is chunk_size - local_size) and at most 2^31-1");
  }
}

namespace attention_detail {

void validate_remap(const RopeTensor& q, const RopeTensor& k, const AttentionParams& p) {
  const PositionRemap& r = p.remap;
  validate_remap_settings(r, "attention");
  if (r.kind == PositionRemapKind::kNone) return;
  const std::string name = std::string("attention: remap ") + to_string(r.kind);
  if (p.positions != AttentionPositions::kRope)
    throw Error(name + " remaps RoPE's distances; positions are '" + to_string(p.positions) + "', expected rope");
  if (p.rope.axis_of_freq) throw Error(name + " needs one position axis (M-RoPE's axes have no single distance)");
  // Far positions grow with the position (or are constant, or DCA's are below it): the largest
  // is far_bound's, and its angles must stay where cos/sin are accurate (validate, rope_apply.h).
  const std::int64_t largest = largest_position(q, k, p);
  const double far = remap_far_bound(r, largest);
  float widest = 0;
  for (int j = 0; j < p.rope.num_freqs; ++j) widest = std::max(widest, std::fabs(p.rope.inv_freq[j]));
  if (!(far <= static_cast<double>(kMaxPosition)) || !(far * widest <= kMaxRopeAngle))
    throw Error(name + ": the far query position " + format_number(far) + " (largest position " + std::to_string(largest) +
                ") must be at most 2^31-1 with angles at most 2^31 radians");
}

std::shared_ptr<const Remap::Rows> remap_rows(const RopeTensor& x, const AttentionParams& p, bool queries) {
  if (p.positions != AttentionPositions::kRope || p.remap.kind != PositionRemapKind::kLeakyReRope) return nullptr;
  const Remap remap{p.remap, nullptr, nullptr};
  const PositionIds& ids = queries ? p.q_positions : p.k_positions;
  auto rows = std::make_shared<Remap::Rows>();
  rows->per_batch_row = !ids.same_for_every_batch_row();
  const int batch = rows->per_batch_row ? x.batch : std::min(x.batch, 1), half = p.rope.num_freqs;
  rows->cos.resize(static_cast<std::size_t>(batch) * x.tokens * half);
  rows->sin.resize(rows->cos.size());
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < x.tokens; ++t) {
      const std::int64_t id = ids.at(0, b, t, x.tokens);
      const double position = queries ? remap.query(id) : remap.key(id);
      const std::size_t at = (static_cast<std::size_t>(b) * x.tokens + t) * half;
      for (int j = 0; j < half; ++j) rope_cos_sin_at(p.rope.inv_freq[j], position, p.rope, &rows->cos[at + j], &rows->sin[at + j]);
    }
  return rows;
}

}  // namespace attention_detail
}  // namespace posenc
