// Attention with positions computed on the fly: softmax(q k^T * scale + bias + mask) v, with no
// S x T matrix for any scheme (FlashAttention-2's online softmax over key tiles).
//
//   q    [B, S, Hq, D]   views as in rope_apply.h: [B, S, H, D] or [B, H, S, D] storage, any
//   k, v [B, T, Hk, D]   strides, channels contiguous; f32, bf16 or f16 (math in f32)
//   out  [B, S, Hq, D]   written (its own dtype); may not overlap q, k or v
//
// GQA: query head h reads kv head h / (Hq / Hk). Query i sits at key index past + i, past =
// T - S unless set (the queries are the last S keys: prefill, or decode after a KV cache).
//
// Masks, by key index:       key j is visible to query i (index p = past + i) when
//   causal                    j <= p
//   key_padding[b * T + j]    != 0
//   sliding_window W > 0      p - j < W            (Mistral, Gemma; with causal)
//   chunk C > 0               j / C == p / C       (Llama 4's chunked attention)
// A query that sees no key gets zeros (never NaN).
//
// Positions, by position id (PositionIds: explicit ids or index + offset, see rope_apply.h):
//   kNone   NoPE
//   kRope   q and k rotated (any RopeApplyParams: layout, partial, M-RoPE, any schedule) as
//           they are loaded; q and k themselves are not modified. cos/sin are read by position
//           id from a RopeTable (rope_kernels.h: the table the RoPE kernels share), so rows equal
//           rope_apply_reference's bit for bit. xPos: q takes the query's scale and k the key's
//           (xpos.first is not read). channel_offset as rope_rotate's. rotated_heads n: query heads
//           h < n and the kv heads they read, h < n / group (n a multiple of the group; n >= Hq:
//           every head), which with GQA is rope_rotate(k) at n / group, not at n
//   kAlibi  + -slope_h * (qpos - kpos)  (causal), -slope_h * |qpos - kpos| (symmetric)
//   kT5     + table[bucket(kpos - qpos)][h]   (t5_bias.h; added after the scale, as T5 adds
//           its bias to raw q.k: pass scale 1 for T5 models)
//   kDistanceTable  + distance_table[h][column(qpos - kpos)]   (distance_bias.h: Kerple, Sandwich,
//           or a learned distance function evaluated by the caller; [Hq][width] floats, read per
//           tile: never an S x T matrix). Every pair of the call, masked or not, must have
//           |qpos - kpos| <= length - 1 (refused otherwise, naming the distance)
//   kForgetGate     + c[b][h][past + i] - c[b][h][j]   (FoX, forget_gate.h: c, the cumulative
//           log forget gate, [B][Hq][T] floats, dense, by key index; query i reads the c of its
//           own key index past + i, so past + S <= T; position ids are not read). A constant gate
//           gamma (c_t = (t + 1) log gamma) is ALiBi with slope -log gamma
//
// Remapped distances (RoPE only; forward, decode and backward), Delta = qpos - kpos, window w:
//   Delta < w (keys after the query too)   Delta, as without a remap
//   Self-Extend (Jin et al. 2024), G       floor(qpos/G) - floor(kpos/G) + (w - floor(w/G))
//   ReRoPE (Su 2023)                        w
//   leaky ReRoPE, k                         w + (Delta - w) / k
// Dual Chunk Attention (An et al. 2024, "Training-Free Long-Context Scaling of LLMs"; Qwen2.5-1M's
// dual_chunk_attention_config, vLLM's dual_chunk_rope.py), chunk length c = chunk_size -
// local_size, chunks n(p) = floor(p / c), keys at kpos mod c:
//   n(kpos) >= n(qpos) (intra-chunk; a later chunk when not causal)   Delta, as without a remap
//   n(kpos) = n(qpos) - 1 (successive chunk)   min(qpos mod c + c, chunk_size) - kpos mod c
//   n(kpos) <= n(qpos) - 2 (inter-chunk)       min(2c - 1, chunk_size) - kpos mod c
// (the intra-chunk distance qpos mod c - kpos mod c is Delta; vLLM's qc_t clamps the successive
// query at chunk_size, its inter query is qc_t[c - 1]). Chunks are by position id, as vLLM's are
// by token index with positions 0, 1, ...; the softmax scale is the caller's (vLLM multiplies
// Qwen's by its scaling_factor when the config sets original_max_position_embeddings).
// Each far branch factors into a query position and a key position (Self-Extend: floor(qpos/G)
// + w - floor(w/G) and floor(kpos/G); ReRoPE: w and 0; leaky: qpos/k + w - w/k and kpos/k), so
// the kernel rotates a second copy of the query tile and of a key tile at those positions and
// takes, per (query, key), the near or the far score: the two score matrices the papers merge,
// formed only for the tiles that straddle Delta = w (DCA: a second far query, the inter-chunk
// one, with the same far keys; up to three score matrices, for the tiles that straddle a chunk
// edge). G = 1, w beyond every distance, k = 1 or c beyond every position give plain RoPE's bits.
// Leaky ReRoPE's far positions are not integers: their cos/sin are computed once per call,
// (S + T) x rotary/2 sincos into (S + T) x rotary floats. Measured at S = 4096, 8 heads,
// D = 64, causal, 1 thread (posenc_attention_remap_bench): each remap within 0.87-1.10x plain RoPE;
// DCA (c 1024 and 2048) 0.90-1.12x over three runs at load 13-160 on 2 cores (AVX2 target).
// On an Intel Xeon (AVX3 target, idle): 0.99-1.03x at 1 thread, 1.01-1.08x at 2, the backward
// (`posenc_attention_remap_bench 4096 8 64 3 1 1`) 1.15-1.24x.
#pragma once

#include <cstdint>
#include <string>

#include "posenc/alibi.h"
#include "posenc/distance_bias.h"
#include "posenc/rope_apply.h"
#include "posenc/t5_bias.h"
#include "posenc/threads.h"

namespace posenc {

struct AttentionMask {
  bool causal = true;
  std::int64_t past = -1;                      // -1: T - S
  const std::uint8_t* key_padding = nullptr;  // [B, T], 0 = a padding key; null: none
  std::int64_t sliding_window = 0;            // 0: none
  std::int64_t chunk = 0;                     // 0: none
};

enum class AttentionPositions { kNone, kRope, kAlibi, kT5, kDistanceTable, kForgetGate };

POSENC_ENUM_NAMES(AttentionPositions, "positions", {AttentionPositions::kNone, "none"}, {AttentionPositions::kRope, "rope"},
                  {AttentionPositions::kAlibi, "alibi"}, {AttentionPositions::kT5, "t5"},
                  {AttentionPositions::kDistanceTable, "distance-table"}, {AttentionPositions::kForgetGate, "forget-gate"});

enum class PositionRemapKind { kNone, kSelfExtend, kReRope, kLeakyReRope, kDualChunk };

POSENC_ENUM_NAMES(PositionRemapKind, "remap", {PositionRemapKind::kNone, "none"}, {PositionRemapKind::kSelfExtend, "self-extend"},
                  {PositionRemapKind::kReRope, "rerope"}, {PositionRemapKind::kLeakyReRope, "leaky-rerope"},
                  {PositionRemapKind::kDualChunk, "dual-chunk"});

struct PositionRemap {
  PositionRemapKind kind = PositionRemapKind::kNone;
  std::int64_t window = 0;  // w in [0, 2^31-1]: distances below it are kept
  std::int64_t group = 1;   // G >= 1: Self-Extend's group size
  double leak = 0;          // k > 0: leaky ReRoPE's slope divisor beyond w
  // Dual Chunk Attention (window, group and leak unused): 2^31-1 >= chunk_size > local_size > 0
  std::int64_t chunk_size = 0;
  std::int64_t local_size = 0;
};

// The distance the remap gives (query position, key position): the formulas above, in double.
double remapped_distance(const PositionRemap& remap, std::int64_t query_position, std::int64_t key_position);

// Checks a remap's own settings (kind; w in [0, 2^31-1]; G >= 1; k > 0 and finite; DCA's
// chunk_size > local_size >= 1): throws posenc::Error "<who>: remap <kind>: ..." naming the value.
void validate_remap_settings(const PositionRemap& remap, const std::string& who);

// The largest position a far branch rotates at when no position exceeds `largest` (`largest`
// itself without a remap): its angles must stay within kMaxRopeAngle.
double remap_far_bound(const PositionRemap& remap, std::int64_t largest);

struct AttentionParams {
  double scale = 0;  // 0: 1 / sqrt(D)
  AttentionMask mask;
  AttentionPositions positions = AttentionPositions::kNone;
  PositionIds q_positions, k_positions;  // for kRope, kAlibi, kT5, kDistanceTable
  RopeApplyParams rope;                  // kRope (direction +1)
  const double* alibi_slopes = nullptr;  // kAlibi: [Hq]
  AlibiMode alibi_mode = AlibiMode::kCausal;
  const float* t5_table = nullptr;  // kT5: [num_buckets][Hq] (HF's embedding weight)
  T5BucketParams t5;
  DistanceTable distance_table;          // kDistanceTable: [Hq][distance_table.width()]
  const float* gate_cumulative = nullptr;  // kForgetGate: c [B][Hq][T], dense
  PositionRemap remap;  // kRope: remapped (query, key) distances; kNone: plain
};

// threads and RoPE's table (threads.h). Without a table, attention builds one for the call
// (positions 0 .. the call's largest) when that largest position is at most 2 (S + T) + 4096,
// and otherwise computes cos/sin per row: pass a long-lived model's table (a decode step at
// position 100 000 then reads its rows instead of computing them).
struct AttentionOptions : KernelOptions {
  // Optional output for the backward pass (attention_backward.h): per query row the natural log
  // of its softmax denominator, log sum_j exp(scale * q.k_j + bias_j) over the keys it sees,
  // [B, Hq, S] floats, dense. A row that sees no key gets -inf. nullptr: not written.
  float* lse = nullptr;
  // bf16 q, k and v (decode, S = 1: bf16 k or v): q.k and P.V as bf16 products with f32 sums on
  // the CPU's AVX512-BF16 dot products where it has them (attention_bf16.h: which calls, the error
  // bound); false: the f32 kernel (bf16 read into f32), as on a CPU without them.
  bool bf16_dot_products = true;
};

// Checks shapes, views, positions and parameters; throws posenc::Error naming the value.
void validate_attention(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
                        const AttentionParams& params);

// The plain version: every score of a query row in double, then its softmax and weighted sum.
// The reference the tiled kernel is tested against (options.threads is ignored, options.table
// read as attention() reads it; options.lse is written in double, rounded once).
void attention_reference(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
                         const AttentionParams& params, const AttentionOptions& options = {});

// Tiled online softmax (SIMD, Google Highway, dispatched once per call): per (batch, head, tile
// of queries), key tiles in order, skipping tiles the masks hide entirely. Workspace per thread:
// a query tile, a key tile, a value tile and the accumulators, O(tile x D) floats; and when a key
// tile is read more than once (S > 128 or GQA), k rotated and v packed once per call, per key
// tile, as floats, a batch of (batch row, kv head) groups at a time within 12 MiB (none when one
// group's T x D x 2 floats exceed it: src/attention_packed.h); both reported by
// attention_extra_bytes(). Equal to the reference up to float rounding (FMA, vector exp).
void attention(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
               const AttentionParams& params, const AttentionOptions& options = {});

// Bytes attention() allocates beyond q, k, v and out: the per-thread tiles (for bf16 on the bf16
// path, attention_bf16.h, its tiles and the keys and values it packs, v taken as k's dtype), plus for RoPE without
// options.table the cos/sin table it builds, (largest position + 1, rounded up to a power of
// two) x rotary_dim floats. (A table passed in grows in place: its bytes are the caller's.)
std::int64_t attention_extra_bytes(const RopeTensor& q, const RopeTensor& k, const AttentionParams& params,
                                   const KernelOptions& options);

// The SIMD target attention() uses on this machine ("AVX3", "AVX2", ...).
const char* attention_kernel_target();

}  // namespace posenc
