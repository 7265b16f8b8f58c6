// A position remap's far branches as attention sees them, private to the core: the positions a
// query and a key are rotated at when their distance is w or more (DCA: when the key is in an
// earlier chunk), and which branches a tile needs. Scalar helpers shared by the reference and every SIMD target (attention_plan.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include "posenc/aligned_vector.h"
#include "posenc/attention.h"

namespace posenc::attention_detail {

struct Remap {
  PositionRemap r;  // kind kNone: no remap
  // Leaky ReRoPE's far keys and queries sit at real positions (kpos / k, qpos / k + w - w / k):
  // their cos/sin, [row][num_freqs] each, computed once per call (row b * tokens + t, or t when
  // every batch row has the same positions), so a tile reads rows instead of computing num_freqs
  // sincos per row each time it loads (the backward reloads a query tile per key tile). Null
  // otherwise.
  struct Rows {
    bool per_batch_row = false;
    AlignedVector<float> cos, sin;
  };
  std::shared_ptr<const Rows> keys, queries;

  bool on() const { return r.kind != PositionRemapKind::kNone; }
  bool dual_chunk() const { return r.kind == PositionRemapKind::kDualChunk; }
  // Far positions are integers (table rows) for Self-Extend, ReRoPE and DCA.
  bool integral() const { return r.kind != PositionRemapKind::kLeakyReRope; }
  // DCA's chunk length c = chunk_size - local_size (validate_remap: >= 1).
  std::int64_t chunk() const { return r.chunk_size - r.local_size; }

  // A (query, key) pair's branch: near (the plain distance), far, or far2 (DCA alone: its
  // inter-chunk query; DCA's far is the successive chunk). Bits, so a tile's set is a mask.
  static constexpr int kNear = 1, kFar = 2, kFar2 = 4;
  int branch(std::int64_t qpos, std::int64_t kpos) const {
    if (!dual_chunk()) return qpos - kpos >= r.window ? kFar : kNear;
    const std::int64_t back = qpos / chunk() - kpos / chunk();  // chunks from the key's to the query's
    return back <= 0 ? kNear : back == 1 ? kFar : kFar2;
  }
  // How many far query rows a query has: 2 for DCA (successive, inter-chunk), else 1 (0: no remap).
  int far_queries() const { return !on() ? 0 : dual_chunk() ? 2 : 1; }

  // The far branches' query and key positions: their difference is the remapped distance.
  double query(std::int64_t pos, int branch = kFar) const {
    switch (r.kind) {
      case PositionRemapKind::kSelfExtend: return static_cast<double>(pos / r.group + r.window - r.window / r.group);
      case PositionRemapKind::kReRope: return static_cast<double>(r.window);
      case PositionRemapKind::kLeakyReRope:
        return static_cast<double>(pos) / r.leak + (static_cast<double>(r.window) - static_cast<double>(r.window) / r.leak);
      case PositionRemapKind::kDualChunk:  // vLLM's qc_t = min(pos mod c + c, chunk_size); inter: qc_t[c - 1]
        return static_cast<double>(std::min(branch == kFar2 ? 2 * chunk() - 1 : pos % chunk() + chunk(), r.chunk_size));
      case PositionRemapKind::kNone: break;
    }
    return static_cast<double>(pos);
  }
  double key(std::int64_t pos) const {
    switch (r.kind) {
      case PositionRemapKind::kSelfExtend: return static_cast<double>(pos / r.group);
      case PositionRemapKind::kReRope: return 0.0;
      case PositionRemapKind::kLeakyReRope: return static_cast<double>(pos) / r.leak;
      case PositionRemapKind::kDualChunk: return static_cast<double>(pos % chunk());
      case PositionRemapKind::kNone: break;
    }
    return static_cast<double>(pos);
  }
  // The largest far position (query or key) of positions up to `largest`: what RoPE's table and
  // its accurate range must cover. DCA's far pairs need qpos >= c, and then every far position
  // (at most min(qpos mod c + c, chunk_size), or below c) is at most qpos.
  double far_bound(std::int64_t largest) const {
    if (dual_chunk()) return static_cast<double>(std::min(largest, r.chunk_size));
    return std::max(query(largest), key(largest));
  }

  // Which branches a tile of query positions qp[rows] and key positions kp[cols] needs, from
  // the positions' extremes (a superset: merge decides per element).
  int branches(const std::int64_t* qp, int rows, const std::int64_t* kp, int cols) const {
    const auto [kmin, kmax] = std::minmax_element(kp, kp + cols);
    const auto [qmin, qmax] = std::minmax_element(qp, qp + rows);
    if (!dual_chunk()) return (*qmin - *kmax < r.window ? kNear : 0) | (*qmax - *kmin >= r.window ? kFar : 0);
    const std::int64_t least = *qmin / chunk() - *kmax / chunk(), most = *qmax / chunk() - *kmin / chunk();
    return (least <= 0 ? kNear : 0) | (least <= 1 && most >= 1 ? kFar : 0) | (most >= 2 ? kFar2 : 0);
  }

  // S[r][c] = F[r][c] where (query r, key c) is in branch `which` (row stride ld), for a tile
  // that needs more than one branch.
  void merge(int which, const std::int64_t* qp, int rows, const std::int64_t* kp, int cols, const float* F, float* S, int ld) const {
    for (int i = 0; i < rows; ++i)
      for (int c = 0; c < cols; ++c)
        if (branch(qp[i], kp[c]) == which) S[i * ld + c] = F[i * ld + c];
  }
};

}  // namespace posenc::attention_detail

namespace posenc::attention_detail {

// Checks params.remap (kind, w, G, k, RoPE with one axis, far positions within RoPE's accurate
// range); throws posenc::Error naming the value and what was expected. Called by
// validate_attention.
void validate_remap(const RopeTensor& q, const RopeTensor& k, const AttentionParams& params);

// Leaky ReRoPE's far rows for the call: of k at k_positions (Remap::keys) or, queries true, of q
// at q_positions (Remap::queries); null for the other remaps.
std::shared_ptr<const Remap::Rows> remap_rows(const RopeTensor& x, const AttentionParams& params, bool queries);

}  // namespace posenc::attention_detail
