// SIMD decode attention (S = 1), compiled once per Highway target by attention_decode.cc
// (foreach_target). What it computes and why: attention_decode.h.
//
// Per work item (batch row b, keys [lo, hi) in tiles of kKeyTile), for every kv head hk and its
// G = Hq / Hk query heads h = hk G .. hk G + G - 1:
//   scores  Sc[h][c] = q_h . k_c   (q pre-scaled, RoPE-rotated when that is the scheme): key c's
//           rows of every kv head in storage order (a token-major cache is then read as one
//           stream), each row loaded once (widened from bf16/f16 in registers) and dotted with
//           the G query heads it serves, f32 FMAs; four keys' sums per head folded together
//           (SumOf4) instead of a horizontal sum per (head, key)
//   position terms and masks per head (ALiBi: AddAlibiRows; the others Plan::add_bias_tile;
//           Plan::mask_tile), then the online
//           softmax of every head's row (SoftmaxTile, attention_softmax-inl.h)
//   acc[h] += sum_c P[h][c] v_c: each kv head's value rows read in place (widened in registers),
//           register-blocked over 4, 2 or 1 heads (AccumulateRows)
// The tile products are in attention_decode_tiles-inl.h. K and V are prefetched into L2 a fixed
// number of bytes ahead (kPrefetchBytes).
// Measured on a shared Zen 4 EPYC (load average 6-9), 8 query heads over 2 kv heads, T = 32768,
// f32, one thread (`posenc bench attention --decode`): one kv head per work item (its rows strided
// by the other heads' in a token-major cache) read K and V at 0.05 of the same-run streaming
// read; all kv heads per key row, 0.15; with the four-key sums and the prefetch, 0.48. On an idle
// Zen 4 EPYC later the same code read 0.19-0.25 (8 and 2 kv heads): the copy of each value tile
// (128 KiB at 8 kv heads) and the L1 prefetches were the cost; values read in place and L2
// prefetches by bytes: 0.43 / 0.54.
// FMAs and a vector exp: equal to attention_reference up to float rounding (the tests bound it
// as they bound the general kernel). Where DecodeBf16 says so (bf16 K or V on a CPU with
// AVX512-BF16), the scores or the P.V sums are the bf16 products of attention_decode_bf16.h
// instead, within the bf16 bound of posenc/attention_bf16.h.
#if defined(POSENC_ATTENTION_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_DECODE_INL_H_
#undef POSENC_ATTENTION_DECODE_INL_H_
#else
#define POSENC_ATTENTION_DECODE_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention_bf16_tiles.h"
#include "attention_decode.h"
#include "attention_decode_bf16.h"
#include "attention_plan.h"
#include "attention_decode_tiles-inl.h"
#include "attention_softmax-inl.h"
#include "rope_convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace decode {

using attention_detail::kKeyTile;
namespace decode_bf16 = attention_detail::decode_bf16;

// How far ahead K and V are prefetched: the rows of the key kPrefetchBytes of cache ahead (every
// kv head's K and V rows of one key count), into L2 only (locality 1: prefetcht2 on x86). A
// prefetch into L1 holds one of the core's few L1 miss buffers for its whole trip to memory, which
// capped the stream below half the memory ceiling. Measured on a Zen 4 EPYC (idle), f32, T =
// 32768, one thread, 8 query heads over 8 / 2 kv heads, GB/s of K and V read (a streaming read of
// the same bytes: 29-35): L1 prefetch 24 keys ahead (the former policy) 8.8 / 9.5; none 9.2 / 6.8;
// L2 prefetch 8 KiB ahead 13.1 / 17.6, 16 KiB 13.8 / 17.5, 32 KiB 13.4 / 17.0. bf16, ns a key
// from memory (8 / 2 kv heads): as is 124 / 37; without K's prefetches 124 / 55 (read key by
// key, K is a stream the hardware follows), without V's 210 / 55; every other line 169 / 53.
// Where a cold step's time goes on one thread (Zen 4 EPYC, f32 K and V over 8 kv heads, T = 32768,
// ns a key, three interleaved runs; memory delivers a key's 4 KiB in about 159): as is 223-260;
// with the P.V products skipped (V still prefetched: the same bytes from memory) 174-214; with V's
// lines only touched (one load a line, no products) 223-241. So P.V costs the moving of V's lines
// from L2 into the core, not its arithmetic, and that is not hidden under the memory stream, while
// the scores' arithmetic is: 15% less of it (full-width products, 123 -> 105 ns a key in L2)
// changed nothing cold. Tried, all slower cold: the next tile's prefetches issued during P.V
// (spread over its steps or per kv head, 8-64 keys ahead), tiles of 8-32 keys, V prefetched into
// L1 during P.V (with or without its L2 prefetch ahead), no prefetch of V (K's can go: no change);
// P.V over 4 heads' rows per key (storage order): 12 ns a key less in L2, cold within noise.
constexpr int kPrefetchBytes = 16384;

// Keys ahead of the one being read whose rows are prefetched, for these K and V.
inline std::int64_t prefetch_keys(const RopeTensor& k, const RopeTensor& v) {
  const std::int64_t key_bytes = static_cast<std::int64_t>(k.heads) * k.head_dim * dtype_size(k.dtype) +
                                 static_cast<std::int64_t>(v.heads) * v.head_dim * dtype_size(v.dtype);
  return std::max<std::int64_t>(1, kPrefetchBytes / key_bytes);
}

// Prefetches the rows of keys j .. j + count - 1 (batch row b) of every kv head of x (K or V, in
// its own dtype) into L2; past the cache's end it is not called (no out-of-range pointer is
// formed). A dense token-major cache holds them as one span, prefetched line by line without a
// row's address per kv head: at 8 query heads over 2 bf16 kv heads, 4 keys' K and V are 32 lines
// and the per-row addresses had cost as much as the prefetches (a fifth of a step, measured).
HWY_INLINE void PrefetchKeys(const RopeTensor& x, int b, std::int64_t j, int count) {
  const std::size_t element = dtype_size(x.dtype), row_bytes = static_cast<std::size_t>(x.head_dim) * element;
  const char* data = static_cast<const char*>(x.data);
  if (x.head_stride == x.head_dim && x.token_stride == std::int64_t{x.heads} * x.head_dim) {
    const char* first = data + attention_detail::offset_of(x, b, static_cast<int>(j), 0) * static_cast<std::int64_t>(element);
    const std::size_t bytes = static_cast<std::size_t>(count) * x.heads * row_bytes;
    for (std::size_t line = 0; line < bytes; line += 64) __builtin_prefetch(first + line, 0, 1);
    return;
  }
  for (int i = 0; i < count; ++i)
    for (int hk = 0; hk < x.heads; ++hk) {
      const char* row = data + attention_detail::offset_of(x, b, static_cast<int>(j + i), hk) * static_cast<std::int64_t>(element);
      for (std::size_t line = 0; line < row_bytes; line += 64) __builtin_prefetch(row + line, 0, 1);
    }
}

// One thread's buffers (attention_detail::decode_workspace_floats) for Hq query heads over Hk kv
// heads: rows in query-head order, so kv head hk's G rows start at row hk G. acc's rows are D
// floats apart, or value_width(D) in pair order on the bf16 value path; Qp: Q as bf16 pairs.
struct Workspace {
  Workspace(int Hq, int Hk, int D, attention_detail::DecodeBf16 products)
      : buffer(hwy::AllocateAligned<float>(attention_detail::decode_workspace_floats(Hq, Hk, D))), Q(buffer.get()),
        acc(Q + rows(Hq, D)), Sc(acc + rows(Hq, decode_bf16::value_width(D))), row_max(Sc + rows(Hq, kKeyTile)), row_sum(row_max + Hq),
        key(row_sum + Hq), tmp(key + rows(std::max(4, Hk), D)), Qp(reinterpret_cast<std::uint32_t*>(tmp + D)), bf16(products),
        correction(static_cast<std::size_t>(Hq)) {}
  static std::size_t rows(int n, int width) { return static_cast<std::size_t>(n) * static_cast<std::size_t>(width); }
  hwy::AlignedFreeUniquePtr<float[]> buffer;
  float *Q, *acc, *Sc, *row_max, *row_sum, *key, *tmp;  // key: max(4, Hk) rotated key rows
  std::uint32_t* Qp;
  attention_detail::DecodeBf16 bf16;
  std::vector<float> correction;  // SoftmaxTile's factor per head
  std::vector<std::int64_t> positions = std::vector<std::int64_t>(1 + kKeyTile);  // add_bias_tile's scratch
  std::vector<float> distance = std::vector<float>(kKeyTile);                     // AddAlibiRows' scratch
  std::vector<int> lut;
};

// Whether the scores are formed key by key (ScoreTileByKey) rather than four keys per kv head
// (ScoreTileByHead): a token-major K with several kv heads, groups of fewer than 4 query heads
// (a group of 4 or more fills ByHead's 4 x 4 register block, which ByKey's blocks of 4 heads do
// not), and at least one block of 4 query heads. Measured on an idle Zen 4 EPYC, f32, T = 32768,
// 8 query heads, one thread, GB/s of K and V: 8 kv heads, by head 12.3-13.8, by key 15.9-19.0;
// 2 kv heads, by head 17.0-18.8, by key 11.4-14.8. Reading the values key by key too (every
// query head's accumulator in memory) was slower in both.
inline bool reads_by_key(const RopeTensor& k, int query_heads, int group) {
  return k.heads > 1 && group < 4 && query_heads >= 4 && k.head_stride < k.token_stride;
}

// The bf16 products (attention_decode_bf16.h), where ws.bf16 says so: K or V stored bf16 and
// read as such. Not compiled where the extension is not (POSENC_ATTENTION_BF16_X86 0): ws.bf16 is
// then all false.
// Scores of keys j .. j + count - 1 (count 4 or 1) of every kv head against its G query heads.
inline void ScoreKeysBf16(const attention_detail::Plan& plan, int b, int j, int count, const Workspace& ws, float* column) {
#if POSENC_ATTENTION_BF16_X86
  const std::uint16_t* key = static_cast<const std::uint16_t*>(plan.k->data) + attention_detail::offset_of(*plan.k, b, j, 0);
  decode_bf16::score_keys(ws.Qp, plan.Hq / plan.group, plan.group, plan.D, key, plan.k->token_stride, plan.k->head_stride, count, column);
#endif
}
// Scores of key j, every kv head, against every query head (reads_by_key).
inline void ScoreKeyHeadsBf16(const attention_detail::Plan& plan, int b, int j, const Workspace& ws, float* column) {
#if POSENC_ATTENTION_BF16_X86
  const std::uint16_t* key = static_cast<const std::uint16_t*>(plan.k->data) + attention_detail::offset_of(*plan.k, b, j, 0);
  decode_bf16::score_key_heads(ws.Qp, plan.Hq, plan.group, plan.D, key, plan.k->head_stride, column);
#endif
}
// acc[h] += P[h] . V over keys j0 .. j0 + cols - 1 of every kv head (acc in pair order).
inline void AccumulateBf16(const attention_detail::Plan& plan, int b, std::int64_t j0, int cols, Workspace& ws) {
#if POSENC_ATTENTION_BF16_X86
  const int G = plan.group, D = plan.D;
  const std::uint16_t* v = static_cast<const std::uint16_t*>(plan.v->data) + attention_detail::offset_of(*plan.v, b, static_cast<int>(j0), 0);
  if (G == 1) return decode_bf16::accumulate_heads(ws.Sc, v, plan.v->token_stride, plan.v->head_stride, plan.Hq, cols, D, ws.acc);
  for (int hk = 0; hk < plan.Hq / G; ++hk)
    decode_bf16::accumulate_rows(ws.Sc + Workspace::rows(hk * G, kKeyTile), v + hk * plan.v->head_stride, plan.v->token_stride, G, cols, D,
                                 ws.acc + Workspace::rows(hk * G, decode_bf16::value_width(D)));
#endif
}
// Q (scaled, rotated) rounded to bf16 pairs once per work item; acc back to channel order.
inline void PackQueryBf16(int Hq, int D, Workspace& ws) {
#if POSENC_ATTENTION_BF16_X86
  const int words = decode_bf16::query_words(D);
  std::fill(ws.Qp, ws.Qp + Workspace::rows(Hq, words), 0u);
  for (int h = 0; h < Hq; ++h) attention_detail::bf16::pack_row(ws.Q + h * D, D, ws.Qp + Workspace::rows(h, words));
#endif
}
inline void UnpermuteBf16(int Hq, int D, Workspace& ws) {
#if POSENC_ATTENTION_BF16_X86
  decode_bf16::unpermute_rows(ws.acc, Hq, D);
#endif
}

// Sc[h][c] for keys j0 + c, c < cols, every query head: key by key, each key's kv head rows in
// storage order (RoPE: rotated into ws.key first). Prefetches the key `ahead` keys on.
template <typename T>
void ScoreTileByKey(const attention_detail::Plan& plan, int b, std::int64_t j0, int cols, std::int64_t hi, std::int64_t ahead,
                    Workspace& ws) {
  const int G = plan.group, D = plan.D, Hq = plan.Hq;
  const T* k_data = static_cast<const T*>(plan.k->data);
  for (int c = 0; c < cols; ++c) {
    const int j = static_cast<int>(j0 + c);
    if (j + ahead < hi) {
      PrefetchKeys(*plan.k, b, j + ahead, 1);
      PrefetchKeys(*plan.v, b, j + ahead, 1);
    }
    if (plan.p->positions == AttentionPositions::kRope) {  // the key's rows rotated at its position
      for (int hk = 0; hk < Hq / G; ++hk) plan.load_key(b, j, hk, ws.key + hk * D, ws.tmp);
      ScoreKeyHeads(ws.Q, Hq, G, D, static_cast<const float*>(ws.key), D, ws.Sc + c);
    } else if (ws.bf16.scores) {
      ScoreKeyHeadsBf16(plan, b, j, ws, ws.Sc + c);
    } else {
      ScoreKeyHeads(ws.Q, Hq, G, D, k_data + attention_detail::offset_of(*plan.k, b, j, 0), plan.k->head_stride, ws.Sc + c);
    }
  }
}

// The same scores per kv head, four keys at a time: each kv head's 4 rows dotted with its G query
// heads (a head-major cache's storage order).
template <typename T>
void ScoreTileByHead(const attention_detail::Plan& plan, int b, std::int64_t j0, int cols, std::int64_t hi, std::int64_t ahead,
                     Workspace& ws) {
  const int G = plan.group, D = plan.D, Hk = plan.Hq / G;
  const T* k_data = static_cast<const T*>(plan.k->data);
  for (int c = 0; c < cols;) {
    const int keys = kFourKeys && c + 4 <= cols ? 4 : 1;  // four keys at a time, then one
    const int j = static_cast<int>(j0 + c);
    const int ahead_keys = static_cast<int>(std::clamp<std::int64_t>(hi - (j + ahead), 0, keys));  // those before the cache's end
    PrefetchKeys(*plan.k, b, j + ahead, ahead_keys);
    PrefetchKeys(*plan.v, b, j + ahead, ahead_keys);
    if (ws.bf16.scores) {
      ScoreKeysBf16(plan, b, j, keys, ws, ws.Sc + c);
      c += keys;
      continue;
    }
    for (int hk = 0; hk < Hk; ++hk) {
      float* column = ws.Sc + Workspace::rows(hk * G, kKeyTile) + c;
      const float* Q = ws.Q + Workspace::rows(hk * G, D);
      if (plan.p->positions == AttentionPositions::kRope) {  // the keys rotated at their positions
        const float* rows[4];
        for (int k = 0; k < keys; ++k) {
          plan.load_key(b, j + k, hk, ws.key + k * D, ws.tmp);
          rows[k] = ws.key + k * D;
        }
        if (keys == 4) ScoreFourKeys(Q, G, D, rows, column);
        else ScoreKey(Q, G, D, rows[0], column);
      } else {
        const T* rows[4];
        for (int k = 0; k < keys; ++k) rows[k] = k_data + attention_detail::offset_of(*plan.k, b, j + k, hk);
        if (keys == 4) ScoreFourKeys(Q, G, D, rows, column);
        else ScoreKey(Q, G, D, rows[0], column);
      }
    }
    c += keys;
  }
}

// Keys [lo, hi) of batch row b against every query head: leaves in ws the heads' unnormalised
// accumulators, running maxima and sums. TK, TV: the storage of k and of v (each float, bf16 or
// f16; they may differ).
template <typename TK, typename TV>
void DecodeKeys(const attention_detail::Plan& plan, int b, std::int64_t lo, std::int64_t hi, Workspace& ws) {
  const int G = plan.group, D = plan.D, Hq = plan.Hq, Hk = Hq / G;
  const bool alibi = plan.p->positions == AttentionPositions::kAlibi;
  const bool other_bias = plan.has_bias() && !alibi;
  const TV* v_data = static_cast<const TV*>(plan.v->data);
  const std::int64_t ahead = prefetch_keys(*plan.k, *plan.v);
  const bool by_key = reads_by_key(*plan.k, Hq, G);
  const int width = ws.bf16.values ? decode_bf16::value_width(D) : D;  // of acc's rows
  for (int h = 0; h < Hq; ++h) {
    plan.load_query(b, 0, h, ws.Q + h * D, ws.tmp);
    for (int x = 0; x < D; ++x) ws.Q[h * D + x] *= plan.scale;
  }
  if (ws.bf16.scores) PackQueryBf16(Hq, D, ws);
  std::fill(ws.acc, ws.acc + Workspace::rows(Hq, width), 0.0f);
  std::fill(ws.row_max, ws.row_max + Hq, -std::numeric_limits<float>::infinity());
  std::fill(ws.row_sum, ws.row_sum + Hq, 0.0f);
  for (std::int64_t j0 = lo; j0 < hi; j0 += kKeyTile) {
    const int cols = static_cast<int>(std::min<std::int64_t>(kKeyTile, hi - j0));
    if (by_key) ScoreTileByKey<TK>(plan, b, j0, cols, hi, ahead, ws);
    else ScoreTileByHead<TK>(plan, b, j0, cols, hi, ahead, ws);
    if (alibi) AddAlibiRows(plan, b, j0, cols, ws.Sc, ws.positions.data(), ws.distance.data());
    for (int h = 0; h < Hq; ++h) {
      float* row = ws.Sc + Workspace::rows(h, kKeyTile);
      if (other_bias) plan.add_bias_tile(b, h, 0, 1, j0, cols, row, kKeyTile, ws.positions.data(), ws.lut);
      plan.mask_tile(b, 0, 1, j0, cols, row);
    }
    SoftmaxTile(ws.Sc, Hq, ws.row_max, ws.row_sum, ws.correction.data());
    for (int h = 0; h < Hq; ++h)
      if (ws.correction[h] != 1.0f)
        for (int x = 0; x < width; ++x) ws.acc[h * width + x] *= ws.correction[h];
    if (ws.bf16.values) {
      AccumulateBf16(plan, b, j0, cols, ws);
      continue;
    }
    for (int hk = 0; hk < Hk; ++hk)
      AccumulateRows(ws.Sc + Workspace::rows(hk * G, kKeyTile), v_data + attention_detail::offset_of(*plan.v, b, static_cast<int>(j0), hk),
                     plan.v->token_stride, G, cols, D, ws.acc + Workspace::rows(hk * G, D));
  }
  if (ws.bf16.values) UnpermuteBf16(Hq, D, ws);
}

// DecodeKeys for plan's K and V dtypes.
template <typename TK>
void DecodeKeysWithKeys(const attention_detail::Plan& plan, int b, std::int64_t lo, std::int64_t hi, Workspace& ws) {
  switch (plan.v->dtype) {
    case DType::kF32: return DecodeKeys<TK, float>(plan, b, lo, hi, ws);
    case DType::kBF16: return DecodeKeys<TK, hwy::bfloat16_t>(plan, b, lo, hi, ws);
    case DType::kF16: return DecodeKeys<TK, hwy::float16_t>(plan, b, lo, hi, ws);
  }
}
inline void DecodeKeysOf(const attention_detail::Plan& plan, int b, std::int64_t lo, std::int64_t hi, Workspace& ws) {
  switch (plan.k->dtype) {
    case DType::kF32: return DecodeKeysWithKeys<float>(plan, b, lo, hi, ws);
    case DType::kBF16: return DecodeKeysWithKeys<hwy::bfloat16_t>(plan, b, lo, hi, ws);
    case DType::kF16: return DecodeKeysWithKeys<hwy::float16_t>(plan, b, lo, hi, ws);
  }
}

}  // namespace decode

void AttentionDecode(const attention_detail::Plan& plan, int threads, float* lse, attention_detail::DecodeBf16 bf16) {
  using attention_detail::kKeyTile;
  const int Hq = plan.Hq, D = plan.D, B = plan.q->batch;
  std::int64_t lo = 0, hi = 0;
  plan.key_range(0, 1, &lo, &hi);  // the same for every batch row: S = 1 at index past
  const std::int64_t key_tiles = (hi - lo + kKeyTile - 1) / kKeyTile;
  const int splits = attention_detail::decode_splits(B, key_tiles, threads);
  const std::int64_t per = (key_tiles + splits - 1) / splits;  // tiles per split
  // A split's partial softmax for the merge: Hq accumulator rows, then Hq maxima, then Hq sums.
  const std::size_t partial_size = decode::Workspace::rows(Hq, D + 2);
  std::vector<float> partials(splits > 1 ? static_cast<std::size_t>(B) * splits * partial_size : 0);
  const auto store = [&](int b, int h, const float* row, float row_max, float row_sum) {  // normalised head h of batch row b
    thread_local std::vector<float> o;
    o.resize(static_cast<std::size_t>(D));
    const float inv = row_sum > 0 ? 1.0f / row_sum : 0.0f;  // a row that saw no key: zeros
    for (int x = 0; x < D; ++x) o[static_cast<std::size_t>(x)] = row[x] * inv;
    attention_detail::store_row(*plan.out, b, 0, h, o.data());
    if (lse) lse[std::int64_t{b} * Hq + h] = LogSumExp(row_max, row_sum);
  };
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
    decode::Workspace ws(Hq, Hq / plan.group, D, bf16);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t item = 0; item < std::int64_t{B} * splits; ++item) {
      const int b = static_cast<int>(item / splits), split = static_cast<int>(item % splits);
      const std::int64_t first = lo + std::min(key_tiles, per * split) * kKeyTile;
      const std::int64_t last = std::min(hi, lo + std::min(key_tiles, per * (split + 1)) * kKeyTile);
      decode::DecodeKeysOf(plan, b, first, last, ws);
      if (splits == 1) {
        for (int h = 0; h < Hq; ++h) store(b, h, ws.acc + h * D, ws.row_max[h], ws.row_sum[h]);
        continue;
      }
      float* part = partials.data() + static_cast<std::size_t>(item) * partial_size;
      std::copy(ws.acc, ws.acc + decode::Workspace::rows(Hq, D), part);
      std::copy(ws.row_max, ws.row_max + Hq, part + decode::Workspace::rows(Hq, D));
      std::copy(ws.row_sum, ws.row_sum + Hq, part + decode::Workspace::rows(Hq, D + 1));
    }
    if (splits > 1) {
      // The union of the splits' softmaxes: each part rescaled to the largest maximum.
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
      for (std::int64_t bh = 0; bh < std::int64_t{B} * Hq; ++bh) {
        const int b = static_cast<int>(bh / Hq), h = static_cast<int>(bh % Hq);
        const float* parts = partials.data() + static_cast<std::size_t>(b) * splits * partial_size;
        const std::size_t at_max = decode::Workspace::rows(Hq, D) + h, at_sum = at_max + Hq;
        float m = -std::numeric_limits<float>::infinity(), sum = 0;
        for (int sp = 0; sp < splits; ++sp) m = std::max(m, parts[sp * partial_size + at_max]);
        std::fill(ws.tmp, ws.tmp + D, 0.0f);
        for (int sp = 0; m != -std::numeric_limits<float>::infinity() && sp < splits; ++sp) {
          const float* part = parts + sp * partial_size;
          if (part[at_max] == -std::numeric_limits<float>::infinity()) continue;  // this split saw no key
          const float w = std::exp(part[at_max] - m);
          sum += w * part[at_sum];
          for (int x = 0; x < D; ++x) ws.tmp[x] += w * part[h * D + x];
        }
        store(b, h, ws.tmp, m, sum);
      }
    }
  }
}

std::int64_t AttentionDecodeTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
