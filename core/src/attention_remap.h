// A position remap's far branch as attention sees it, private to the core: the positions a
// query and a key are rotated at when their distance is w or more, and which branches a tile
// needs. Scalar helpers shared by the reference and every SIMD target (attention_plan.h).
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
  // Leaky ReRoPE's keys sit at real positions kpos / k: their cos/sin, [key row][num_freqs] each,
  // computed once per call (row b * T + j, or j when every batch row has the same positions), so
  // each query tile reads rows instead of computing num_freqs sincos per key. Null otherwise.
  struct KeyRows {
    bool per_batch_row = false;
    AlignedVector<float> cos, sin;
  };
  std::shared_ptr<const KeyRows> keys;

  bool on() const { return r.kind != PositionRemapKind::kNone; }
  // Far positions are integers (table rows) for Self-Extend and ReRoPE.
  bool integral() const { return r.kind == PositionRemapKind::kSelfExtend || r.kind == PositionRemapKind::kReRope; }
  bool far(std::int64_t qpos, std::int64_t kpos) const { return qpos - kpos >= r.window; }

  // The far branch's query and key positions: their difference is the remapped distance.
  double query(std::int64_t pos) const {
    switch (r.kind) {
      case PositionRemapKind::kSelfExtend: return static_cast<double>(pos / r.group + r.window - r.window / r.group);
      case PositionRemapKind::kReRope: return static_cast<double>(r.window);
      case PositionRemapKind::kLeakyReRope:
        return static_cast<double>(pos) / r.leak + (static_cast<double>(r.window) - static_cast<double>(r.window) / r.leak);
      case PositionRemapKind::kNone: break;
    }
    return static_cast<double>(pos);
  }
  double key(std::int64_t pos) const {
    switch (r.kind) {
      case PositionRemapKind::kSelfExtend: return static_cast<double>(pos / r.group);
      case PositionRemapKind::kReRope: return 0.0;
      case PositionRemapKind::kLeakyReRope: return static_cast<double>(pos) / r.leak;
      case PositionRemapKind::kNone: break;
    }
    return static_cast<double>(pos);
  }

  // Which scores a tile of query positions qp[rows] and key positions kp[cols] needs: the near
  // ones (some distance < w), the far ones (some >= w), or both.
  static constexpr int kNear = 1, kFar = 2, kBoth = 3;
  int branches(const std::int64_t* qp, int rows, const std::int64_t* kp, int cols) const {
    const auto [kmin, kmax] = std::minmax_element(kp, kp + cols);
    const auto [qmin, qmax] = std::minmax_element(qp, qp + rows);
    return (*qmin - *kmax < r.window ? kNear : 0) | (*qmax - *kmin >= r.window ? kFar : 0);
  }

  // S[r][c] = F[r][c] where (query r, key c) is far (row stride ld), for a tile that needs both.
  void merge(const std::int64_t* qp, int rows, const std::int64_t* kp, int cols, const float* F, float* S, int ld) const {
    for (int i = 0; i < rows; ++i)
      for (int c = 0; c < cols; ++c)
        if (far(qp[i], kp[c])) S[i * ld + c] = F[i * ld + c];
  }
};

}  // namespace posenc::attention_detail

namespace posenc::attention_detail {

// Checks params.remap (kind, w, G, k, RoPE with one axis, far positions within RoPE's accurate
// range); throws posenc::Error naming the value and what was expected. Called by
// validate_attention.
void validate_remap(const RopeTensor& q, const RopeTensor& k, const AttentionParams& params);

// Leaky ReRoPE's key rows for the call (Remap::keys); null for the other remaps.
std::shared_ptr<const Remap::KeyRows> remap_key_rows(const RopeTensor& k, const AttentionParams& params);

}  // namespace posenc::attention_detail
