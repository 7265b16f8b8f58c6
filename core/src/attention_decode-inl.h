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
//           one key at a time (between ScoreKeyHeads' blocks of 4 query heads, or AccumulateKey)
//           or register-blocked over 4 keys and 4, 2 or 1 heads
//           (AccumulateRows; over the rest of a tile where the next has fewer keys or none),
//           interleaved with the next tile's scores (DecodeKeys' pipeline)
// The tile products are in attention_decode_tiles-inl.h. The memory is read by the hardware's
// stream prefetchers and, where measured to help, L2 prefetches (attention_decode_prefetch.h): K and V are two
// streams a tile apart, advancing a key (or four) at a time.
// History (`posenc bench attention --decode`, T = 32768, 8 query heads, one thread): on a Zen 4
// EPYC, one kv head per work item read K and V at 0.05 of the same-run streaming read; all kv
// heads per key row 0.15; four-key sums and L2 prefetches 0.48; a copy of each value tile (128 KiB
// at 8 kv heads) and L1 prefetches had held it to 0.19-0.25, values read in place 0.43 / 0.54 (8 / 2
// kv heads). That code formed a tile's scores (K read, K and V prefetched into L2 16 KiB ahead),
// then its P.V from L2, during which memory was idle: on a Zen 3 EPYC (AVX2) a step over 8 f32 kv
// heads took 390-400 ns a key cold against 180-200 for a plain pass over K and V, 290 of it with
// the P.V skipped. A plain pass reading K and V key by key, interleaved (2 KiB apart), reads at
// 1.0-1.2x the one-stream read; K's tile then V's tile (128 KiB each) 0.85-0.95x. The pipeline
// (tile t + 1's scores, each group followed by tile t's P.V of as many keys), Zen 3, ns a key cold,
// three interleaved runs, 1 / 2 threads: f32 8 kv 396 -> 272 / 219 -> 163, f32 2 kv 124 -> 117 /
// 102 -> 78, bf16 8 kv 170 -> 164 / 106 -> 101, bf16 2 kv 65 -> 67 / 33 -> 36 (arithmetic-bound).
// With it, software prefetches were slower on the by-key path (f32 8 kv: K's and V's 16 KiB ahead
// 376, V's alone 367, K's alone 277) and V's faster on the by-head path; P.V in groups of 8-32
// keys on the by-head path was slower cold. With D a constant (DecodeKeysOfWidth) the by-head V
// prefetch turned slower too; a burst of the group's own rows is faster (attention_decode_prefetch.h).
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
#include <type_traits>
#include <vector>

#include "attention_bf16_tiles.h"
#include "attention_decode.h"
#include "attention_decode_bf16.h"
#include "attention_decode_prefetch.h"
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
using attention_detail::decode_prefetch::prefetch_keys;
using attention_detail::decode_prefetch::PrefetchKeys;

// One thread's buffers (attention_detail::decode_workspace_floats) for Hq query heads over Hk kv
// heads: rows in query-head order, so kv head hk's G rows start at row hk G. acc's rows are D
// floats apart, or value_width(D) in pair order on the bf16 value path; Qp: Q as bf16 pairs.
struct Workspace {
  Workspace(int Hq, int Hk, int D, attention_detail::DecodeBf16 products)
      : buffer(hwy::AllocateAligned<float>(attention_detail::decode_workspace_floats(Hq, Hk, D))), Q(buffer.get()),
        acc(Q + rows(Hq, D)), Sc(acc + rows(Hq, decode_bf16::value_width(D))), Sc_prev(Sc + rows(Hq, kKeyTile)),
        row_max(Sc_prev + rows(Hq, kKeyTile)), row_sum(row_max + Hq),
        key(row_sum + Hq), tmp(key + rows(std::max(4, Hk), D)), Qp(reinterpret_cast<std::uint32_t*>(tmp + D)), bf16(products),
        correction(static_cast<std::size_t>(Hq)) {}
  static std::size_t rows(int n, int width) { return static_cast<std::size_t>(n) * static_cast<std::size_t>(width); }
  hwy::AlignedFreeUniquePtr<float[]> buffer;
  // Sc, Sc_prev: two score tiles (they swap); key: max(4, Hk) rotated key rows.
  float *Q, *acc, *Sc, *Sc_prev, *row_max, *row_sum, *key, *tmp;
  std::uint32_t* Qp;
  attention_detail::DecodeBf16 bf16;
  std::vector<float> correction;  // SoftmaxTile's factor per head
  std::vector<std::int64_t> positions = std::vector<std::int64_t>(1 + kKeyTile);  // add_bias_tile's scratch
  std::vector<float> distance = std::vector<float>(kKeyTile);                     // AddAlibiRows' scratch
  std::vector<int> lut;
};

// Whether the scores are formed key by key rather than four keys per kv head (ScoreKeys' two
// paths): a token-major K with several kv heads, groups of fewer than 4 query heads
// (a group of 4 or more fills ByHead's 4 x 4 register block, which ByKey's blocks of 4 heads do
// not), and at least one block of 4 query heads. Measured on an idle Zen 4 EPYC, f32, T = 32768,
// 8 query heads, one thread, GB/s of K and V: 8 kv heads, by head 12.3-13.8, by key 15.9-19.0;
// 2 kv heads, by head 17.0-18.8, by key 11.4-14.8. Reading the values key by key too (every
// query head's accumulator in memory) was slower in both then, before the pipeline; with it, the
// by-key path sums the values key by key (between ScoreKeyHeads' blocks of query heads).
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
inline void AccumulateBf16(const attention_detail::Plan& plan, int b, std::int64_t j0, int cols, const float* P, Workspace& ws) {
#if POSENC_ATTENTION_BF16_X86
  const int G = plan.group, D = plan.D;
  const std::uint16_t* v = static_cast<const std::uint16_t*>(plan.v->data) + attention_detail::offset_of(*plan.v, b, static_cast<int>(j0), 0);
  if (G == 1) return decode_bf16::accumulate_heads(P, v, plan.v->token_stride, plan.v->head_stride, plan.Hq, cols, D, ws.acc);
  for (int hk = 0; hk < plan.Hq / G; ++hk)
    decode_bf16::accumulate_rows(P + Workspace::rows(hk * G, kKeyTile), v + hk * plan.v->head_stride, plan.v->token_stride, G, cols, D,
                                 ws.acc + Workspace::rows(hk * G, decode_bf16::value_width(D)));
#endif
}
// Q (scaled, rotated) rounded to bf16 pairs once per work item; acc back to channel order.
inline void PackQueryBf16(int Hq, int D, Workspace& ws) {
#if POSENC_ATTENTION_BF16_X86
  const int words = decode_bf16::query_words(D);
  for (int h = 0; h < Hq; ++h) {  // row by row: one fill of Hq rows read to GCC as possibly negative (a false -Wstringop-overflow)
    std::uint32_t* row = ws.Qp + Workspace::rows(h, words);
    std::fill(row, row + words, 0u);
    attention_detail::bf16::pack_row(ws.Q + h * D, D, row);
  }
#endif
}
inline void UnpermuteBf16(int Hq, int D, Workspace& ws) {
#if POSENC_ATTENTION_BF16_X86
  decode_bf16::unpermute_rows(ws.acc, Hq, D);
#endif
}

// Column c .. c + count - 1 of the score tile Sc (keys j0 + c ..; count 1, or 4 on the by-head
// path) for every query head: by key, each key's kv head rows in storage order (ScoreKeyHeads);
// by head, each kv head's rows dotted with its G query heads (ScoreFourKeys, ScoreKey). RoPE:
// the rows rotated at their positions into ws.key first. By key, values' P.V (the last tile's key
// c) is summed between the blocks of query heads (ScoreKeyHeads).
template <typename T, typename TV>
HWY_INLINE void ScoreKeys(const attention_detail::Plan& plan, int D, int b, std::int64_t j0, int c, int count, bool by_key, Workspace& ws,
                          float* Sc, const KeyValues<TV>& values) {
  const int G = plan.group, Hq = plan.Hq;
  const int j = static_cast<int>(j0 + c);
  const bool rope = plan.p->positions == AttentionPositions::kRope;
  const T* k_data = static_cast<const T*>(plan.k->data);
  if (by_key) {
    if (rope) {
      for (int hk = 0; hk < Hq / G; ++hk) plan.load_key(b, j, hk, ws.key + hk * D, ws.tmp);
      ScoreKeyHeads(ws.Q, Hq, G, D, static_cast<const float*>(ws.key), D, Sc + c, values);
    } else if (ws.bf16.scores) {  // values are not summed here: DecodeKeys gives none (fuse)
      ScoreKeyHeadsBf16(plan, b, j, ws, Sc + c);
    } else {
      ScoreKeyHeads(ws.Q, Hq, G, D, k_data + attention_detail::offset_of(*plan.k, b, j, 0), plan.k->head_stride, Sc + c, values);
    }
    return;
  }
  if (ws.bf16.scores) return ScoreKeysBf16(plan, b, j, count, ws, Sc + c);
  for (int hk = 0; hk < Hq / G; ++hk) {
    float* column = Sc + Workspace::rows(hk * G, kKeyTile) + c;
    const float* Q = ws.Q + Workspace::rows(hk * G, D);
    const float* rotated[4];
    const T* stored[4];
    for (int k = 0; k < count; ++k) {
      if (rope) plan.load_key(b, j + k, hk, ws.key + k * D, ws.tmp);
      rotated[k] = ws.key + k * D;
      stored[k] = k_data + attention_detail::offset_of(*plan.k, b, j + k, hk);
    }
    if (rope && count == 4) ScoreFourKeys(Q, G, D, rotated, column);
    else if (rope) ScoreKey(Q, G, D, rotated[0], column);
    else if (count == 4) ScoreFourKeys(Q, G, D, stored, column);
    else ScoreKey(Q, G, D, stored[0], column);
  }
}

// acc[h] += sum_c P[h][c] v_c for keys j0 + c .. j0 + c + count - 1, every kv head (P: a score tile
// after its softmax; f32 products, the bf16 value path does whole tiles in AccumulateBf16).
template <typename T>
HWY_INLINE void AccumulateKeys(const attention_detail::Plan& plan, int D, int b, std::int64_t j0, int c, int count, const float* P,
                               Workspace& ws) {
  const int G = plan.group;
  const T* v = static_cast<const T*>(plan.v->data) + attention_detail::offset_of(*plan.v, b, static_cast<int>(j0 + c), 0);
  if (count == 1) return AccumulateKey(P + c, v, plan.v->head_stride, plan.Hq, G, D, ws.acc);
  for (int hk = 0; hk < plan.Hq / G; ++hk)
    AccumulateRows(P + Workspace::rows(hk * G, kKeyTile) + c, v + hk * plan.v->head_stride, plan.v->token_stride, G, count, D,
                   ws.acc + Workspace::rows(hk * G, D));
}

// Position terms, masks and the online softmax of the score tile Sc (keys j0 .. j0 + cols - 1);
// the accumulators rescaled by each head's correction.
inline void FinishScores(const attention_detail::Plan& plan, int b, std::int64_t j0, int cols, float* Sc, Workspace& ws) {
  const int Hq = plan.Hq;
  const bool alibi = plan.p->positions == AttentionPositions::kAlibi;
  const int width = ws.bf16.values ? decode_bf16::value_width(plan.D) : plan.D;  // of acc's rows
  if (alibi) AddAlibiRows(plan, b, j0, cols, Sc, ws.positions.data(), ws.distance.data());
  for (int h = 0; h < Hq; ++h) {
    float* row = Sc + Workspace::rows(h, kKeyTile);
    if (plan.has_bias() && !alibi) plan.add_bias_tile(b, h, 0, 1, j0, cols, row, kKeyTile, ws.positions.data(), ws.lut);
    plan.mask_tile(b, 0, 1, j0, cols, row);
  }
  SoftmaxTile(Sc, Hq, ws.row_max, ws.row_sum, ws.correction.data());
  for (int h = 0; h < Hq; ++h)
    if (ws.correction[h] != 1.0f)
      for (int x = 0; x < width; ++x) ws.acc[h * width + x] *= ws.correction[h];
}

// Keys [lo, hi) of batch row b against every query head: leaves in ws the heads' unnormalised
// accumulators, running maxima and sums. TK, TV: the storage of k and of v (each float, bf16 or
// f16; they may differ).
// Software-pipelined by one tile: tile t's scores are formed in groups of 1 or 4 keys, each group
// followed by the P.V products of as many keys of tile t - 1 (softmax done), so K and V are read
// as two streams advancing together, a tile apart, and the memory is never idle while the values
// are summed (why: the history above). The floating-point operations on acc come in the order
// they did before the pipeline, except where a row's block sums keys in pairs (AccumulateBlock's
// even and odd sets for a single row): those groups are now 4 keys (or a tile's rest), not the
// tile, and a single key (AccumulateKey: inside ScoreKeyHeads, through KeyValues, by key with
// one query head per kv head and f32 scores; else after the scores) sums in order. The bf16 value products (AVX512-BF16) take the last
// tile whole, after this tile's scores.
// kWidth: D as a constant (0: plan.D), so the products' loops over the channels unroll and their
// tails vanish where D is a common head width (DecodeKeysOfWidth).
template <typename TK, typename TV, int kWidth>
void DecodeKeys(const attention_detail::Plan& plan, int b, std::int64_t lo, std::int64_t hi, Workspace& ws) {
  const int D = kWidth ? kWidth : plan.D, Hq = plan.Hq;
  HWY_DASSERT(kWidth == 0 || kWidth == plan.D);
  const bool by_key = reads_by_key(*plan.k, Hq, plan.group);
  // P.V inside ScoreKeyHeads (KeyValues) where a kv head serves one query head: measured faster
  // there (tiles-inl.h); over 4 kv heads (groups of 2, Zen 3, cold, ns a key) bf16 119 -> 136 and
  // f32 even, also with each value vector widened once for the group (152): not there.
  const bool fuse = by_key && plan.group == 1 && !ws.bf16.scores && !ws.bf16.values;
  const TV* v_data = static_cast<const TV*>(plan.v->data);
  const std::int64_t ahead = prefetch_keys(*plan.k, *plan.v);  // the bf16 value path's prefetch (kPrefetchBytes)
  const bool burst = !by_key && !ws.bf16.values;  // the by-head path's prefetch (attention_decode_prefetch.h)
  for (int h = 0; h < Hq; ++h) {
    plan.load_query(b, 0, h, ws.Q + h * D, ws.tmp);
    for (int x = 0; x < D; ++x) ws.Q[h * D + x] *= plan.scale;
  }
  if (ws.bf16.scores) PackQueryBf16(Hq, D, ws);
  std::fill(ws.acc, ws.acc + Workspace::rows(Hq, ws.bf16.values ? decode_bf16::value_width(D) : D), 0.0f);
  std::fill(ws.row_max, ws.row_max + Hq, -std::numeric_limits<float>::infinity());
  std::fill(ws.row_sum, ws.row_sum + Hq, 0.0f);
  float *Sc = ws.Sc, *P = ws.Sc_prev;  // this tile's scores, the last tile's weights
  int pending = 0;                     // keys of the tile before j0 whose P.V is still to do
  for (std::int64_t j0 = lo;; j0 += kKeyTile) {
    const int cols = static_cast<int>(std::clamp<std::int64_t>(hi - j0, 0, kKeyTile));
    for (int c = 0; c < std::max(cols, pending);) {
      const bool four = !by_key && kFourKeys && c + 4 <= cols;
      const int n = c < cols ? (four ? 4 : 1) : pending - c;  // past this tile's keys: the rest of the last's
      const int ahead_keys = static_cast<int>(std::clamp<std::int64_t>(hi - (j0 + c + ahead), 0, n));  // before the cache's end
      if (c < cols && ws.bf16.values && ahead_keys > 0) {  // K's and V's rows ahead of the key scored
        PrefetchKeys(*plan.k, b, j0 + c + ahead, ahead_keys);
        PrefetchKeys(*plan.v, b, j0 + c + ahead, ahead_keys);
      }
      if (burst && c < cols) PrefetchKeys(*plan.k, b, j0 + c, n);  // this group's K rows, then the last tile's V rows of as many keys
      if (burst && c < pending) PrefetchKeys(*plan.v, b, j0 - kKeyTile + c, std::min(n, pending - c));
      KeyValues<TV> values;  // fuse: the last tile's key c is summed between the heads' scores
      if (fuse && c < cols && c < pending) {
        const int j = static_cast<int>(j0 - kKeyTile + c);
        values = {P + c, v_data + attention_detail::offset_of(*plan.v, b, j, 0), plan.v->head_stride, ws.acc};
      }
      if (c < cols) ScoreKeys<TK>(plan, D, b, j0, c, n, by_key, ws, Sc, values);
      if (c < pending && !ws.bf16.values && !values.v) AccumulateKeys<TV>(plan, D, b, j0 - kKeyTile, c, std::min(n, pending - c), P, ws);
      c += n;
    }
    if (pending && ws.bf16.values) AccumulateBf16(plan, b, j0 - kKeyTile, pending, P, ws);
    if (cols == 0) break;
    FinishScores(plan, b, j0, cols, Sc, ws);
    std::swap(Sc, P);
    pending = cols;
  }
  if (ws.bf16.values) UnpermuteBf16(Hq, D, ws);
}

// DecodeKeys for plan's K and V dtypes; D a constant where K and V share a dtype, D is 64 or
// 128 and the target is AVX2 or wider (the measured ones; elsewhere it would only lengthen the
// build). Measured with ScoreKeyHeads' counted kv heads and AccumulateKey's hoisted weight (Zen 3
// EPYC, AVX2, 8 query heads, one thread, ns a key; T = 1024 in L3 / T = 32768 cold, three
// interleaved runs): f32 over 8 kv heads 153 -> 105 / 237 -> 202, bf16 135 -> 83 / 145 -> 110;
// over 2 kv heads f32 74 -> 65 / 100 -> 102, bf16 63 -> 58 / 70 -> 66.
template <typename TK, typename TV>
void DecodeKeysOfWidth(const attention_detail::Plan& plan, int b, std::int64_t lo, std::int64_t hi, Workspace& ws) {
  if constexpr (std::is_same_v<TK, TV> && HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) {
    if (plan.D == 64) return DecodeKeys<TK, TV, 64>(plan, b, lo, hi, ws);
    if (plan.D == 128) return DecodeKeys<TK, TV, 128>(plan, b, lo, hi, ws);
  }
  DecodeKeys<TK, TV, 0>(plan, b, lo, hi, ws);
}
template <typename TK>
void DecodeKeysWithKeys(const attention_detail::Plan& plan, int b, std::int64_t lo, std::int64_t hi, Workspace& ws) {
  switch (plan.v->dtype) {
    case DType::kF32: return DecodeKeysOfWidth<TK, float>(plan, b, lo, hi, ws);
    case DType::kBF16: return DecodeKeysOfWidth<TK, hwy::bfloat16_t>(plan, b, lo, hi, ws);
    case DType::kF16: return DecodeKeysOfWidth<TK, hwy::float16_t>(plan, b, lo, hi, ws);
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
