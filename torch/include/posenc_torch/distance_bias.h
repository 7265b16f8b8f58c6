// The learned and data-dependent attention biases for libtorch (issue 24), trainable, each the
// core's formula in torch operations so autograd reaches its parameters:
//
//   KerpleBias      Kerple (kerple.h): a per-head table over |Delta| from r1, r2 [H]
//   SandwichBias    Sandwich (sandwich.h): the same kind of table, parameter-free (a buffer)
//   DynamicPositionBias  an MLP over the signed log-distance, a signed table [H, 2 length - 1]
//   ForgetGate      FoX (forget_gate.h): c = cumsum(log sigmoid(x W + b)) [B, H, S] per layer
//   FireBias        FIRE (fire.h): an MLP over psi(i - j) / psi(max(L, i)), a bias per (query, key)
//
// A distance table [H, length] over |Delta| (distance_bias.h, kAbsolute), or [H, 2 length - 1]
// over Delta (kSigned), is what the fused kernel takes; distance_bias_scores() gathers it into
// the [B, H, Sq, Sk] bias of the materialising path.
#pragma once

#include <torch/torch.h>

#include "posenc/distance_bias.h"
#include "posenc/kerple.h"

namespace posenc::torch_layer {

// r1, r2 > 0 by construction: r = softplus(raw) for r1 and log's r2, r2 = 2 sigmoid(raw) in
// (0, 2) for power's; raw starts where r equals kerple_init(heads, kind).
class KerpleBiasImpl : public torch::nn::Module {
 public:
  KerpleBiasImpl(int heads, KerpleKind kind = KerpleKind::kLog);
  // b_h(d) for d = 0 .. length - 1: [H, length] float32, differentiable in raw_r1, raw_r2
  // (computed in float64, as the core's table, then rounded once).
  torch::Tensor table(std::int64_t length) const;
  torch::Tensor r1() const;  // [H] float64
  torch::Tensor r2() const;
  torch::Tensor raw_r1, raw_r2;  // parameters [H] float64
  KerpleKind kind() const { return kind_; }

 private:
  KerpleKind kind_;
};
TORCH_MODULE(KerpleBias);

class SandwichBiasImpl : public torch::nn::Module {
 public:
  SandwichBiasImpl(int heads, int dim = 128);
  torch::Tensor table(std::int64_t length) const;  // the core's sandwich_table, [H, length]

 private:
  int heads_, dim_;
};
TORCH_MODULE(SandwichBias);

// Dynamic position bias (x-transformers' DynamicPositionBias with norm off; SwinV2's log-spaced
// continuous position bias, in one dimension): b_h(d) = mlp(sign(d) log(1 + |d|))_h with d =
// query - key; mlp = Linear(1, width), SiLU, (Linear(width, width), SiLU) x (depth - 1),
// Linear(width, H), in its parameters' dtype and on their device. Python's
// posenc.nn.DynamicPositionBias (x-transformers' own default is log_distance=False: the plain d).
class DynamicPositionBiasImpl : public torch::nn::Module {
 public:
  DynamicPositionBiasImpl(int heads, int width, int depth = 2);
  // b_h(d) for d = -(length - 1) .. length - 1: [H, 2 length - 1] (kSigned's columns), differentiable.
  torch::Tensor table(std::int64_t length);
  torch::nn::Sequential mlp{nullptr};
};
TORCH_MODULE(DynamicPositionBias);

// FoX's forget gate of one layer: f = sigmoid(x W^T + b), W [H, d_model]; the cumulative gate
// c [B, H, S] = start + cumsum over tokens of log f, accumulated in float64 and rounded once
// (forget_gate.h's precision note). start [B, H]: the last c of the tokens before (a KV cache);
// undefined: 0.
class ForgetGateImpl : public torch::nn::Module {
 public:
  ForgetGateImpl(int d_model, int heads);
  torch::Tensor cumulative(const torch::Tensor& x, const torch::Tensor& start = {});
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(ForgetGate);

// FIRE (fire.h; the reference FIRE of mcleish7/arithmetic): mlp = Linear(1, width), ReLU,
// Linear(width, H); c (init 0.1) and L_multiplier (init 1) learned, init_L 512 a buffer, eps 1e-6.
// Depends on the query position as well as the distance: scores() gives the [B, H, Sq, Sk] bias
// for positions [B, Sq] and [B, Sk], differentiable in every parameter, in the parameters' dtype
// (the materialising path computes it per query block). While every query is below L it is a
// distance table (fire_table, fire.h), which the fused kernel takes: table_covers says when.
class FireBiasImpl : public torch::nn::Module {
 public:
  FireBiasImpl(int heads, int width = 32, double initial_c = 0.1, double initial_L = 512.0, double eps = 1e-6);
  torch::Tensor scores(const torch::Tensor& q_positions, const torch::Tensor& k_positions);
  // b_h(|Delta|) for |Delta| = 0 .. length - 1 at queries below L: [H, length] (kAbsolute's
  // columns), differentiable in every parameter; the bits scores() gives such a query.
  torch::Tensor table(std::int64_t length);
  // Whether every position of q_positions is below L (as scores() compares them, in its dtype;
  // strictly: at i = L autograd halves max(L, i)'s gradient, which a table would not).
  bool table_covers(const torch::Tensor& q_positions) const;
  torch::nn::Sequential mlp{nullptr};
  torch::Tensor c, L_multiplier, init_L;  // scalars: parameters c, L_multiplier; init_L a buffer

 private:
  double eps_;
};
TORCH_MODULE(FireBias);

// The materialising path's bias from a distance table: [B, H, Sq, Sk], entry table[h][|q - k|]
// of an absolute table [H, L], or table[h][q - k + L - 1] of a signed one [H, 2L - 1] (every
// |q - k| must be < L: an Error naming the distance otherwise).
torch::Tensor distance_bias_scores(const torch::Tensor& table, const torch::Tensor& q_positions, const torch::Tensor& k_positions,
                                   DistanceSide side = DistanceSide::kAbsolute);

// FoX's bias on the materialising path: c_q [B, H, Sq] and c_k [B, H, Sk] -> c_q - c_k
// [B, H, Sq, Sk] (the causal mask hides the keys after each query).
torch::Tensor gate_bias_scores(const torch::Tensor& c_q, const torch::Tensor& c_k);

}  // namespace posenc::torch_layer
