// The vision lab's tiny ViT (vision.h): patches [B, g * g, 2] -> a linear embedding, pre-norm
// blocks of bidirectional attention and a GELU MLP (4x), a final LayerNorm, the mean over patches
// and a linear classifier [B, classes]. No class token: the mean pools, so no token needs a
// position of its own (rope-vit leaves its class token unrotated; here there is none to leave).
//
// Positions by VisionScheme, for a grid of g x g patches, token t = row g + col, x = col, y = row:
//   learned  a table [d_model, g0, g0] (g0 the training grid, init N(0, 0.02)) added to the patch
//            embeddings; another g reads it bicubic-resampled (align_corners false), as timm's
//            resample_abs_pos_embed does for a larger input.
//   axial    q and k rotated by posenc::rope (the core's kernels, their backward) at integer
//            coordinates: pairs [0, F) read x, [F, 2F) read y (rope-vit's compute_axial_cis
//            order), F = head_dim / 4, frequencies 1 / 100^(2i / (head_dim / 2)) (axial_rope.h,
//            theta 100 as compute_axial_cis), interleaved pairs.
//   pixel    the same at coordinates linspace(-1, 1, g) with pixel frequencies linspace(1, 5, F) pi
//            (axial_rope.h, max_freq 10), through rope_native (real coordinates).
//   mixed    RoPE-Mixed: each layer's own learned frequencies [2, heads, head_dim / 2],
//            angle = f_x x + f_y y, initialised as rope-vit's init_random_2d_freqs (theta 10,
//            a random angle phi per head); torch operations, differentiable in the frequencies.
//            At phi = 0 (f_x = [mag, 0], f_y = [0, mag]) it is axial at theta 10.
// AdamW's weight decay (0.01, the lab's) reaches every weight, the learned table and RoPE-Mixed's
// frequencies too (timm exempts them): 400 steps at lr 2e-3 shrink them by at most 0.8%.
#pragma once

#include <torch/torch.h>

#include "posenc_lab/run_settings.h"
#include "posenc_lab/vision.h"

namespace posenc::lab {

struct VitConfig {
  VisionScheme scheme = VisionScheme::kAxial;
  ModelShape shape{2, 64, 4};
  int train_grid = 8;  // the learned table's side
  int channels = 2;    // numbers per patch
  int classes = 2;
};

// Throws Error naming the field: the shape's ranges, a head width divisible by 4 for the 2-D
// RoPE schemes (two axes of pairs), train_grid in [1, kMaxVisionGrid].
void validate(const VitConfig& config);

class VisionBlockImpl : public torch::nn::Module {
 public:
  VisionBlockImpl(const VitConfig& config);
  // x [B, S, d_model]; rotate(q or k [B, H, S, head_dim]) applies the block's positions (identity
  // for none and learned); mixed_freqs is this block's [2, H, head_dim / 2] (mixed only).
  torch::Tensor forward(const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& rotate);
  torch::Tensor mixed_freqs;  // undefined unless mixed

 private:
  int heads_, head_dim_;
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, out_{nullptr}, up_{nullptr}, down_{nullptr};
};
TORCH_MODULE(VisionBlock);

class VisionTransformerImpl : public torch::nn::Module {
 public:
  explicit VisionTransformerImpl(const VitConfig& config);
  // patches [B, grid * grid, channels] float32 -> logits [B, classes].
  torch::Tensor forward(const torch::Tensor& patches, int grid);
  const VitConfig& config() const { return config_; }
  // q or k [B, H, S, head_dim] rotated for block `layer` at a grid of g x g (x itself for none
  // and learned).
  torch::Tensor rotate(const torch::Tensor& x, int layer, int grid) const;
  // learned: the table added at a grid of g x g, [1, g * g, d_model] (resampled unless g is g0).
  torch::Tensor table_at(int grid) const;

 private:

  VitConfig config_;
  torch::nn::Linear embed_{nullptr}, classify_{nullptr};
  torch::nn::LayerNorm final_norm_{nullptr};
  std::vector<VisionBlock> blocks_;
  torch::Tensor table_;     // learned: [1, d_model, g0, g0]
  torch::Tensor inv_freq_;  // axial, pixel: [2F] float32 (row's F, then the column's)
};
TORCH_MODULE(VisionTransformer);

}  // namespace posenc::lab
