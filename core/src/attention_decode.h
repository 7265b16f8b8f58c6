// Decode attention: one query per sequence (S = 1) over a long KV cache, private to the core.
//
// The general kernel (attention_kernels-inl.h) works per (batch, query head, query tile): with
// S = 1 each task is one query row, and under GQA every query head of a group reads its kv
// head's K and V again. The decode path instead takes, per work item (batch row b, kv head hk,
// a run of whole key tiles), all `group` query heads that share hk together, so K and V are
// streamed from memory once per kv head: a key row is loaded (bf16/f16 widened in registers)
// once and dotted with every query head of the group, and a value tile is widened once and
// accumulated into every head's row. Runs of keys go to different threads and their partial
// softmaxes (running maximum, sum, unnormalised accumulator) are merged afterwards
// (Flash-Decoding: Dao, Haziza, Massa, Sizov 2023, https://crfm.stanford.edu/2023/10/12/flashdecoding.html;
// the merge is the online softmax of Milakov & Gimelshein 2018).
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

// How many runs of keys each (batch row, kv head) is split into for `threads` threads and
// `key_tiles` tiles of kKeyTile keys: 1 on one thread; else enough items for about
// kDecodeItemsPerThread per thread (dynamic scheduling evens out a core shared with other
// work), each run at least kDecodeMinTiles tiles so the merge stays negligible.
inline constexpr int kDecodeItemsPerThread = 4, kDecodeMinTiles = 8;
int decode_splits(std::int64_t sequences_x_kv_heads, std::int64_t key_tiles, int threads);

// Floats of one thread's decode workspace for `group` query heads of head_dim D: the query rows
// and accumulators (padded to kRowBlock rows), scores [padded rows][kKeyTile], the value tile
// [kKeyTile][D], row maximum and sum, and two rows of scratch.
std::size_t decode_workspace_floats(int group, int D);

// Bytes the decode path allocates beyond q, k, v and out (attention_extra_bytes): the workspace
// per thread and, when the keys are split, the partial softmaxes (kv heads x splits x G rows).
std::int64_t decode_extra_bytes(const RopeTensor& q, const RopeTensor& k, int threads);

// The decode path (plan from make_plan, decode_applies true): out and, when lse is not null,
// each query row's log-sum-exp, as attention() documents.
void attention_decode(const Plan& plan, int threads, float* lse);

}  // namespace posenc::attention_detail
