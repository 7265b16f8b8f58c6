// PoPE, polar coordinate positional embeddings (Gopalakrishnan, Csordás, Schmidhuber, Mozer 2025,
// "Decoupling the 'What' and 'Where' With Polar Coordinate Positional Embeddings", arXiv
// 2509.10534), for the C++ layer's TransformerLM (scheme pope): the conventions of Python's
// posenc.nn.PolarEmbedding (python/posenc/polar.py, x-transformers' PolarEmbedding). Channel j of a
// head is one complex number: magnitude softplus(x_j), phase p w_j at position p, w_j = 1 /
// base^(j/dim) over all dim channels, and on keys a learned phase delta_h,j in [-2 pi, 0]. As real
// and imaginary parts, q'_m . k'_n = sum_j softplus(q_j) softplus(k_j) cos((m - n) w_j - delta_j):
// a function of m - n. Queries and keys are mapped apart (keys cached at their own positions).
//
//   x     [B, H, tokens, dim] (H = heads: grouped keys are repeated to the query heads first,
//         since delta belongs to a query head), any floating dtype, any device
//   out   [B, H, tokens, 2 dim]: channels 0..dim-1 softplus(x) cos(phase), dim.. the sines
// Phases: p w_j in float64 (float32 on MPS), reduced modulo 2 pi before rounding; softplus, cos,
// sin and the products in float32 (float64 for float64 x); the result in x's dtype.
#pragma once

#include <torch/torch.h>

namespace posenc::torch_layer {

class PolarEmbeddingImpl : public torch::nn::Module {
 public:
  // delta starts at 0 (the paper's choice for length extrapolation, x-transformers' default).
  PolarEmbeddingImpl(int dim, int heads, double base = 10000.0);
  // positions: int64 [B or 1, tokens] on any device (moved to x's).
  torch::Tensor queries(const torch::Tensor& x, const torch::Tensor& positions) const;
  torch::Tensor keys(const torch::Tensor& x, const torch::Tensor& positions) const;
  torch::Tensor delta;  // parameter [heads, dim], used clamped to [-2 pi, 0]
  int dim() const { return dim_; }

 private:
  torch::Tensor map(const torch::Tensor& x, const torch::Tensor& positions, bool key) const;
  int dim_, heads_;
  double base_;
};
TORCH_MODULE(PolarEmbedding);

}  // namespace posenc::torch_layer
