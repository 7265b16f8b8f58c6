// Fused attention for libtorch, differentiable: the posenc::attention operator (attention_op.h),
// whose CPU kernel is the core's attention() (forward, which also writes each query row's
// log-sum-exp) and whose Autograd kernel's backward is attention_backward() (FlashAttention-2's
// backward from that lse), so training never forms the [B, H, S, T] scores. Python's
// posenc.attention runs the same operator.
//
//   q     [B, Hq, S, D]   float32, any strides with a contiguous last dimension
//   k, v  [B, Hk, T, D]   Hq a multiple of Hk (GQA)
//   out   [B, S, Hq, D]   contiguous (reshape to [B, S, Hq * D] is free)
//
// Gradients reach q, k, v and the bias input: T5's table, a distance table or FoX's c. Saved for backward: q, k, v, out
// and lse ([B, Hq, S] floats) and the positions and padding tensors: O(B x S x D), never O(S x T).
// Tensors on another device (a GPU's) take the operator's torch-native path (attention_op.h:
// attention_native, the same attention in torch operations, autograd's backward).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "posenc/attention.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {

// Everything but q, k, v and T5's table: the core's AttentionParams and the storage its pointers
// refer to. Built once and shared (a TransformerLM builds one per forward, which every layer
// reads; the operator saves its tensors for the backward); not copyable, as params() points into it.
class AttentionSpec {
 public:
  // What AttentionParams' pointers refer to.
  struct Data {
    torch::Tensor q_positions, k_positions;  // integer [B or 1, S], [B or 1, T]: kRope, kAlibi, kT5
    torch::Tensor key_padding;               // [B, T], nonzero = a real key; undefined: none
    RopeSpec rope;                           // kRope (its cos/sin table: the kernels' KernelOptions::table)
    std::vector<double> alibi_slopes;        // kAlibi: [Hq]
  };

  // params: every value as the core takes it (scale, the masks' geometry, positions, alibi_mode,
  // t5's buckets); its pointers are set here, into data (positions and padding as the kernels
  // read them: positions_view, kernel_view.h), and t5_table per call from the tensor.
  // Errors (posenc::Error) name what is missing: positions for a scheme that reads them, ...
  AttentionSpec(const AttentionParams& params, Data data);
  AttentionSpec(const AttentionSpec&) = delete;
  AttentionSpec& operator=(const AttentionSpec&) = delete;

  const AttentionParams& params() const { return params_; }
  const Data& data() const { return data_; }

 private:
  Data data_;
  AttentionParams params_;
};

// The differentiable bias input of the spec's positions, if any: one of them.
struct FusedAttentionTensors {
  torch::Tensor q, k, v;
  torch::Tensor t5_table;         // kT5: float32 [num_buckets, Hq]
  torch::Tensor distance_table;   // kDistanceTable: float32 [Hq, width] (Kerple, Sandwich)
  torch::Tensor gate_cumulative;  // kForgetGate: FoX's c, float32 [B, Hq, T]
};

// softmax(q k^T * scale + bias + mask) v with positions applied inside; differentiable.
// Errors (posenc::Error) name what is wrong: a dtype other than float32, a missing table, ...
torch::Tensor fused_attention(const FusedAttentionTensors& tensors, std::shared_ptr<const AttentionSpec> spec);

}  // namespace posenc::torch_layer
