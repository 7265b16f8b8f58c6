// One call of posenc::attention as the core reads it: AttentionParams built from the operator's
// arguments, every tensor the params point into checked (shape, dtype, device) and held here.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope_kernels.h"
#include "posenc_torch/attention_op.h"

namespace posenc::torch_layer {

// The sizes of a call, read from q [B, Hq, S, D] and k [B, Hk, T, D] (checked: 4-D, each
// float32/bfloat16/float16, every size below 2^31, the shapes validate_attention requires; the
// device is not checked here: the CPU kernel's views require the CPU, attention_native any device).
struct AttentionShape {
  std::int64_t batch = 0, heads = 0, q_tokens = 0, kv_heads = 0, k_tokens = 0, head_dim = 0;
  bool empty() const { return batch * heads * q_tokens * k_tokens == 0; }
};
AttentionShape attention_shape(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// The bias input's shape for these params ({} when the positions read none).
std::vector<std::int64_t> bias_shape(const AttentionOpArgs& a, const AttentionShape& s);

class AttentionCall {
 public:
  // Whether the call takes RoPE's shared cos/sin table (the CPU kernel), or only its checks (the
  // torch-native path, which computes its own angles on the tensors' device).
  enum class Table { kShared, kNone };
  // Throws posenc::Error naming the argument that is wrong. a's tensors must outlive the call.
  AttentionCall(const AttentionOpArgs& a, const AttentionShape& s, Table table = Table::kShared);
  AttentionCall(const AttentionCall&) = delete;  // params point into this object

  const AttentionParams& params() const { return p_; }
  // threads (torch's count) and RoPE's shared cos/sin table (when the call's positions are few
  // enough for a table: see shared_table in attention_op_call.cc).
  KernelOptions options() const;
  // The bias input as float32, contiguous (undefined without one): what params() points at.
  const at::Tensor& bias() const { return bias_; }

 private:
  std::vector<float> inv_freq_;
  std::vector<std::uint8_t> axes_;
  at::Tensor q_ids_, k_ids_, padding_, bias_;
  std::shared_ptr<const RopeTable> table_;
  AttentionParams p_;
};

}  // namespace posenc::torch_layer
