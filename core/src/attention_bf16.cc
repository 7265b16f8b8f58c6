// The bf16 path of attention() (posenc/attention_bf16.h): the f32 kernel's loop
// (attention_kernels-inl.h: per batch, query head and tile of 128 queries, key tiles of 64 in
// order, masks and position terms from attention_plan.h) over the AVX512-BF16 tile steps of
// attention_bf16_tiles.cc. This file is baseline code; only the tile steps use the extension.
#include "attention_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "attention_bf16_tiles.h"
#include "posenc/aligned_vector.h"
#include "posenc/attention_bf16.h"
#include "posenc/threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posenc {
namespace {
bool bf16_allowed = true;
}  // namespace

bool attention_bf16_available() {
#if POSENC_ATTENTION_BF16_X86
  // libgcc's and compiler-rt's checks count AVX-512 features only when XCR0 shows the OS saves
  // the opmask and ZMM state.
  static const bool cpu_has_it = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                                 __builtin_cpu_supports("avx512bf16");
  return cpu_has_it && bf16_allowed;
#else
  return false;
#endif
}

void allow_attention_bf16_for_test(bool allowed) { bf16_allowed = allowed; }

bool attention_runs_bf16(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const AttentionParams& params,
                         const AttentionOptions& options) {
  if (!options.bf16_dot_products || !attention_bf16_available()) return false;
  if (q.dtype != DType::kBF16 || k.dtype != DType::kBF16 || v.dtype != DType::kBF16) return false;
  if (params.positions == AttentionPositions::kRope && params.remap.kind != PositionRemapKind::kNone) return false;
  const int threads = kernel_threads(options.threads, "attention");
  const std::int64_t query_tiles = (std::int64_t{q.tokens} + attention_detail::kBf16QueryTile - 1) / attention_detail::kBf16QueryTile;
  return std::int64_t{q.batch} * q.heads * query_tiles >= threads;  // else the f32 kernel splits the keys
}

namespace attention_detail {
namespace {

inline std::size_t aligned16(std::size_t floats) { return (floats + 15) / 16 * 16; }

// One thread's regions (attention_bf16_tiles.h), carved from one 64-byte aligned buffer.
struct Bf16Tiles {
  explicit Bf16Tiles(int D) : pairs(bf16::channel_pairs(D)), Dv(bf16::value_width(D)), buffer(bf16_tile_floats(D)) {
    float* at = buffer.data();
    const auto take = [&at](std::size_t floats) {
      float* region = at;
      at += aligned16(floats);
      return region;
    };
    Qp = reinterpret_cast<std::uint32_t*>(take(std::size_t{kBf16QueryTile} * pairs));
    staged = reinterpret_cast<std::uint32_t*>(take(std::size_t{kKeyTile} * pairs));
    Kp = reinterpret_cast<std::uint32_t*>(take(std::size_t{kKeyTile} * pairs));
    Vp = reinterpret_cast<std::uint32_t*>(take(std::size_t{kKeyTile / 2} * Dv));
    Sc = take(std::size_t{kBf16QueryTile} * kKeyTile);
    acc = take(std::size_t{kBf16QueryTile} * Dv);
    row_max = take(kBf16QueryTile);
    row_sum = take(kBf16QueryTile);
    row = take(static_cast<std::size_t>(D));
    tmp = take(static_cast<std::size_t>(D));
  }
  int pairs, Dv;
  AlignedVector<float> buffer;
  std::uint32_t *Qp, *staged, *Kp, *Vp;
  float *Sc, *acc, *row_max, *row_sum, *row, *tmp;
};

const std::uint16_t* bf16_row(const RopeTensor& x, int b, int t, int h) {
  return static_cast<const std::uint16_t*>(x.data) + offset_of(x, b, t, h);
}

// The query tile: rows rotated (RoPE) and scaled in f32 as the f32 kernel loads them, then
// rounded to bf16 pairs; rows [rows, rows4) zero.
void load_query_tile(const Plan& plan, int b, int h, int i0, int rows, int rows4, Bf16Tiles& w) {
  for (int r = 0; r < rows; ++r) {
    plan.load_query(b, i0 + r, h, w.row, w.tmp);
    for (int x = 0; x < plan.D; ++x) w.row[x] *= plan.scale;
    bf16::pack_row(w.row, plan.D, w.Qp + static_cast<std::size_t>(r) * w.pairs);
  }
  std::fill(w.Qp + static_cast<std::size_t>(rows) * w.pairs, w.Qp + static_cast<std::size_t>(rows4) * w.pairs, 0u);
}

// The key tile by channel pairs into Kp: stored bf16 rows read in place when they are not rotated
// and hold whole pairs; else rotated in f32 (plan.load_key), rounded to bf16 and staged.
void load_key_tile(const Plan& plan, int b, int hk, std::int64_t j0, int cols, Bf16Tiles& w, std::uint32_t* Kp) {
  const RopeTensor& k = *plan.k;
  if (plan.p->positions != AttentionPositions::kRope && plan.D % 2 == 0) {
    bf16::pack_key_tile(bf16_row(k, b, static_cast<int>(j0), hk), k.token_stride, cols, w.pairs, Kp);
    return;
  }
  for (int c = 0; c < cols; ++c) {
    plan.load_key(b, static_cast<int>(j0 + c), hk, w.row, w.tmp);
    bf16::pack_row(w.row, plan.D, w.staged + static_cast<std::size_t>(c) * w.pairs);
  }
  bf16::pack_key_tile(reinterpret_cast<const std::uint16_t*>(w.staged), 2 * std::int64_t{w.pairs}, cols, w.pairs, Kp);
}

// Key tiles start at multiples of kKeyTile (so a tile packed ahead serves every query tile; the
// masks hide its keys outside a query tile's key_range) and end at T.
int tile_columns(const Plan& plan, std::int64_t tile) { return static_cast<int>(std::min<std::int64_t>(kKeyTile, plan.T - tile * kKeyTile)); }

void pack_tile(const Plan& plan, int b, int hk, std::int64_t tile, Bf16Tiles& w, std::uint32_t* Kp, std::uint32_t* Vp) {
  const std::int64_t j0 = tile * kKeyTile;
  const int cols = tile_columns(plan, tile);
  load_key_tile(plan, b, hk, j0, cols, w, Kp);
  bf16::pack_value_tile(bf16_row(*plan.v, b, static_cast<int>(j0), hk), plan.v->token_stride, cols, plan.D, Vp);
}

// Every key and value tile of the call packed once, [B][Hk][tiles] of (Kp, Vp), where that fits
// in the limit; else each task packs the tiles it reads (as the f32 kernel loads them), once per
// query tile. The same tiles either way, so the same bits.
struct PackedAhead {
  PackedAhead(const Plan& plan, int pairs, int Dv)
      : tiles((plan.T + kKeyTile - 1) / kKeyTile), key_words(std::int64_t{pairs} * kKeyTile), value_words(std::int64_t{kKeyTile / 2} * Dv) {}
  std::int64_t tiles, key_words, value_words;
  std::int64_t bytes(const Plan& plan) const {
    return std::int64_t{plan.q->batch} * plan.k->heads * tiles * (key_words + value_words) * static_cast<std::int64_t>(sizeof(std::uint32_t));
  }
  std::int64_t slot(const Plan& plan, int b, int hk, std::int64_t tile) const { return (std::int64_t{b} * plan.k->heads + hk) * tiles + tile; }
  AlignedVector<std::uint32_t> keys, values;  // empty: not packed ahead
};

std::int64_t pack_ahead_limit = std::int64_t{256} << 20;

// One task: batch row b, query head h, queries [i0, i0 + rows).
void attend_query_tile(const Plan& plan, int b, int h, int i0, int rows, float* lse, Bf16Tiles& w, const PackedAhead& ahead) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int hk = h / plan.group, rows4 = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
  load_query_tile(plan, b, h, i0, rows, rows4, w);
  std::fill(w.acc, w.acc + static_cast<std::size_t>(rows4) * w.Dv, 0.0f);
  std::fill(w.row_max, w.row_max + kBf16QueryTile, neg_inf);
  std::fill(w.row_sum, w.row_sum + kBf16QueryTile, 0.0f);
  std::int64_t lo, hi;
  plan.key_range(i0, i0 + rows, &lo, &hi);
  std::vector<std::int64_t> positions(kBf16QueryTile + kKeyTile);
  std::vector<int> lut;
  for (std::int64_t tile = lo / kKeyTile; lo < hi && tile * kKeyTile < hi; ++tile) {
    const std::int64_t j0 = tile * kKeyTile;
    const int cols = tile_columns(plan, tile);
    const std::uint32_t* Kp = w.Kp;
    const std::uint32_t* Vp = w.Vp;
    if (ahead.keys.empty()) {
      pack_tile(plan, b, hk, tile, w, w.Kp, w.Vp);
    } else {
      Kp = ahead.keys.data() + ahead.slot(plan, b, hk, tile) * ahead.key_words;
      Vp = ahead.values.data() + ahead.slot(plan, b, hk, tile) * ahead.value_words;
    }
    bf16::score_tile(w.Qp, w.pairs, Kp, rows4, w.Sc);
    bf16::bias_and_mask_tile(plan, b, h, i0, rows, j0, cols, w.Sc, positions.data(), lut);
    bf16::softmax_tile(w.Sc, rows, rows4, w.row_max, w.row_sum, w.acc, w.Dv);
    bf16::value_tile(w.Sc, Vp, rows4, (cols + 1) / 2, w.Dv, w.acc);
  }
  for (int r = 0; r < rows; ++r) {
    const float inv = w.row_sum[r] > 0 ? 1.0f / w.row_sum[r] : 0.0f;  // a row that saw no key: zeros
    for (int x = 0; x < plan.D; ++x) w.row[x] = w.acc[static_cast<std::size_t>(r) * w.Dv + x] * inv;
    store_row(*plan.out, b, i0 + r, h, w.row);
    if (lse)
      lse[(std::int64_t{b} * plan.Hq + h) * plan.S + i0 + r] = w.row_sum[r] > 0 ? w.row_max[r] + std::log(w.row_sum[r]) : neg_inf;
  }
}

}  // namespace

void set_bf16_pack_ahead_limit_for_test(std::int64_t bytes) { pack_ahead_limit = bytes; }

std::int64_t bf16_extra_bytes(const RopeTensor& q, const RopeTensor& k, const AttentionParams& p, int threads) {
  AttentionOptions options;
  options.threads = threads;
  if (!attention_runs_bf16(q, k, k, p, options)) return 0;  // v taken as k's dtype
  const std::int64_t tiles = (std::int64_t{k.tokens} + kKeyTile - 1) / kKeyTile;
  const std::int64_t ahead = std::int64_t{q.batch} * k.heads * tiles *
                             (std::int64_t{bf16::channel_pairs(q.head_dim)} * kKeyTile + std::int64_t{kKeyTile / 2} * bf16::value_width(q.head_dim)) * 4;
  return std::int64_t{threads} * static_cast<std::int64_t>(bf16_tile_floats(q.head_dim) * sizeof(float)) + (ahead <= pack_ahead_limit ? ahead : 0);
}

std::size_t bf16_tile_floats(int D) {
  const std::size_t pairs = static_cast<std::size_t>(bf16::channel_pairs(D)), Dv = static_cast<std::size_t>(bf16::value_width(D));
  return aligned16(kBf16QueryTile * pairs) + 2 * aligned16(kKeyTile * pairs) + aligned16(kKeyTile / 2 * Dv) +
         aligned16(std::size_t{kBf16QueryTile} * kKeyTile) + aligned16(kBf16QueryTile * Dv) + 2 * aligned16(kBf16QueryTile) +
         2 * aligned16(static_cast<std::size_t>(D));
}

bool run_attention_bf16(const Plan& plan, int threads, const AttentionOptions& options) {
#if POSENC_ATTENTION_BF16_X86
  if (!attention_runs_bf16(*plan.q, *plan.k, *plan.v, *plan.p, options)) return false;
  const int query_tiles = (plan.S + kBf16QueryTile - 1) / kBf16QueryTile;
  const std::int64_t tasks = std::int64_t{plan.q->batch} * plan.Hq * query_tiles;
  const int Hk = plan.k->heads;
  PackedAhead ahead(plan, bf16::channel_pairs(plan.D), bf16::value_width(plan.D));
  if (ahead.bytes(plan) <= pack_ahead_limit) {
    const std::int64_t slots = std::int64_t{plan.q->batch} * Hk * ahead.tiles;
    ahead.keys.resize(static_cast<std::size_t>(slots * ahead.key_words));
    ahead.values.resize(static_cast<std::size_t>(slots * ahead.value_words));
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    Bf16Tiles tiles(plan.D);
    if (!ahead.keys.empty()) {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
      for (std::int64_t slot = 0; slot < std::int64_t{plan.q->batch} * Hk * ahead.tiles; ++slot) {
        const std::int64_t tile = slot % ahead.tiles;
        const int hk = static_cast<int>(slot / ahead.tiles % Hk), b = static_cast<int>(slot / ahead.tiles / Hk);
        pack_tile(plan, b, hk, tile, tiles, ahead.keys.data() + slot * ahead.key_words, ahead.values.data() + slot * ahead.value_words);
      }  // the loop's barrier: every tile packed before any task reads one
    }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t task = 0; task < tasks; ++task) {
      const int tile = static_cast<int>(task % query_tiles), h = static_cast<int>(task / query_tiles % plan.Hq);
      const int b = static_cast<int>(task / query_tiles / plan.Hq), i0 = tile * kBf16QueryTile;
      attend_query_tile(plan, b, h, i0, std::min(kBf16QueryTile, plan.S - i0), options.lse, tiles, ahead);
    }
  }
  return true;
#else
  (void)plan;
  (void)threads;
  (void)options;
  return false;
#endif
}

}  // namespace attention_detail
}  // namespace posenc
