// RoPE for libtorch: an autograd function over posenc's kernels, the plain formula it must equal,
// and RotaryEmbedding, the module that holds a schedule and HF's runtime rules.
//
// Tensors are [batch, heads, seq, head_dim] (any strides with a contiguous last dimension);
// positions are int64 [batch, seq] (or [axes, batch, seq] for M-RoPE / 2-D).
// Forward rotates through rope_rotate() for f32 / bf16 / f16 storage; backward rotates the
// gradient by the transpose (direction -1): nothing is saved but positions and frequencies.
// double tensors (gradient checks) take the plain formula in double.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "posenc/rope_apply.h"
#include "posenc/rope_runtime.h"

namespace posenc::torch_layer {

// What one call needs: frequencies, attention factor, layout, axis per frequency (empty: 1-D).
struct RopeSpec {
  std::vector<float> inv_freq;
  double attention_factor = 1.0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  std::vector<std::uint8_t> axis_of_freq;
  // The same numbers as tensors, made once by rope_spec(): the autograd graph keeps these
  // (no per-call copies).
  torch::Tensor inv_freq_tensor, axes_tensor;
};

RopeSpec rope_spec(const RopeSchedule& schedule, RopeLayout layout = RopeLayout::kHalfSplit);
// Fills the tensor copies of a hand-made spec (after setting inv_freq, axis_of_freq, ...).
RopeSpec complete_spec(RopeSpec spec);

// Rotated copy of x, differentiable in x.
torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec);
// Rotated copies of q [B, Hq, S, D] and k [B, Hk, S, D] at the same positions, differentiable in
// both: one kernel call for the two (each token's cos/sin row formed once for q and k), and one
// for their gradients.
std::pair<torch::Tensor, torch::Tensor> rope_qk(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                                const RopeSpec& spec);

// The core kernels' view of x: logical [B, H, S, D] (any strides, contiguous channels), storage
// float32, bfloat16 or float16 (an Error otherwise). x must outlive the view.
RopeTensor kernel_view(const torch::Tensor& x);

// The plain libtorch formula (HF's: x * cos + rotate_half(x) * sin, or rotate_every_two), with
// angles computed in double: the reference the fused path is tested against. transpose: the
// transposed rotation (the backward pass), written out on its own.
torch::Tensor rope_formula(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec,
                           bool transpose = false);

// A rotary embedding: schedule from RopeParams (or a model's config.json), HF's runtime rules
// (dynamic NTK growth/reset, LongRoPE switching) applied per call from max(positions) + 1.
class RotaryEmbeddingImpl : public torch::nn::Module {
 public:
  explicit RotaryEmbeddingImpl(const RopeParams& params, RopeLayout layout = RopeLayout::kHalfSplit);
  static RotaryEmbeddingImpl from_config(const std::string& config_json_path);

  // Rotated copies of q [B, Hq, S, D] and k [B, Hk, S, D] at positions [B, S]. Queries and keys
  // may have different positions (a decode step re-rotates the cached keys): pass k_positions.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& q, const torch::Tensor& q_positions,
                                                  const torch::Tensor& k, const torch::Tensor& k_positions);

  // Applies the runtime rule for a call whose largest position is max_position and returns
  // what rope() needs for it.
  RopeSpec spec_for(std::int64_t max_position);

  // The schedule in force after the last call.
  const RopeSchedule& schedule() const { return runtime_.current(); }
  int rotary_dim() const { return static_cast<int>(2 * runtime_.current().inv_freq.size()); }

  torch::Tensor inv_freq;  // buffer: the frequencies of the last call (float32)

 private:
  RopeRuntime runtime_;
  RopeLayout layout_;
};
TORCH_MODULE(RotaryEmbedding);

}  // namespace posenc::torch_layer
