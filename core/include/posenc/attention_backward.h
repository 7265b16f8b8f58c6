// The backward pass of fused attention (attention.h): the gradients of
// out = softmax(q k^T * scale + bias + mask) v w.r.t. q, k, v and, for T5, the bias table,
// without an S x T matrix (FlashAttention-2's backward, Dao 2023, Algorithm 2):
//
//   D_i  = dO_i . O_i                               per query row, once
//   P_ij = exp(scale q_i.k_j + bias_ij - lse_i)     recomputed per tile from the forward's lse;
//                                                   0 where the mask hides key j
//   dV_j = sum_i P_ij dO_i        dP_ij = dO_i . v_j        dS_ij = P_ij (dP_ij - D_i)
//   dq_i = scale sum_j dS_ij k_j  dk_j = scale sum_i dS_ij q_i
//   dtable[bucket(i, j)][h] += dS_ij                (T5 adds its bias after the scale)
//   dtable[h][column(qpos_i - kpos_j)] += dS_ij     (a distance table: the sum over a diagonal)
//   dc[past + i] += sum_j dS_ij, dc[j] -= sum_i dS_ij   (FoX's c; the first sum is 0 but for
//                                                   rounding: softmax ignores a row's constant)
//
// RoPE: q and k are rotated as they load, exactly as the forward does, and dq, dk are rotated
// back by the transpose (direction -1), so they are gradients w.r.t. q and k as given. GQA: the
// dk and dv of a kv head sum over the query heads that read it. A position remap (attention.h:
// Self-Extend, ReRoPE, leaky ReRoPE, DCA): each pair's score is q rotated at its branch's query
// position against k at its branch's key position, so dq_i = sum over branches R_q^T (scale
// sum_{j in branch} dS_ij k_j rotated), and dk_j likewise with the near and far key rotations.
// Measured at S = 2048, 8 heads, D = 64, causal, 1 thread (posenc_attention_remap_bench 2048 8 64
// 5 1 1): each remap's backward 1.09-1.22x plain RoPE's.
#pragma once

#include <cstdint>

#include "posenc/attention.h"

namespace posenc {

// What the forward saw and produced, and the gradient of the loss w.r.t. its output. Views as in
// attention.h; float32 only (math in f32; other dtypes are an error naming them).
struct AttentionBackwardInputs {
  RopeTensor q, k, v;   // q [B, S, Hq, D], k, v [B, T, Hk, D]: the forward's inputs
  RopeTensor out;       // [B, S, Hq, D]: the forward's output
  RopeTensor dout;      // [B, S, Hq, D]: dLoss/dout
  const float* lse = nullptr;  // [B, Hq, S]: AttentionOptions::lse of the same forward
};

// Where the gradients go: float32 views, overwritten (none may overlap an input or another).
struct AttentionGradients {
  RopeTensor dq;                   // [B, S, Hq, D]
  RopeTensor dk, dv;               // [B, T, Hk, D]
  float* t5_table_grad = nullptr;  // kT5 only, optional: [num_buckets][Hq], ADDED to (as autograd
                                   // accumulates), in a fixed order whatever the thread count
  // kDistanceTable only, optional: [Hq][distance_table.width()], ADDED to, in a fixed order.
  float* distance_table_grad = nullptr;
  // kForgetGate only, optional: [B][Hq][T] as c, ADDED to, in a fixed order.
  float* gate_cumulative_grad = nullptr;
};

// Checks everything attention() checks plus the gradients' shapes and dtypes; throws
// posenc::Error naming the value.
void validate_attention_backward(const AttentionBackwardInputs& in, const AttentionGradients& grads,
                                 const AttentionParams& params);

// The plain version, in double: one query row at a time, its scores and softmax recomputed in
// full (out and lse are checked but not read: D_i = sum_j P_ij dP_ij, the same quantity).
void attention_backward_reference(const AttentionBackwardInputs& in, const AttentionGradients& grads,
                                  const AttentionParams& params);

// Tiled (SIMD, Google Highway, dispatched once per call), deterministic, no atomics: one parallel
// pass over (batch, kv head, key tile) writes dk and dv, one over (batch, query head, query tile)
// writes dq and the T5 table's per-task partial sums, which are then added in task order. Each
// pass recomputes P for its tiles and skips tiles the masks hide entirely. Workspace: O(threads x
// tile x D) floats, plus D_i ([B, Hq, S] floats); when a tile is read more than once (S > 128
// or GQA) and all five fit 128 MiB, k and v packed per key tile, rotated, in three float layouts
// (3 x k's elements), and q (rotated, times scale) and dout as float rows (2 x q's elements;
// src/attention_packed.h) and for T5 the partials (query tiles x B x Hq x
// num_buckets doubles). A distance table's gradient: pass Q runs per (query head, lane of every
// kTableLanes-th query tile), each lane summing into its own row of Hq x kTableLanes x width
// doubles, added in lane order. FoX's c: pass K's column sums and pass Q's row sums ([B, Hq, T]
// and [B, Hq, S] doubles), added after. options: threads and RoPE's table, as attention() takes them (pass the
// forward's table: the rows it read are the rows the backward reads).
void attention_backward(const AttentionBackwardInputs& in, const AttentionGradients& grads, const AttentionParams& params,
                        const KernelOptions& options = {});

}  // namespace posenc
