#include "posenc_torch/polar.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc::torch_layer {
namespace {

constexpr double kTwoPi = 6.283185307179586;

}  // namespace

PolarEmbeddingImpl::PolarEmbeddingImpl(int dim, int heads, double base) : dim_(dim), heads_(heads), base_(base) {
  if (dim < 1 || heads < 1 || !(base > 0 && std::isfinite(base)))
    throw Error("PolarEmbedding: dim " + std::to_string(dim) + " and heads " + std::to_string(heads) +
                " must be >= 1 and base " + format_number(base) + " a finite number > 0");
  delta = register_parameter("delta", torch::zeros({heads, dim}));
}

torch::Tensor PolarEmbeddingImpl::queries(const torch::Tensor& x, const torch::Tensor& positions) const { return map(x, positions, false); }
torch::Tensor PolarEmbeddingImpl::keys(const torch::Tensor& x, const torch::Tensor& positions) const { return map(x, positions, true); }

torch::Tensor PolarEmbeddingImpl::map(const torch::Tensor& x, const torch::Tensor& positions, bool key) const {
  if (x.dim() != 4 || x.size(1) != heads_ || x.size(3) != dim_ || !x.is_floating_point())
    throw Error("PolarEmbedding: x must be a floating [B, H = " + std::to_string(heads_) + ", tokens, dim = " + std::to_string(dim_) +
                "] tensor, got " + std::string(c10::str(x.sizes())));
  if (positions.dim() != 2 || positions.size(1) != x.size(2) || (positions.size(0) != 1 && positions.size(0) != x.size(0)))
    throw Error("PolarEmbedding: positions must be [B or 1, tokens = " + std::to_string(x.size(2)) + "], got " +
                std::string(c10::str(positions.sizes())));
  const auto angle = x.device().type() == c10::DeviceType::MPS ? torch::kFloat32 : torch::kFloat64;
  const auto work = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto on = x.options().dtype(angle);
  const torch::Tensor inv_freq = 1.0 / torch::pow(base_, torch::arange(dim_, on) / static_cast<double>(dim_));  // [dim]
  const torch::Tensor theta = torch::remainder(positions.to(x.device()).to(angle).unsqueeze(-1) * inv_freq, kTwoPi);
  torch::Tensor phase = theta.to(work).unsqueeze(1);  // [B or 1, 1, tokens, dim]
  if (key) phase = phase + delta.to(work).clamp(-kTwoPi, 0.0).unsqueeze(1);  // [H, 1, dim]: per head
  const torch::Tensor magnitude = torch::softplus(x.to(work));
  return torch::cat({magnitude * phase.cos(), magnitude * phase.sin()}, -1).to(x.scalar_type());
}

}  // namespace posenc::torch_layer
