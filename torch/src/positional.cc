#include "posenc_torch/positional.h"

#include <cmath>

#include "posenc/alibi.h"
#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/learned.h"
#include "posenc/sinusoidal.h"
#include "posenc/transformer_xl.h"
#include "posenc_torch/kernel_view.h"

namespace posenc::torch_layer {
namespace {

// [B, Sq, Sk] of (q - k) in int64.
torch::Tensor differences(const torch::Tensor& q_positions, const torch::Tensor& k_positions) {
  return q_positions.unsqueeze(-1) - k_positions.unsqueeze(-2);
}

// Maps every value of rel (int64) through f, computed once per distinct value of the range.
template <typename F>
torch::Tensor map_range(const torch::Tensor& rel, F&& f) {
  const std::int64_t lo = rel.min().item<std::int64_t>(), hi = rel.max().item<std::int64_t>();
  std::vector<std::int64_t> lut(static_cast<std::size_t>(hi - lo + 1));
  for (std::int64_t r = lo; r <= hi; ++r) lut[static_cast<std::size_t>(r - lo)] = f(r);
  return torch::tensor(lut, torch::kInt64).to(rel.device()).index({rel - lo});
}

}  // namespace

SinusoidalPositionalEncodingImpl::SinusoidalPositionalEncodingImpl(int dim, SinusoidalLayout layout, double base)
    : params_{dim, layout, SinusoidalFreqs::kVaswani, base} {
  validate(params_);
}

torch::Tensor SinusoidalPositionalEncodingImpl::forward(const torch::Tensor& positions) {
  // The core's table is computed on the host: positions on another device (a GPU's) are copied
  // here and the table goes back to their device.
  if (positions.defined() && !positions.is_cpu()) return forward(positions.cpu()).to(positions.device());
  const torch::Tensor pos = positions_view(positions, "SinusoidalPositionalEncoding: positions");
  const std::int64_t* p = pos.data_ptr<std::int64_t>();
  const std::vector<float> table = sinusoidal_table(params_, std::vector<std::int64_t>(p, p + pos.numel()));
  std::vector<std::int64_t> shape(positions.sizes().begin(), positions.sizes().end());
  shape.push_back(params_.dim);
  return torch::tensor(table, torch::kFloat32).view(shape);
}

LearnedPositionalEmbeddingImpl::LearnedPositionalEmbeddingImpl(int num_positions, int dim, int offset)
    : num_positions_(num_positions), offset_(offset) {
  if (num_positions < 1 || dim < 1 || offset < 0) throw Error("learned positions need num_positions, dim >= 1 and offset >= 0");
  weight = register_parameter("weight", torch::randn({num_positions + offset, dim}) * kLearnedInitStd);
}

torch::Tensor LearnedPositionalEmbeddingImpl::forward(const torch::Tensor& positions) {
  const std::int64_t hi = positions.max().item<std::int64_t>(), lo = positions.min().item<std::int64_t>();
  if (hi >= num_positions_ || lo + offset_ < 0)
    throw Error("position " + std::to_string(hi >= num_positions_ ? hi : lo) + " is outside the learned table (0 .. " +
                std::to_string(num_positions_ - 1) + "); this scheme cannot go past its training length");
  return weight.index({positions + offset_});
}

torch::Tensor resize_position_grid(const torch::Tensor& table, int rows, int cols, GridResize mode) {
  if (table.dim() != 3 || !table.is_floating_point())
    throw Error("resize_position_grid: the table must be a floating-point [rows, cols, dim] tensor, got " +
                std::to_string(table.dim()) + " dimensions of " + std::string(c10::toString(table.scalar_type())));
  if (table.requires_grad())
    throw Error("resize_position_grid gives reference values without gradients: pass table.detach(), or train through "
                "torch's interpolate");
  for (int axis = 0; axis < 3; ++axis)  // before the copy, naming the size as given
    if (table.size(axis) < 1 || table.size(axis) > (axis < 2 ? 65536 : (1 << 20)))
      throw Error("resize_position_grid: the table's dimension " + std::to_string(axis) + " is " +
                  std::to_string(table.size(axis)) + "; rows and cols must be in [1, 65536], dim in [1, 2^20]");
  const torch::Tensor host = table.to(torch::kCPU, torch::kFloat32).contiguous();
  PositionGrid grid{static_cast<int>(host.size(0)), static_cast<int>(host.size(1)), static_cast<int>(host.size(2)),
                    std::vector<float>(host.data_ptr<float>(), host.data_ptr<float>() + host.numel())};
  PositionGrid out = resize_position_grid(grid, rows, cols, mode);
  return torch::tensor(out.values, torch::kFloat32).view({rows, cols, out.dim});
}

ALiBiBiasImpl::ALiBiBiasImpl(int num_heads, bool symmetric) : symmetric_(symmetric) {
  slopes = register_buffer("slopes", torch::tensor(alibi_slopes(num_heads), torch::kFloat32));
}

torch::Tensor ALiBiBiasImpl::forward(const torch::Tensor& q_positions, const torch::Tensor& k_positions) {
  torch::Tensor d = differences(q_positions, k_positions).to(torch::kFloat32).unsqueeze(1);  // [B, 1, Sq, Sk]
  if (symmetric_) d = d.abs();
  return -slopes.view({1, -1, 1, 1}) * d;
}

T5RelativeBiasImpl::T5RelativeBiasImpl(int num_heads, const T5BucketParams& buckets) : buckets_(buckets) {
  validate(buckets);
  table = register_parameter("table", torch::randn({buckets.num_buckets, num_heads}) * kLearnedInitStd);
}

torch::Tensor T5RelativeBiasImpl::forward(const torch::Tensor& q_positions, const torch::Tensor& k_positions) {
  const torch::Tensor rel = -differences(q_positions, k_positions);  // key - query
  const torch::Tensor buckets = map_range(rel, [&](std::int64_t r) { return t5_bucket(r, buckets_); });
  return table.index({buckets}).permute({0, 3, 1, 2});  // [B, Sq, Sk, H] -> [B, H, Sq, Sk]
}

XLRelativePositionImpl::XLRelativePositionImpl(int d_model, int num_heads, int head_dim, int clamp_len, bool bidirectional)
    : d_model_(d_model), num_heads_(num_heads), head_dim_(head_dim), clamp_len_(clamp_len), bidirectional_(bidirectional) {
  u = register_parameter("u", torch::zeros({num_heads, head_dim}));
  v = register_parameter("v", torch::zeros({num_heads, head_dim}));
  r_net = register_module("r_net", torch::nn::Linear(torch::nn::LinearOptions(d_model, num_heads * head_dim).bias(false)));
}

torch::Tensor XLRelativePositionImpl::position_scores(const torch::Tensor& q, const torch::Tensor& q_positions,
                                                      const torch::Tensor& k_positions) {
  // Signed distance q - k: past keys > 0; future keys < 0 (kept apart when bidirectional; a
  // causal model masks them, and they share distance 0's row).
  torch::Tensor dist = differences(q_positions, k_positions);  // [B, Sq, Sk]
  if (!bidirectional_) dist = dist.clamp_min(0);
  if (clamp_len_ > 0) dist = dist.clamp(-clamp_len_, clamp_len_);
  const std::int64_t lo = dist.min().item<std::int64_t>(), hi = dist.max().item<std::int64_t>();
  // R for distances lo .. hi: the halves-layout sinusoid [sin(d w) | cos(d w)] of
  // xl_relative_sinusoid (HF's pos_emb; negative d just continue it), projected per head.
  SinusoidalParams sp;
  sp.dim = d_model_;
  sp.layout = SinusoidalLayout::kHalves;
  std::vector<float> rows(static_cast<std::size_t>(hi - lo + 1) * d_model_);
  for (std::int64_t d = lo; d <= hi; ++d)
    sinusoidal_row(sp, static_cast<double>(d), rows.data() + static_cast<std::size_t>(d - lo) * d_model_);
  // A copy (r_net keeps its input for the weight's gradient, and `rows` dies here), on q's device.
  const torch::Tensor r_rows = torch::from_blob(rows.data(), {hi - lo + 1, d_model_}).clone().to(q.device());
  const torch::Tensor r_head = r_net->forward(r_rows).view({hi - lo + 1, num_heads_, head_dim_});  // [D, H, Dh]
  const torch::Tensor bd_raw = torch::einsum("bhid,mhd->bhim", {q + v.view({1, num_heads_, 1, head_dim_}), r_head});
  const torch::Tensor index = (dist - lo).unsqueeze(1).expand({-1, num_heads_, -1, -1});  // [B, H, Sq, Sk]
  return bd_raw.gather(-1, index);
}

DebertaRelativeImpl::DebertaRelativeImpl(int d_model, int num_heads, int head_dim, int position_buckets, int max_relative_positions)
    : num_heads_(num_heads), head_dim_(head_dim), position_buckets_(position_buckets),
      max_relative_positions_(max_relative_positions),
      span_(position_buckets > 0 ? position_buckets : max_relative_positions) {
  deberta_relative_positions(1, 1, {position_buckets, max_relative_positions});  // validates
  rel_embeddings = register_parameter("rel_embeddings", torch::randn({2 * span_, d_model}) * kLearnedInitStd);
  pos_key = register_module("pos_key", torch::nn::Linear(d_model, num_heads * head_dim));
  pos_query = register_module("pos_query", torch::nn::Linear(d_model, num_heads * head_dim));
}

torch::Tensor DebertaRelativeImpl::forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& q_positions,
                                           const torch::Tensor& k_positions) {
  const torch::Tensor rel = differences(q_positions, k_positions);  // query - key
  const torch::Tensor delta = position_buckets_ > 0
      ? map_range(rel, [&](std::int64_t r) { return deberta_log_bucket(r, position_buckets_, max_relative_positions_); })
      : rel;
  const torch::Tensor row = (delta + span_).clamp(0, 2 * span_ - 1).unsqueeze(1).expand({-1, num_heads_, -1, -1});
  const auto heads = [&](const torch::Tensor& x) {  // [2 span, H*Dh] -> [H, 2 span, Dh]
    return x.view({2 * span_, num_heads_, head_dim_}).permute({1, 0, 2});
  };
  const torch::Tensor kr = heads(pos_key->forward(rel_embeddings)), qr = heads(pos_query->forward(rel_embeddings));
  const torch::Tensor c2p = torch::matmul(q, kr.transpose(-1, -2)).gather(-1, row);                      // Qc_i . Kr_row
  const torch::Tensor p2c_all = torch::matmul(k, qr.transpose(-1, -2));                                   // [B, H, Sk, 2 span]
  const torch::Tensor p2c = p2c_all.gather(-1, row.transpose(-1, -2)).transpose(-1, -2);                 // Kc_j . Qr_row(i,j)
  return c2p + p2c;
}

ShawRelativeImpl::ShawRelativeImpl(int head_dim, int max_relative) : max_relative_(max_relative) {
  if (head_dim < 1 || max_relative < 0)
    throw Error("ShawRelative: head_dim " + std::to_string(head_dim) + " must be >= 1 and max_relative " +
                std::to_string(max_relative) + " >= 0");
  rel_k = register_parameter("rel_k", torch::randn({2 * max_relative + 1, head_dim}) * kLearnedInitStd);
  rel_v = register_parameter("rel_v", torch::randn({2 * max_relative + 1, head_dim}) * kLearnedInitStd);
}

torch::Tensor ShawRelativeImpl::rows(const torch::Tensor& q_positions, const torch::Tensor& k_positions) const {
  return differences(q_positions, k_positions).clamp(-max_relative_, max_relative_) + max_relative_;
}

torch::Tensor ShawRelativeImpl::key_scores(const torch::Tensor& q, const torch::Tensor& rows) const {
  const torch::Tensor all = torch::matmul(q, rel_k.transpose(0, 1));  // [B, H, Sq, 2M + 1]
  return all.gather(-1, rows.unsqueeze(1).expand({-1, q.size(1), -1, -1}));
}

torch::Tensor ShawRelativeImpl::value_term(const torch::Tensor& weights, const torch::Tensor& rows) const {
  const torch::Tensor index = rows.unsqueeze(1).expand_as(weights);
  std::vector<std::int64_t> shape = weights.sizes().vec();
  shape.back() = rel_v.size(0);
  const torch::Tensor per_row = torch::zeros(shape, weights.options()).scatter_add(-1, index, weights);  // [B, H, Sq, 2M + 1]
  return torch::matmul(per_row, rel_v);
}

CopeImpl::CopeImpl(int head_dim, int max_pos) : max_pos_(max_pos) {
  if (head_dim < 1 || max_pos < 1)
    throw Error("CoPE: head_dim " + std::to_string(head_dim) + " and max_pos " + std::to_string(max_pos) + " must be >= 1");
  pos_emb = register_parameter("pos_emb", torch::zeros({max_pos, head_dim}));
}

torch::Tensor CopeImpl::term(const torch::Tensor& q, const torch::Tensor& scores, const torch::Tensor& blocked) const {
  const torch::Tensor gates = torch::sigmoid(scores).masked_fill(blocked, 0.0);
  // A NaN score (a diverged model) gives position 0, not a wild gather index: the term is NaN anyway.
  const torch::Tensor p = torch::nan_to_num(gates.flip(-1).cumsum(-1).flip(-1), 0.0).clamp_max(max_pos_ - 1);
  const torch::Tensor z = torch::matmul(q, pos_emb.t());  // [B, H, Sq, max_pos]
  const torch::Tensor floor = p.floor(), w = p - floor;
  return z.gather(-1, p.ceil().to(torch::kInt64)) * w + z.gather(-1, floor.to(torch::kInt64)) * (1 - w);
}

}  // namespace posenc::torch_layer
