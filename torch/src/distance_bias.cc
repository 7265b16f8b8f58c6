#include "posenc_torch/distance_bias.h"

#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/sandwich.h"

namespace posenc::torch_layer {
namespace {

// softplus^-1(y) = log(expm1(y)), and sigmoid^-1(y) = log(y / (1 - y)), elementwise.
torch::Tensor softplus_inverse(const torch::Tensor& y) { return torch::log(torch::expm1(y)); }
torch::Tensor inverse_sigmoid(const torch::Tensor& y) { return torch::log(y / (1 - y)); }

}  // namespace

KerpleBiasImpl::KerpleBiasImpl(int heads, KerpleKind kind) : kind_(kind) {
  const KerpleParams init = kerple_init(heads, kind);
  const torch::Tensor r1 = torch::tensor(init.r1, torch::kFloat64), r2 = torch::tensor(init.r2, torch::kFloat64);
  raw_r1 = register_parameter("raw_r1", softplus_inverse(r1));
  // power's r2 = 1 is the middle of (0, 2): sigmoid(0).
  raw_r2 = register_parameter("raw_r2", kind == KerpleKind::kPower ? inverse_sigmoid(r2 / 2) : softplus_inverse(r2));
}

torch::Tensor KerpleBiasImpl::r1() const { return torch::softplus(raw_r1); }
torch::Tensor KerpleBiasImpl::r2() const { return kind_ == KerpleKind::kPower ? 2 * torch::sigmoid(raw_r2) : torch::softplus(raw_r2); }

torch::Tensor KerpleBiasImpl::table(std::int64_t length) const {
  if (length < 1) throw Error("KerpleBias: table length " + std::to_string(length) + " must be >= 1");
  const torch::Tensor d = torch::arange(length, raw_r1.options()).view({1, length});  // float64, on the parameters' device
  const torch::Tensor a = r1().view({-1, 1}), b = r2().view({-1, 1});
  if (kind_ == KerpleKind::kLog) return (-a * torch::log1p(b * d)).to(torch::kFloat32);
  // |Delta|^r2 through exp(r2 log d) at d >= 1 and 0 at d = 0: the gradient in r2 stays finite
  // (0^r2's log 0 would make it NaN).
  const torch::Tensor power = torch::where(d > 0, torch::exp(b * torch::log(d.clamp_min(1))), torch::zeros_like(d));
  return (-a * power).to(torch::kFloat32);
}

SandwichBiasImpl::SandwichBiasImpl(int heads, int dim) : heads_(heads), dim_(dim) { validate(SandwichParams{heads, dim}); }

torch::Tensor SandwichBiasImpl::table(std::int64_t length) const {
  const std::vector<float> t = sandwich_table(SandwichParams{heads_, dim_}, length);
  return torch::tensor(t, torch::kFloat32).view({heads_, length});
}

DynamicPositionBiasImpl::DynamicPositionBiasImpl(int heads, int width, int depth) {
  if (heads < 1 || width < 1 || depth < 1)
    throw Error("DynamicPositionBias: heads " + std::to_string(heads) + ", width " + std::to_string(width) + " and depth " +
                std::to_string(depth) + " must be >= 1");
  torch::nn::Sequential layers(torch::nn::Linear(1, width), torch::nn::SiLU());
  for (int i = 1; i < depth; ++i) {
    layers->push_back(torch::nn::Linear(width, width));
    layers->push_back(torch::nn::SiLU());
  }
  layers->push_back(torch::nn::Linear(width, heads));
  mlp = register_module("mlp", layers);
}

torch::Tensor DynamicPositionBiasImpl::table(std::int64_t length) {
  if (length < 1) throw Error("DynamicPositionBias: table length " + std::to_string(length) + " must be >= 1");
  const torch::Tensor weight = mlp->children().front()->parameters().front();  // the first Linear's: its dtype and device
  const torch::Tensor d = torch::arange(-(length - 1), length, weight.options());
  const torch::Tensor x = torch::sign(d) * torch::log1p(d.abs());
  return mlp->forward(x.unsqueeze(1)).t().contiguous();  // [2 length - 1, H] -> [H, 2 length - 1]
}

FireBiasImpl::FireBiasImpl(int heads, int width, double initial_c, double initial_L, double eps) : eps_(eps) {
  if (heads < 1 || width < 1)
    throw Error("FIRE: heads " + std::to_string(heads) + " and width " + std::to_string(width) + " must be >= 1");
  if (!std::isfinite(initial_c) || !std::isfinite(initial_L) || !(eps > 0))
    throw Error("FIRE: init_c " + format_number(initial_c) + " and init_L " + format_number(initial_L) +
                " must be finite and eps " + format_number(eps) + " > 0");
  mlp = register_module("mlp", torch::nn::Sequential(torch::nn::Linear(1, width), torch::nn::ReLU(), torch::nn::Linear(width, heads)));
  c = register_parameter("c", torch::tensor(initial_c, torch::kFloat32));
  L_multiplier = register_parameter("L_multiplier", torch::tensor(1.0f));
  init_L = register_buffer("init_L", torch::tensor(initial_L, torch::kFloat32));
}

namespace {
// The dtype FIRE's input is computed in: at least float32 (in bfloat16 distances 0 and 1 at
// position 1000 would be equal); the MLP then runs in its own dtype.
torch::ScalarType fire_input_dtype(const torch::Tensor& c) { return torch::promote_types(c.scalar_type(), torch::kFloat32); }
}  // namespace

torch::Tensor FireBiasImpl::scores(const torch::Tensor& q_positions, const torch::Tensor& k_positions) {
  const auto dtype = fire_input_dtype(c);  // the distance in int64 before any rounding
  const torch::Tensor cc = c.to(dtype), threshold = (L_multiplier * init_L).abs().to(dtype);
  const torch::Tensor distance = (q_positions.unsqueeze(-1) - k_positions.unsqueeze(-2)).to(dtype);  // [B, Sq, Sk]
  const torch::Tensor i = q_positions.to(dtype).unsqueeze(-1);                                        // [B, Sq, 1]
  const auto psi = [&](const torch::Tensor& x) { return torch::log((cc * x).abs() + 1); };
  const torch::Tensor x = psi(distance) / (psi(torch::maximum(i, threshold)) + eps_);
  return mlp->forward(x.to(c.scalar_type()).unsqueeze(-1)).permute({0, 3, 1, 2});  // [B, Sq, Sk, H] -> [B, H, Sq, Sk]
}

torch::Tensor FireBiasImpl::table(std::int64_t length) {
  if (length < 1) throw Error("FIRE: table length " + std::to_string(length) + " must be >= 1");
  // scores()'s operations with max(L, i) = L: the same bits for every query below L.
  const auto dtype = fire_input_dtype(c);
  const torch::Tensor cc = c.to(dtype), threshold = (L_multiplier * init_L).abs().to(dtype);
  const torch::Tensor distance = torch::arange(length, torch::TensorOptions(torch::kInt64).device(c.device())).to(dtype);
  const auto psi = [&](const torch::Tensor& x) { return torch::log((cc * x).abs() + 1); };
  const torch::Tensor x = psi(distance) / (psi(threshold) + eps_);
  return mlp->forward(x.to(c.scalar_type()).unsqueeze(-1)).t().contiguous();  // [length, H] -> [H, length]
}

bool FireBiasImpl::table_covers(const torch::Tensor& q_positions) const {
  if (q_positions.numel() == 0) return true;
  const auto dtype = fire_input_dtype(c);
  return (q_positions.max().to(dtype) < (L_multiplier * init_L).abs().to(dtype)).item<bool>();
}

ForgetGateImpl::ForgetGateImpl(int d_model, int heads) {
  proj = register_module("proj", torch::nn::Linear(d_model, heads));
  // Gates start near 1 (little forgetting), as FoX initialises its bias; the weights as Linear's.
  torch::NoGradGuard no_grad;
  proj->bias.fill_(5.0);
}

torch::Tensor ForgetGateImpl::cumulative(const torch::Tensor& x, const torch::Tensor& start) {
  const torch::Tensor log_f = torch::log_sigmoid(proj->forward(x)).to(torch::kFloat64).transpose(1, 2);  // [B, H, S]
  torch::Tensor c = log_f.cumsum(2);
  if (start.defined()) c = c + start.to(torch::kFloat64).unsqueeze(2);
  return c.to(torch::kFloat32);
}

torch::Tensor distance_bias_scores(const torch::Tensor& table, const torch::Tensor& q_positions, const torch::Tensor& k_positions,
                                   DistanceSide side) {
  const torch::Tensor delta = q_positions.unsqueeze(-1) - k_positions.unsqueeze(-2);  // [B, Sq, Sk]
  const std::int64_t length = side == DistanceSide::kSigned ? (table.size(1) + 1) / 2 : table.size(1);
  const std::int64_t longest = delta.numel() ? delta.abs().max().item<std::int64_t>() : 0;
  if (longest >= length)
    throw Error("distance bias: positions " + std::to_string(longest) + " apart, but the table covers distances 0 .. " +
                std::to_string(length - 1));
  const torch::Tensor column = side == DistanceSide::kSigned ? delta + (length - 1) : delta.abs();
  return table.to(column.device()).index({torch::indexing::Slice(), column}).permute({1, 0, 2, 3});  // [H, B, Sq, Sk] -> [B, H, Sq, Sk]
}

torch::Tensor gate_bias_scores(const torch::Tensor& c_q, const torch::Tensor& c_k) { return c_q.unsqueeze(-1) - c_k.unsqueeze(-2); }

}  // namespace posenc::torch_layer
