// Decode attention: one query per sequence (S = 1) over a long KV cache, private to the core.
//
// The general kernel (attention_kernels-inl.h) works per (batch, query head, query tile): with
// S = 1 each task is one query row, and under GQA every query head of a group reads its kv
// head's K and V again. The decode path instead takes, per work item (batch row b, a run of
// whole key tiles), every head at once: each key's rows of all kv heads are read in storage
// order (one stream through a token-major cache) and each row is dotted with all the query heads
// it serves, so K and V are read from memory once (bf16/f16 widened in registers); each value
// row is widened once and accumulated into the rows of the query heads its kv head serves. Runs of keys go to
// different threads and their partial softmaxes (running maximum, sum, unnormalised
// accumulator) are merged afterwards (Flash-Decoding: Dao, Haziza, Massa, Sizov 2023,
// https://crfm.stanford.edu/2023/10/12/flashdecoding.html; the merge is the online softmax of
// Milakov & Gimelshein 2018).
//
// Every mask and position term of attention.h is supported (through Plan's scalar helpers:
// mask_tile, add_bias_tile, load_query/load_key for RoPE); a position remap (Self-Extend,
// ReRoPE) is not: attention() keeps the general kernel for it, and for S > 1.
#pragma once

#include <cstdint>

#include "attention_plan.h"

namespace posenc::attention_detail {

// Whether attention() takes the decode path: one query row per sequence and no position remap.
bool decode_applies(const RopeTensor& q, const AttentionParams& params);

// How many runs of keys each batch row is split into for `threads` threads and
// `key_tiles` tiles of kKeyTile keys: 1 on one thread; else enough items for about
// kDecodeItemsPerThread per thread (dynamic scheduling evens out a core shared with other
// work), each run at least kDecodeMinTiles tiles so the merge stays negligible.
inline constexpr int kDecodeItemsPerThread = 4, kDecodeMinTiles = 8;
int decode_splits(std::int64_t sequences, std::int64_t key_tiles, int threads);

// Floats of one thread's decode workspace for query_heads over kv_heads of head_dim D: the query
// rows, the accumulators (rows of D rounded up to 32: the bf16 value path's pair order,
// attention_decode_bf16.h), the query rows as bf16 pairs, two score tiles [query_heads][kKeyTile] (the pipeline's), row
// maximum and sum, max(4, kv_heads) rotated key rows (four keys of one kv head, or one key of
// every kv head) and a row of scratch (values are read where they lie in the cache, not copied).
std::size_t decode_workspace_floats(int query_heads, int kv_heads, int D);

// Bytes the decode path allocates beyond q, k, v and out (attention_extra_bytes): the workspace
// per thread and, when the keys are split, the partial softmaxes (batch x splits x Hq rows).
std::int64_t decode_extra_bytes(const RopeTensor& q, const RopeTensor& k, int threads);

// Which of decode's products run on the CPU's bf16 dot products (attention_decode_bf16.h), with
// AttentionOptions::bf16_dot_products on a CPU where attention_bf16_available(): q.k where K is
// stored bf16 and not rotated per key (RoPE rotates each key in f32; those scores stay f32), q
// then scaled in f32 and rounded to bf16 once per step; P.v where V is stored bf16, each weight P
// rounded to bf16. The error contract is the bf16 prefill's (posenc/attention_bf16.h).
struct DecodeBf16 {
  bool scores = false, values = false;
};
DecodeBf16 decode_bf16_products(const RopeTensor& k, const RopeTensor& v, const AttentionParams& params, const AttentionOptions& options);

// The decode path (plan from make_plan, decode_applies true): out and, when lse is not null,
// each query row's log-sum-exp, as attention() documents.
void attention_decode(const Plan& plan, int threads, float* lse, DecodeBf16 bf16);

}  // namespace posenc::attention_detail
