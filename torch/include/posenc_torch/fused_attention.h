// Fused attention for libtorch, differentiable: a torch::autograd::Function over the core's
// attention() (forward, which also writes each query row's log-sum-exp) and attention_backward()
// (FlashAttention-2's backward from that lse), so training never forms the [B, H, S, T] scores.
//
//   q     [B, Hq, S, D]   float32, any strides with a contiguous last dimension
//   k, v  [B, Hk, T, D]   Hq a multiple of Hk (GQA)
//   out   [B, S, Hq, D]   contiguous (reshape to [B, S, Hq * D] is free)
//
// Gradients reach q, k, v and, for T5, the bias table tensor. Saved for backward: q, k, v, out
// and lse ([B, Hq, S] floats), positions and padding: O(B x S x D), never O(S x T).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "posenc/attention.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {

// Everything but the tensors: scale, masks and the position scheme (attention.h).
struct FusedAttentionSpec {
  double scale = 0;  // 0: 1 / sqrt(D)
  bool causal = true;
  std::int64_t past = -1;  // -1: T - S
  std::int64_t sliding_window = 0, chunk = 0;
  AttentionPositions positions = AttentionPositions::kNone;
  RopeSpec rope;                     // kRope (1-D positions)
  std::vector<double> alibi_slopes;  // kAlibi: [Hq]
  AlibiMode alibi_mode = AlibiMode::kCausal;
  T5BucketParams t5;  // kT5
};

struct FusedAttentionTensors {
  torch::Tensor q, k, v;
  torch::Tensor q_positions, k_positions;  // int64 [B, S], [B, T]: kRope, kAlibi, kT5
  torch::Tensor key_padding;               // [B, T], nonzero = a real key; undefined: none
  torch::Tensor t5_table;                  // kT5: float32 [num_buckets, Hq] (differentiable)
};

// softmax(q k^T * scale + bias + mask) v with positions applied inside; differentiable.
// Errors (posenc::Error) name what is wrong: a dtype other than float32, a missing table, ...
torch::Tensor fused_attention(const FusedAttentionTensors& tensors, const FusedAttentionSpec& spec);

}  // namespace posenc::torch_layer
