// Decode attention's AVX512-BF16 products (attention_decode-inl.h calls them; compiled for the
// extension by attribute in attention_decode_bf16.cc, as attention_bf16_tiles.cc is): call them
// only where attention_bf16_available(), for operands stored bf16 (attention_decode.h,
// DecodeBf16). Everything else of decode (masks, position terms, the online softmax, the split
// merge) stays f32 code per Highway target.
//
// Layouts (uint32 = two bf16, the low half first: VDPBF16PS's pairs):
//   Qp   [rows][query_words(D)]  each query row scaled (and rotated) in f32, then rounded to bf16
//                                pairs (bf16::pack_row), zero past D
//   keys stored bf16 rows of D channels, read in place (their channel pairs are VDPBF16PS's)
//   acc  [rows][value_width(D)]  f32 sums of P.V in pair order: a 32-channel block of two keys'
//                                rows interleaved by VPUNPCKLWD / VPUNPCKHWD holds channels
//                                8L .. 8L + 3 of each 128-bit lane L in the first 16 floats and
//                                8L + 4 .. 8L + 7 in the next 16; unpermute_rows restores
//                                channel order once per work item
#pragma once

#include <cstdint>

namespace posenc::attention_detail::decode_bf16 {

// Words of one query row: channel pairs rounded up to 8 (one 256-bit vector of 16 bf16).
inline int query_words(int D) { return ((D + 1) / 2 + 7) / 8 * 8; }
// Floats of one accumulator row: D rounded up to 32 (one 512-bit vector of 32 bf16 channels).
inline int value_width(int D) { return (D + 31) / 32 * 32; }

// column[(hk G + r) kKeyTile + c] = Qp[hk G + r] . k(c, hk) for c < count (4 or 1), r < G and
// every kv head hk < Hk: key c's row of kv head hk at key + c token_stride + hk head_stride (bf16
// units), against the kv head's G query heads. One call for every kv head of a block of keys:
// a call per kv head, its row addresses formed by the caller from the tensor's strides, took 28.0
// ns a key at 8 query heads over 2 kv heads with K and V in L2 (Zen 4, one thread), this 26.2;
// from memory both read at the same rate. f32 sums of exact bf16 products.
void score_keys(const std::uint32_t* Qp, int Hk, int G, int D, const std::uint16_t* key, std::int64_t token_stride, std::int64_t head_stride,
                int count, float* column);

// column[h kKeyTile] = Qp[h] . key_{h / G} for every query head h < Hq: one key's rows, kv head hk
// at key + hk head_stride (bf16 units), read key by key in storage order (reads_by_key, G < 4).
// Four keys a call (blocks of 4 heads x 4 keys, 16 sums, as score_keys) took the step at 8 query
// heads over 8 kv heads from 74 to 60 ns a key with K and V in L2, but from memory from 120 to
// 200-220 (Zen 4, one thread): not taken. 512-bit products in score_keys, their sums halved to
// 256 bits before the fold, were slower in L2 (28 -> 30 ns a key at 2 kv heads).
void score_key_heads(const std::uint32_t* Qp, int Hq, int G, int D, const std::uint16_t* key, std::int64_t head_stride, float* column);

// acc[r][:] += sum_{c < cols} P[r][c] v_c for r < rows (P [rows][kKeyTile] f32 weights, 0 past
// cols; acc in pair order): v_c = V + c ld (bf16 units), one kv head's rows read in place, two
// keys' rows interleaved into channel pairs in registers; P rounded to bf16 pairs of keys.
void accumulate_rows(const float* P, const std::uint16_t* V, std::int64_t ld, int rows, int cols, int D, float* acc);

// acc[h][:] += sum_{c < cols} P[h][c] v_{c,h} for h < heads, groups of 1 (one query head per kv
// head, P and acc as accumulate_rows'): v_{c,h} = V + c ld + h head_stride (bf16 units), four
// kv heads' rows of each key read together: at 8 query heads over 8 kv heads (Zen 4, one thread)
// 74.7 -> 66.0 ns a key in L2, against accumulate_rows per kv head; from memory within the shared
// host's noise (122 -> 115 in one set of interleaved runs, 113.5 -> 115.9 in another).
void accumulate_heads(const float* P, const std::uint16_t* V, std::int64_t ld, std::int64_t head_stride, int heads, int cols, int D, float* acc);

// acc's rows from pair order at row stride value_width(D) to channel order at row stride D, in
// place (each block is read before anything at or past it is written).
void unpermute_rows(float* acc, int rows, int D);

}  // namespace posenc::attention_detail::decode_bf16
