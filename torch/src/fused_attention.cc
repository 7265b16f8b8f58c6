#include "posenc_torch/fused_attention.h"

#include <string>
#include <utility>

#include "posenc/names.h"
#include "posenc_torch/attention_op.h"
#include "posenc/error.h"

namespace posenc::torch_layer {
namespace {

// q, k, v: float32 [B, H, tokens, D] (the C++ layer's contract; the operator also takes bf16/f16).
void check_float(const torch::Tensor& x, const char* name) {
  if (!x.defined() || x.dim() != 4)
    throw Error(std::string("fused_attention: ") + name + " must be a 4-D tensor [B, heads, tokens, head_dim]");
  if (x.scalar_type() != torch::kFloat)
    throw Error(std::string("fused_attention: ") + name + " must be float32, got " + c10::toString(x.scalar_type()));
}

// Ids over positions_view's tensor; [1, tokens] is read as every batch row's. Rows that happen to
// be equal need no flag: RoPE reads its table by position, the biases compute from positions.
// Positions on another device (a GPU's) are not pointed at: the operator reads the tensors.
PositionIds ids_of(const torch::Tensor& pos) {
  if (!pos.defined() || !pos.is_cpu()) return PositionIds::implicit();
  PositionIds ids = PositionIds::explicit_ids(pos.data_ptr<std::int64_t>());
  ids.shared_across_batch = pos.size(0) == 1;
  return ids;
}

c10::optional<torch::Tensor> given(const torch::Tensor& x) { return x.defined() ? c10::optional<torch::Tensor>(x) : c10::nullopt; }

// The spec and the bias input as posenc::attention's arguments.
AttentionOpArgs op_args(const AttentionSpec& spec, const FusedAttentionTensors& t) {
  const AttentionParams& p = spec.params();
  const AttentionSpec::Data& d = spec.data();
  AttentionOpArgs a;
  if (d.q_positions.defined() && d.k_positions.defined()) {
    a.q_positions = d.q_positions;
    a.k_positions = d.k_positions;
  }
  a.q_offset = p.q_positions.offset;
  a.k_offset = p.k_positions.offset;
  a.scale = p.scale;
  a.causal = p.mask.causal;
  a.past = p.mask.past;
  a.key_padding = given(d.key_padding);
  a.window = p.mask.sliding_window;
  a.chunk = p.mask.chunk;
  a.positions = to_string(p.positions);
  if (p.positions == AttentionPositions::kRope) {
    const std::vector<float>& f = d.rope.inv_freq();
    a.inv_freq = torch::tensor(at::ArrayRef<float>(f), torch::kFloat);
    a.axis_of_freq.assign(d.rope.axis_of_freq().begin(), d.rope.axis_of_freq().end());
    a.attention_factor = p.rope.attention_factor;
    a.rope_layout = to_string(p.rope.layout);
    a.xpos_scale_base = p.rope.xpos.scale_base;  // q takes the query's scale, k the key's
    a.xpos_gamma = p.rope.xpos.gamma;
    a.xpos_center = p.rope.xpos.center;
    a.rope_channel_offset = p.rope.channel_offset;
    a.rope_rotated_heads = p.rope.rotated_heads;
  }
  if (p.positions == AttentionPositions::kAlibi) {
    a.alibi_slopes = d.alibi_slopes;
    a.alibi_symmetric = p.alibi_mode == AlibiMode::kSymmetric;
  }
  if (p.positions == AttentionPositions::kT5) {
    a.bias = given(t.t5_table);
    a.t5_num_buckets = p.t5.num_buckets;
    a.t5_max_distance = p.t5.max_distance;
    a.t5_bidirectional = p.t5.bidirectional;
  }
  if (p.positions == AttentionPositions::kDistanceTable) {
    a.bias = given(t.distance_table);
    a.distance_length = p.distance_table.length;
    a.distance_side = to_string(p.distance_table.side);
  }
  if (p.positions == AttentionPositions::kForgetGate) a.bias = given(t.gate_cumulative);
  a.remap = to_string(p.remap.kind);
  a.remap_window = p.remap.window;
  a.remap_group = p.remap.group;
  a.remap_leak = p.remap.leak;
  a.remap_chunk_size = p.remap.chunk_size;
  a.remap_local_size = p.remap.local_size;
  return a;
}

}  // namespace

AttentionSpec::AttentionSpec(const AttentionParams& params, Data data) : data_(std::move(data)), params_(params) {
  const AttentionPositions positions = params_.positions;
  if (positions != AttentionPositions::kNone && (!data_.q_positions.defined() || !data_.k_positions.defined()))
    throw Error(std::string("fused_attention: positions '") + to_string(positions) + "' need q_positions and k_positions");
  // On the CPU as the kernels read them (positions_view); on another device as they are, for the
  // operator's torch-native path.
  const auto ids = [](const torch::Tensor& x, const char* what) { return x.is_cpu() ? positions_view(x, what) : x.to(torch::kLong); };
  if (data_.q_positions.defined()) data_.q_positions = ids(data_.q_positions, "fused_attention: q_positions");
  if (data_.k_positions.defined()) data_.k_positions = ids(data_.k_positions, "fused_attention: k_positions");
  if (data_.key_padding.defined()) data_.key_padding = data_.key_padding.ne(0).to(torch::kUInt8).contiguous();
  if (positions == AttentionPositions::kRope && !data_.rope.table())
    throw Error("fused_attention: positions 'rope' need a RopeSpec with frequencies");
  const bool padding_on_cpu = data_.key_padding.defined() && data_.key_padding.is_cpu();
  params_.mask.key_padding = padding_on_cpu ? data_.key_padding.data_ptr<std::uint8_t>() : nullptr;
  params_.q_positions = ids_of(data_.q_positions);
  params_.k_positions = ids_of(data_.k_positions);
  params_.rope = data_.rope.params();
  params_.alibi_slopes = data_.alibi_slopes.empty() ? nullptr : data_.alibi_slopes.data();
  params_.t5_table = nullptr;  // per call, from the differentiable tensor
  params_.distance_table.values = nullptr;
  params_.gate_cumulative = nullptr;
}

torch::Tensor fused_attention(const FusedAttentionTensors& t, std::shared_ptr<const AttentionSpec> spec) {
  if (!spec) throw Error("fused_attention: needs an AttentionSpec");
  check_float(t.q, "q");
  check_float(t.k, "k");
  check_float(t.v, "v");
  // Shapes, the bias input and the positions are the operator's to check (attention_op_call.cc).
  // out [B, Hq, S, D] in q's memory order: [B, S, Hq, D] storage for a transposed q (as the
  // layer's model passes it: its transpose back is contiguous, no copy), else copied to it.
  return attention_op(t.q, t.k, t.v, op_args(*spec, t)).first.transpose(1, 2).contiguous();
}

}  // namespace posenc::torch_layer
