// posenc::attention's arguments, declared once: for_each_field lists AttentionOpArgs' fields in
// the schema's order, and the schema, the boxed stack's reading and writing are made from it.
#pragma once

#include <ATen/core/stack.h>

#include <string>

#include "posenc_torch/attention_op.h"

namespace posenc::torch_layer {

// f(name, field) for every keyword argument, in the schema's order (after q, k, v).
template <class Args, class F>
void for_each_field(Args& a, F&& f) {
  f("q_positions", a.q_positions);
  f("k_positions", a.k_positions);
  f("q_offset", a.q_offset);
  f("k_offset", a.k_offset);
  f("scale", a.scale);
  f("causal", a.causal);
  f("past", a.past);
  f("key_padding", a.key_padding);
  f("window", a.window);
  f("chunk", a.chunk);
  f("positions", a.positions);
  f("inv_freq", a.inv_freq);
  f("axis_of_freq", a.axis_of_freq);
  f("attention_factor", a.attention_factor);
  f("rope_layout", a.rope_layout);
  f("xpos_scale_base", a.xpos_scale_base);
  f("xpos_gamma", a.xpos_gamma);
  f("xpos_center", a.xpos_center);
  f("rope_channel_offset", a.rope_channel_offset);
  f("rope_rotated_heads", a.rope_rotated_heads);
  f("alibi_slopes", a.alibi_slopes);
  f("alibi_symmetric", a.alibi_symmetric);
  f("bias", a.bias);
  f("t5_num_buckets", a.t5_num_buckets);
  f("t5_max_distance", a.t5_max_distance);
  f("t5_bidirectional", a.t5_bidirectional);
  f("distance_length", a.distance_length);
  f("distance_side", a.distance_side);
  f("remap", a.remap);
  f("remap_window", a.remap_window);
  f("remap_group", a.remap_group);
  f("remap_leak", a.remap_leak);
  f("remap_chunk_size", a.remap_chunk_size);
  f("remap_local_size", a.remap_local_size);
  f("bf16_dot_products", a.bf16_dot_products);
}

// "attention(Tensor q, Tensor k, Tensor v, *, Tensor? q_positions=None, ...) -> (Tensor out, Tensor lse)"
std::string attention_schema();

// The fields pushed after q, k, v; and read back from the stack's last fields (the top of stack).
void push_fields(const AttentionOpArgs& a, torch::jit::Stack& stack);
AttentionOpArgs pop_fields(torch::jit::Stack& stack);

}  // namespace posenc::torch_layer
