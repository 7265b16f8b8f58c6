// AttentionImpl::attend: one block of queries against the keys it can see, on the materialising
// path, with each scheme's content-dependent terms (XL's, DeBERTa's, Shaw's, CoPE's) and the masks.
#include <algorithm>
#include <cmath>

#include "posenc_torch/distance_bias.h"
#include "posenc_torch/model.h"

namespace posenc::torch_layer {

torch::Tensor AttentionImpl::attend(const torch::Tensor& q_all, const torch::Tensor& k_all, const torch::Tensor& v_all,
                                    const ForwardContext& ctx, std::int64_t q0, std::int64_t rows, const torch::Tensor& gate) {
  const std::int64_t B = q_all.size(0), T_all = k_all.size(2);
  const int H = config_.n_heads, dh = config_.head_dim();
  // Causal: query q0 + i sees key j when j <= past + q0 + i, so keys after past + q0 + rows - 1
  // are masked for every query of the block and are left out (about half the work over all
  // blocks). One block over every query keeps all T keys.
  const std::int64_t T = config_.causal ? std::min(T_all, ctx.past + q0 + rows) : T_all;
  const torch::Tensor q = q_all.narrow(2, q0, rows), k = k_all.narrow(2, 0, T), v = v_all.narrow(2, 0, T);
  const torch::Tensor q_positions = ctx.q_positions.narrow(1, q0, rows), k_positions = ctx.k_positions.narrow(1, 0, T);
  torch::Tensor scores, shaw_rows;  // [B, H, rows, T]; Shaw's table rows [B, rows, T]
  if (config_.scheme == Scheme::kXl) {
    const torch::Tensor ac = torch::matmul(q + xl->content_bias().view({1, H, 1, dh}), k.transpose(-1, -2));
    scores = (ac + xl->position_scores(q, q_positions, k_positions)) / std::sqrt(static_cast<double>(dh));
  } else if (config_.scheme == Scheme::kDeberta) {
    scores = (torch::matmul(q, k.transpose(-1, -2)) + deberta->forward(q, k, q_positions, k_positions)) / std::sqrt(3.0 * dh);
  } else if (shaw) {  // HF BERT's relative_key: the position term added before the scaling
    shaw_rows = shaw->rows(q_positions, k_positions);
    scores = (torch::matmul(q, k.transpose(-1, -2)) + shaw->key_scores(q, shaw_rows)) / std::sqrt(static_cast<double>(dh));
  } else {
    scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(dh));
  }
  // Masks: padding keys always; future keys when causal (by index: key j is visible to query i
  // when j <= past + i). A large finite negative, not -inf: a fully masked row (a pad query)
  // then stays finite and cannot spread NaN into real tokens through 0 * NaN. Such a row
  // averages the values it is given (all T in one block, the block's T' here); nothing reads
  // it: pad keys are masked for every query and pad tokens are not scored.
  torch::Tensor blocked = ctx.key_mask.narrow(1, 0, T).logical_not().view({B, 1, 1, T});
  if (config_.causal) {
    const auto on = q.options().dtype(torch::kInt64);  // q's device
    const torch::Tensor qi = torch::arange(rows, on).view({rows, 1}) + (ctx.past + q0);
    const torch::Tensor kj = torch::arange(T, on).view({1, T});
    blocked = blocked.logical_or((kj > qi).view({1, 1, rows, T}));
  }
  if (ctx.bias.defined()) scores = scores + ctx.bias.narrow(2, q0, rows).narrow(3, 0, T);
  if (ctx.fire) scores = scores + ctx.fire->scores(q_positions, k_positions);  // FIRE: per block, never S x T at once
  if (gate.defined()) scores = scores + gate_bias_scores(gate.narrow(2, ctx.past + q0, rows), gate.narrow(2, 0, T));
  // CoPE: each query's open gates over its visible keys (every visible key of a row is in its
  // block: the keys cut off are masked for the whole block, and their gates are 0).
  if (cope) scores = scores + cope->term(q, scores, blocked);
  scores = scores.masked_fill(blocked, -1e30f);
  torch::Tensor weights = torch::softmax(scores, -1);
  if (record) last_weights = weights.detach();
  weights = dropout->forward(weights);
  torch::Tensor out = torch::matmul(weights, v);  // [B, H, rows, Dh]
  if (shaw) out = out + shaw->value_term(weights, shaw_rows);  // Shaw's relative values
  return out.transpose(1, 2).reshape({B, rows, H * dh});
}

}  // namespace posenc::torch_layer
