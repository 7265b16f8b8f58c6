// posenc's RoPE kernels as torch operators (namespace "posenc", registered once per process: op_registration.cc): one autograd for
// the C++ torch layer and for Python, whose posenc.apply_rope calls torch.ops.posenc.rope.
//
//   posenc::rope(Tensor x, Tensor? positions, Tensor inv_freq, int[] axis_of_freq,
//                float attention_factor, str layout, int offset, int direction,
//                float xpos_scale_base=0, float xpos_gamma=0.4, float xpos_center=0,
//                str xpos_role="query") -> Tensor
//   posenc::rope_qk(Tensor q, Tensor k, Tensor? positions, Tensor inv_freq, int[] axis_of_freq,
//                   float attention_factor, str layout, int offset, int direction) -> (Tensor, Tensor)
//   posenc::rope_native(<rope's arguments>) -> Tensor     rope_native below, on any device and
//                   dtype (torch's autograd; Python's apply_rope(backend="torch") calls it)
//
// x, q, k: [B, H, S, D] float32, bfloat16 or float16 on the CPU (rope_op() below takes other
// devices through rope_native), any strides with a contiguous
// last dimension (a [B, S, H, D] tensor passes as its transpose(1, 2) view). positions: None
// (token t at offset + t), int32/int64 [S], [B, S] or [axes, B, S] (axes per frequency:
// axis_of_freq). inv_freq: float32 [F], rotary dim 2F <= D. layout: half_split, interleaved or
// deepseek_v3. direction +1 rotates, -1 is the transpose. xPos (rope_xpos.h): scale_base 0 is
// plain RoPE; xpos_role the role of x (query or key).
//
// Each returns new tensors in x's memory order. The CPU kernel is rope_rotate (rope_kernels.h);
// the Autograd kernel's backward is the same operator with the opposite direction, so it is
// differentiable again (double backward) and every order runs in the kernels. Traced by
// torch.jit.trace as posenc::rope nodes. float64 is refused: the formula (rope.h rope_formula,
// Python's backend="torch") is the double path.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace posenc::torch_layer {

// The arguments of one call, as the schema names them.
struct RopeOpArgs {
  c10::optional<at::Tensor> positions;
  at::Tensor inv_freq;                   // float32 [F] on the CPU (rope_native: any floating dtype, any device)
  std::vector<std::int64_t> axis_of_freq;  // empty: one position axis
  double attention_factor = 1.0;
  std::string layout = "half_split";
  std::int64_t offset = 0;
  std::int64_t direction = 1;
  double xpos_scale_base = 0, xpos_gamma = 0.4, xpos_center = 0;
  std::string xpos_role = "query";
};

// Through the dispatcher (autograd included): what torch.ops.posenc.rope / rope_qk run. A tensor
// not on the CPU (a GPU's) takes rope_native instead: the same rotation on its device.
at::Tensor rope_op(const at::Tensor& x, const RopeOpArgs& args);
std::pair<at::Tensor, at::Tensor> rope_qk_op(const at::Tensor& q, const at::Tensor& k, const RopeOpArgs& args);

// The torch-native path (rope_native.cc): the kernels' rotation in torch operations on x's
// device, differentiable by autograd to any order and in inv_freq (learned frequencies). Angles
// p * inv_freq in float64 (float32 on MPS, which has no float64), cos and sin times the attention
// factor and xPos's scale of x's role (rounded to float32 as the kernels' XPosScales, except for
// a float64 x), the rotation in float32 (float64 for a float64 x: the formula gradient checks
// use), the result in x's dtype. x any floating dtype; positions as for the operator (checked
// as the kernels check them, on a host copy: a GPU caller pays that copy), or real numbers and
// more than 3 axes (axial coordinates, which only this path takes), on any device (moved to
// x's); [1, S] rows serve every batch row.
at::Tensor rope_native(const at::Tensor& x, const RopeOpArgs& args);

}  // namespace posenc::torch_layer
