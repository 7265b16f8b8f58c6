// Keys and values packed once per call, tile by tile, for the fused attention's forward and
// backward (attention_kernels-inl.h, attention_backward_kernels-inl.h): each key tile of each
// (batch row, kv head) already rotated (RoPE) and laid out as the tile products read it, one
// contiguous block per tile. Without it every query tile reloaded, rotated and transposed each
// key tile it reads from strided memory ([B, T, Hk, D] rows 2 KB apart at 8 heads): a quarter of
// the forward's time (perf, S 2048, 8 heads, D 64, Intel Xeon, AVX3), repeated S / kQueryTile
// times per head. Packing reads K and V once.
//
//   kt      [B][Hk][tiles][D][kKeyTile]  rotated keys, transposed (ScoreTile's Kt)
//   k_rows  [B][Hk][tiles][kKeyTile][D]  rotated keys as rows (the backward's dQ += dS K)
//   v_rows  [B][Hk][tiles][kKeyTile][D]  values as rows (the forward's P V)
//   vt      [B][Hk][tiles][D][kKeyTile]  values transposed (the backward's dP = dO V^T)
// Tiles start at multiples of kKeyTile; keys past T are zeros. Floats, whatever q's dtype.
// A remap's far keys are not packed (they are rotated per tile pair, as before).
//
// Memory stays bounded: the forward packs its (batch row, kv head) groups a batch at a time within
// kForwardPackBytes (a group larger than that is not packed: the tiles load as before, so S = 32768,
// 8 heads, D = 64 keeps its 0.25 MiB); the backward packs when its five layouts fit
// kBackwardPackBytes (training's tensors are larger anyway).
#pragma once

#include <cstdint>

#include "attention_plan.h"
#include "posenc/aligned_vector.h"

namespace posenc::attention_detail {

struct PackedKeyLayouts {
  bool kt = false, k_rows = false, v_rows = false, vt = false;
  int count() const { return kt + k_rows + v_rows + vt; }
};

inline constexpr std::int64_t kForwardPackBytes = std::int64_t{12} << 20;
inline constexpr std::int64_t kBackwardPackBytes = std::int64_t{128} << 20;
// The forward's limit (kForwardPackBytes unless a test sets a smaller one, to run several batches
// on small inputs; not thread-safe: set it between calls).
std::int64_t forward_pack_limit();
void set_forward_pack_limit_for_test(std::int64_t bytes);

class PackedKeys {
 public:
  PackedKeys() = default;
  // Packs the layouts asked for of groups (b, hk) = b * Hk + hk in [first_group, end_group) (all
  // of them by default), over `threads` threads.
  PackedKeys(const Plan& plan, PackedKeyLayouts layouts, int threads, std::int64_t first_group = 0, std::int64_t end_group = -1);

  bool empty() const { return tiles_ == 0; }
  // Tile `tile` (keys tile * kKeyTile ..) of (b, hk) in one layout: kKeyTile * D floats.
  const float* kt(int b, int hk, std::int64_t tile) const { return kt_.data() + offset(b, hk, tile); }
  const float* k_rows(int b, int hk, std::int64_t tile) const { return k_rows_.data() + offset(b, hk, tile); }
  const float* v_rows(int b, int hk, std::int64_t tile) const { return v_rows_.data() + offset(b, hk, tile); }
  const float* vt(int b, int hk, std::int64_t tile) const { return vt_.data() + offset(b, hk, tile); }

  // Bytes the layouts take for one group of k [B, T, Hk, D] (one batch row, one kv head).
  static std::int64_t group_bytes(const RopeTensor& k, PackedKeyLayouts layouts);

 private:
  std::size_t offset(int b, int hk, std::int64_t tile) const {
    return ((static_cast<std::size_t>(b) * heads_ + hk - first_group_) * tiles_ + static_cast<std::size_t>(tile)) * tile_floats_;
  }
  std::int64_t tiles_ = 0, first_group_ = 0;
  int heads_ = 0;
  std::size_t tile_floats_ = 0;
  AlignedVector<float> kt_, k_rows_, v_rows_, vt_;
};

// The backward's query side, packed once (pass K reloads every query tile for each key tile it
// sees): per (batch row, query head) its rows, rotated and times the softmax scale, and dO's rows,
// [B][Hq][S rounded up to kQueryTile][D] each, zeros past S. Floats.
class PackedQueries {
 public:
  PackedQueries() = default;
  PackedQueries(const Plan& plan, const RopeTensor& dout, int threads);

  bool empty() const { return rows_ == 0; }
  // Rows i0 .. of (b, h): kPaddedRows x D floats from there.
  const float* q(int b, int h, int i0) const { return q_.data() + offset(b, h, i0); }
  const float* dout(int b, int h, int i0) const { return dout_.data() + offset(b, h, i0); }

  static std::int64_t bytes(const RopeTensor& q);

 private:
  std::size_t offset(int b, int h, int i0) const {
    return ((static_cast<std::size_t>(b) * heads_ + h) * rows_ + static_cast<std::size_t>(i0)) * D_;
  }
  std::int64_t rows_ = 0;
  int heads_ = 0;
  std::size_t D_ = 0;
  AlignedVector<float> q_, dout_;
};

// Whether packing pays: each key tile is read by more than one (query head, query tile) of
// q [B, S, Hq, D] over k [B, T, Hk, D].
bool packing_pays(const RopeTensor& q, const RopeTensor& k);

// The forward's packing: how many groups one batch packs (0: none, the tiles load as before),
// and the bytes that takes (attention_extra_bytes).
std::int64_t forward_groups_per_batch(const RopeTensor& q, const RopeTensor& k);
std::int64_t forward_pack_bytes(const RopeTensor& q, const RopeTensor& k);

// Whether the backward packs (its keys' three layouts and the queries' two fit kBackwardPackBytes).
bool backward_packs(const RopeTensor& q, const RopeTensor& k);

inline constexpr PackedKeyLayouts kForwardLayouts{true, false, true, false};
inline constexpr PackedKeyLayouts kBackwardLayouts{true, true, false, true};

}  // namespace posenc::attention_detail
