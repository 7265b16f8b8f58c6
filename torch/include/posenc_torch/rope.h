// RoPE for libtorch: an autograd function over posenc's kernels, the plain formula it must equal,
// and RotaryEmbedding, the module that holds a schedule and HF's runtime rules.
//
// Tensors are [batch, heads, seq, head_dim] (any strides with a contiguous last dimension);
// positions are int64 [batch, seq] (or [axes, batch, seq] for M-RoPE / 2-D).
// Forward rotates through the posenc::rope operator (rope_op.h: rope_rotate() for f32 / bf16 / f16
// storage, one autograd with Python's); backward rotates the
// gradient by the transpose (direction -1): nothing is saved but positions and frequencies.
// double tensors (gradient checks) take the plain formula in double. A tensor not on the CPU (a
// GPU's) takes the same formula on its device (rope_native, rope_op.h: the same angles, autograd's
// backward), so a model there trains with posenc's exact positions.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "posenc/rope_apply.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_runtime.h"
#include "posenc_torch/kernel_view.h"

namespace posenc::torch_layer {

// What one call needs: the core's RopeApplyParams (direction +1) and the storage its pointers
// refer to, the frequencies and the axis of each, plus the cos/sin table the kernels share
// (rope_kernels.h: grown on demand, thread-safe). The storage is immutable and shared, so a
// copy is cheap and its params() stay valid (the autograd graph keeps one for the backward).
class RopeSpec {
 public:
  RopeSpec() = default;  // no frequencies: rope() and attention refuse it
  // axis_of_freq: empty (one position axis) or one axis per frequency (M-RoPE, 2-D vision).
  explicit RopeSpec(const RopeSchedule& schedule, RopeLayout layout = RopeLayout::kHalfSplit,
                    std::vector<std::uint8_t> axis_of_freq = {});

  const RopeApplyParams& params() const { return params_; }
  // The same frequencies with xPos (rope_xpos.h): rope() gives x the role xpos.first, rope_qk
  // and attention give q the query's and k the key's scale.
  RopeSpec with_xpos(const XPosParams& xpos) const {
    RopeSpec spec = *this;
    spec.params_.xpos = xpos;
    return spec;
  }
  // For keys rotated alone (rope(k, ...)): xPos's key role; plain RoPE is the same spec.
  RopeSpec for_keys() const {
    XPosParams xpos = params_.xpos;
    xpos.first = XPosRole::kKey;
    return with_xpos(xpos);
  }
  const std::vector<float>& inv_freq() const { return storage().inv_freq; }
  const std::vector<std::uint8_t>& axis_of_freq() const { return storage().axis_of_freq; }
  // cos/sin of these frequencies by position (KernelOptions::table); nullptr without frequencies.
  const RopeTable* table() const { return storage_ ? storage_->table.get() : nullptr; }

 private:
  struct Storage {
    std::vector<float> inv_freq;
    std::vector<std::uint8_t> axis_of_freq;
    std::unique_ptr<RopeTable> table;
  };
  const Storage& storage() const;
  std::shared_ptr<const Storage> storage_;
  RopeApplyParams params_;
};

// Rotated copy of x, differentiable in x.
torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec);
// Rotated copies of q [B, Hq, S, D] and k [B, Hk, S, D] at the same positions, differentiable in
// both: one kernel call for the two (each token's cos/sin row formed once for q and k), and one
// for their gradients.
std::pair<torch::Tensor, torch::Tensor> rope_qk(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                                const RopeSpec& spec);

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
  // what rope() needs for it: the same spec (and so the same cos/sin table) while the schedule
  // stays the same.
  RopeSpec spec_for(std::int64_t max_position);

  // The schedule in force after the last call.
  const RopeSchedule& schedule() const { return runtime_.current(); }
  int rotary_dim() const { return static_cast<int>(2 * runtime_.current().inv_freq.size()); }

  torch::Tensor inv_freq;  // buffer: the frequencies of the last call (float32)

 private:
  RopeRuntime runtime_;
  RopeLayout layout_;
  RopeSpec spec_;  // of the last call
};
TORCH_MODULE(RotaryEmbedding);

}  // namespace posenc::torch_layer
