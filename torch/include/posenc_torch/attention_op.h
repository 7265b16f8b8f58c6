// posenc's fused attention as a torch operator (namespace "posenc", beside rope_op.h): one
// autograd for the C++ torch layer (fused_attention.h) and for Python (posenc.attention calls
// torch.ops.posenc.attention), traced by torch.jit.trace as posenc::attention nodes.
//
//   posenc::attention(Tensor q, Tensor k, Tensor v, *, <every field of AttentionOpArgs, by name,
//                     with the defaults below>) -> (Tensor out, Tensor lse)
//
//   q     [B, Hq, S, D]  each float32, bfloat16 or float16 on the CPU (attention_op() below
//                        takes other devices through attention_native), any strides (a copy when
//   k, v  [B, Hk, T, D]  the last dimension is not contiguous; a [B, S, H, D] tensor passes as its
//                        transpose(1, 2)); Hq a multiple of Hk (GQA); every size below 2^31
//   out   [B, Hq, S, D]  q's dtype, in q's memory order ([B, S, H, D] storage when q's heads are
//                        inner to its tokens, as a transposed view; [B, H, S, D] otherwise)
//   lse   [B, Hq, S]     float32: each query row's log-sum-exp (-inf for a row that sees no key);
//                        it carries no gradient (marked non-differentiable)
//
// The CPU kernel is the core's attention() (attention.h: the masks, positions and remaps); the
// Autograd kernel's backward is attention_backward() in float32 (attention_backward.h), with
// gradients to q, k, v and the bias input (T5's table, a distance table, FoX's c). Saved for the
// backward: q, k, v, out, lse, the bias and the position and padding tensors (changed in place,
// autograd's usual error) and a copy of inv_freq, O(B x S x D), never O(S x T). The backward is
// not differentiable again: differentiating its gradients (create_graph) is an error when it is
// attempted, as torch's once_differentiable. With a gradient to take, bf16 inputs run the f32 kernel (the backward recomputes the
// scores in f32 and needs an lse that matches them); inference takes the CPU's bf16 dot products
// when bf16_dot_products is true. RoPE's cos/sin come from a table shared by every call with the
// same frequencies (a few kept per process, for plain RoPE and positions below max(2^17,
// 2 (S + T) + 4096)), so a decode step reads its rows.
// Bad arguments are posenc::Error (Python: posenc.Error, a ValueError) naming the value.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace posenc::torch_layer {

// The operator's keyword arguments, with the schema's defaults; the names and meanings are
// AttentionParams' (attention.h). The schema is written from this struct (attention_op_args.cc:
// one list of fields), so a field added here is an argument of the operator.
struct AttentionOpArgs {
  // Positions: explicit ids ([B or 1, S] and [B or 1, T], int32/int64), or token index + offset.
  c10::optional<at::Tensor> q_positions, k_positions;
  std::int64_t q_offset = 0, k_offset = 0;
  // Masks (AttentionMask): past -1 is T - S; window and chunk 0 are none.
  double scale = 0;  // 0: 1 / sqrt(D)
  bool causal = true;
  std::int64_t past = -1;
  c10::optional<at::Tensor> key_padding;  // [B, T], bool or integer, nonzero = a real key
  std::int64_t window = 0, chunk = 0;
  // "none", "rope", "alibi", "t5", "distance-table" or "forget-gate".
  std::string positions = "none";
  c10::optional<at::Tensor> inv_freq;      // rope: float32 [F]
  std::vector<std::int64_t> axis_of_freq;  // rope: empty (one position axis)
  double attention_factor = 1;
  std::string rope_layout = "half_split";
  // rope: xPos (rope_xpos.h; scale_base 0: off), and the rotary channels' offset and RoPE on the
  // first rope_rotated_heads query heads (and the kv heads they read; 0: every head).
  double xpos_scale_base = 0, xpos_gamma = 0.4, xpos_center = 0;
  std::int64_t rope_channel_offset = 0, rope_rotated_heads = 0;
  std::vector<double> alibi_slopes;  // alibi: [Hq]
  bool alibi_symmetric = false;
  // The differentiable bias input: t5 [num_buckets, Hq], distance-table [Hq, width], forget-gate
  // FoX's c [B, Hq, T]; any floating dtype (read as float32, its gradient in its own dtype).
  c10::optional<at::Tensor> bias;
  std::int64_t t5_num_buckets = 0, t5_max_distance = 0;
  bool t5_bidirectional = false;
  std::int64_t distance_length = 0;
  std::string distance_side = "absolute";
  // RoPE's remapped distances (PositionRemap): "none", "self-extend", "rerope", "leaky-rerope", "dual-chunk".
  std::string remap = "none";
  std::int64_t remap_window = 0, remap_group = 1;
  double remap_leak = 0;
  std::int64_t remap_chunk_size = 0, remap_local_size = 0;
  bool bf16_dot_products = true;  // see above: used only when no gradient is taken
};

// How many RoPE tables the operator keeps (at most 4), and dropping them (their memory is freed
// once no call in flight reads them): for tests, diagnostics and a long-lived process that is done
// with a model.
std::size_t attention_op_cached_rope_tables();
void attention_op_clear_rope_tables();

// Through the dispatcher (autograd included): what torch.ops.posenc.attention runs. Returns
// (out, lse) as above. When q, k or v is not on the CPU (a GPU's): attention_native instead.
std::pair<at::Tensor, at::Tensor> attention_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const AttentionOpArgs& args);

// The torch-native path (attention_native.cc): the same attention in torch operations on q's
// device, differentiable by autograd to any order (in q, k, v, the bias input, and a learned
// inv_freq, which the kernel refuses to take with a gradient), built from the same values as
// the kernel (rope_native's angles, the core's T5 buckets as a step function looked up on the
// device, the caller's tables). q, k and v on one device, float32, bfloat16 or float16; the
// arguments are checked by the kernel's own checks, on CPU copies of the positions, padding,
// inv_freq and bias tensors (a GPU caller pays their copy). It materialises the [B, Hq, S, T]
// scores in float32 (the kernel's math; the kernel never forms them); out [B, Hq, S, D] in q's
// dtype, lse [B, Hq, S] float32 without a gradient; a row that sees no key gets zeros and -inf.
std::pair<at::Tensor, at::Tensor> attention_native(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const AttentionOpArgs& args);

}  // namespace posenc::torch_layer
