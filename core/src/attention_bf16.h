// The bf16 path of attention() (posenc/attention_bf16.h), private to the core.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention_plan.h"

namespace posenc::attention_detail {

// Queries per task (a multiple of kRowBlock): twice the f32 kernel's kQueryTile (bf16 query and
// weight tiles take half the bytes). Each key and value tile is read once per query tile (and
// packed there when the call cannot pack ahead), so a taller tile amortises that. Measured in
// posenc_attention_bf16_bench on a loaded 2-core Zen 4 (2 interleaved runs of 8 configurations at
// S = 4096, 1 thread) while each task packed its tiles: rate_vs_f32 1.54-2.02 with 128 rows,
// 1.73-2.85 with 256; with the tiles packed ahead the two sizes were within that host's noise.
inline constexpr int kBf16QueryTile = 256;
static_assert(kBf16QueryTile % kRowBlock == 0, "whole blocks of query rows");

// Runs the plan on the bf16 path and returns true when attention_runs_bf16() says so; false
// (nothing written) otherwise. threads: kernel_threads' count.
bool run_attention_bf16(const Plan& plan, int threads, const AttentionOptions& options);

// Floats of one thread's bf16 tiles (attention_bf16_tiles.h), each region 64-byte aligned.
std::size_t bf16_tile_floats(int D);

// Bytes the bf16 path allocates for a call with these q, k (v taken as k's dtype): the threads'
// tiles, and every key and value tile packed once ahead, [B][Hk][ceil(T / 64)] of bf16 pairs
// (about the bytes of k and v themselves) when that is at most the limit (256 MiB; beyond, each
// task packs the tiles it reads). 0 where the call does not take the path.
std::int64_t bf16_extra_bytes(const RopeTensor& q, const RopeTensor& k, const AttentionParams& params, int threads);

// Tests only: the pack-ahead limit in bytes (0: every task packs its own tiles).
void set_bf16_pack_ahead_limit_for_test(std::int64_t bytes);

}  // namespace posenc::attention_detail
