#include "posenc_torch/rope.h"

#include <memory>
#include <utility>

#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_kernels.h"
#include "posenc_torch/rope_op.h"

namespace posenc::torch_layer {
namespace {

// sign +1: the rotation; -1: its transpose (rotate by -angle; DeepSeek-V3 also reads and writes
// in swapped orders).
torch::Tensor formula(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec, double sign) {
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const RopeApplyParams& p = spec.params();
  const int half = p.num_freqs;
  const torch::Tensor inv = torch::tensor(std::vector<double>(p.inv_freq, p.inv_freq + half), opts);
  torch::Tensor pos = positions.to(torch::kFloat64);  // exact for positions < 2^53
  torch::Tensor angles;                               // [B, S, half]
  if (pos.dim() == 3) {                               // per-frequency axis
    std::vector<std::int64_t> axes(spec.axis_of_freq().begin(), spec.axis_of_freq().end());
    const torch::Tensor picked = pos.index_select(0, torch::tensor(axes, torch::kInt64));  // [half, B, S]
    angles = picked.permute({1, 2, 0}) * inv;
  } else {
    angles = pos.unsqueeze(-1) * inv;
  }
  torch::Tensor scale = torch::full({1}, p.attention_factor, opts);
  if (p.xpos.enabled()) {  // zeta_i^(+-(m - c)/B) (rope_xpos.h), the sign by x's role
    const double role = p.xpos.first == XPosRole::kKey ? -1.0 : 1.0;
    const torch::Tensor zeta = (torch::arange(half, opts) / half + p.xpos.gamma) / (1 + p.xpos.gamma);
    const torch::Tensor at = pos.dim() == 3 ? pos.select(0, 0) : pos;  // xPos reads one position axis
    scale = scale * ((at.unsqueeze(-1) - p.xpos.center) * (zeta.log() * (role / p.xpos.scale_base))).exp();
  }
  const torch::Tensor c = (angles.cos() * scale).to(x.scalar_type()).unsqueeze(1);  // [B, 1, S, half]
  const torch::Tensor s = (angles.sin() * scale * sign).to(x.scalar_type()).unsqueeze(1);
  const torch::Tensor rot = x.narrow(-1, 0, 2 * half), pass = x.narrow(-1, 2 * half, x.size(-1) - 2 * half);
  torch::Tensor out;
  if (p.layout == RopeLayout::kHalfSplit) {
    const torch::Tensor a = rot.narrow(-1, 0, half), b = rot.narrow(-1, half, half);
    out = torch::cat({a * c - b * s, b * c + a * s}, -1);
  } else if (p.layout == RopeLayout::kDeepSeekV3 && sign < 0) {
    // The transpose of DeepSeek-V3's forward (pairs in, halves out): halves in, pairs out.
    const torch::Tensor a = rot.narrow(-1, 0, half), b = rot.narrow(-1, half, half);
    out = torch::stack({a * c - b * s, b * c + a * s}, -1).flatten(-2);
  } else {
    const torch::Tensor pairs = rot.unflatten(-1, {half, 2});
    const torch::Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1);
    const torch::Tensor oa = a * c - b * s, ob = b * c + a * s;
    out = p.layout == RopeLayout::kInterleaved ? torch::stack({oa, ob}, -1).flatten(-2) : torch::cat({oa, ob}, -1);
  }
  return torch::cat({out, pass}, -1);
}

// What every entry point checks first, before any memory is read: the device of each tensor
// (kernel_view.h) and a spec with frequencies. Returns the positions as the kernels read them.
torch::Tensor checked_positions(const torch::Tensor& positions, const RopeSpec& spec, const torch::Tensor& x,
                                const torch::Tensor* k) {
  require_cpu(x, "rope: x");
  if (k) require_cpu(*k, "rope: k");
  torch::Tensor pos = positions_view(positions, "rope: positions");
  if (!spec.table()) throw Error("rope: the RopeSpec has no frequencies (build it from a RopeSchedule)");
  return pos;
}

// The spec as the operators' arguments (rope_op.h): one autograd, posenc::rope's.
RopeOpArgs op_args(const torch::Tensor& positions, const RopeSpec& spec) {
  RopeOpArgs a;
  a.positions = positions;
  a.inv_freq = torch::tensor(spec.inv_freq(), torch::kFloat32);
  a.axis_of_freq.assign(spec.axis_of_freq().begin(), spec.axis_of_freq().end());
  a.attention_factor = spec.params().attention_factor;
  a.layout = to_string(spec.params().layout);
  const XPosParams& xpos = spec.params().xpos;
  a.xpos_scale_base = xpos.scale_base;
  a.xpos_gamma = xpos.gamma;
  a.xpos_center = xpos.center;
  a.xpos_role = xpos.first == XPosRole::kKey ? "key" : "query";
  return a;
}

}  // namespace

RopeSpec::RopeSpec(const RopeSchedule& schedule, RopeLayout layout, std::vector<std::uint8_t> axis_of_freq) {
  auto storage = std::make_shared<Storage>();
  storage->inv_freq = schedule.inv_freq;
  storage->axis_of_freq = std::move(axis_of_freq);
  params_ = rope_apply_params(storage->inv_freq, schedule.attention_factor, layout, storage->axis_of_freq);
  // One position to start with: attention grows it to the positions it reads.
  if (params_.num_freqs > 0) storage->table = std::make_unique<RopeTable>(params_, 1);
  storage_ = std::move(storage);
}

const RopeSpec::Storage& RopeSpec::storage() const {
  static const Storage empty;
  return storage_ ? *storage_ : empty;
}

std::pair<torch::Tensor, torch::Tensor> rope_qk(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& positions,
                                                const RopeSpec& spec) {
  const torch::Tensor pos = checked_positions(positions, spec, q, &k);
  // float64 (gradient checks): the formula, which autograd differentiates; otherwise the kernels.
  if (q.scalar_type() == torch::kFloat64 || k.scalar_type() == torch::kFloat64)
    return {formula(q, pos, spec, 1.0), formula(k, pos, spec.for_keys(), 1.0)};
  // posenc::rope_qk takes no xPos (its schema has no roles): then q and k each through posenc::rope.
  if (spec.params().xpos.enabled()) return {rope_op(q, op_args(pos, spec)), rope_op(k, op_args(pos, spec.for_keys()))};
  return rope_qk_op(q, k, op_args(pos, spec));
}

torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec) {
  const torch::Tensor pos = checked_positions(positions, spec, x, nullptr);
  if (x.scalar_type() == torch::kFloat64) return formula(x, pos, spec, 1.0);
  return rope_op(x, op_args(pos, spec));
}

torch::Tensor rope_formula(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec, bool transpose) {
  return formula(x, positions, spec, transpose ? -1.0 : 1.0);
}

RotaryEmbeddingImpl::RotaryEmbeddingImpl(const RopeParams& params, RopeLayout layout)
    : runtime_(params), layout_(layout), spec_(runtime_.current(), layout) {
  const auto& f = runtime_.current().inv_freq;
  inv_freq = register_buffer("inv_freq", torch::tensor(std::vector<float>(f.begin(), f.end()), torch::kFloat32));
}

RotaryEmbeddingImpl RotaryEmbeddingImpl::from_config(const std::string& path) {
  return RotaryEmbeddingImpl(load_hf_config(path).select().params);
}

RopeSpec RotaryEmbeddingImpl::spec_for(std::int64_t max_position) {
  const RopeSchedule& s = runtime_.update(max_position);
  inv_freq.copy_(torch::tensor(std::vector<float>(s.inv_freq.begin(), s.inv_freq.end()), torch::kFloat32));
  if (s.inv_freq != spec_.inv_freq() || s.attention_factor != spec_.params().attention_factor) spec_ = RopeSpec(s, layout_);
  return spec_;
}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbeddingImpl::forward(const torch::Tensor& q, const torch::Tensor& q_positions,
                                                                     const torch::Tensor& k, const torch::Tensor& k_positions) {
  require_cpu(q, "RotaryEmbedding: q");
  require_cpu(k, "RotaryEmbedding: k");
  const torch::Tensor q_pos = positions_view(q_positions, "RotaryEmbedding: q_positions");
  const torch::Tensor k_pos = positions_view(k_positions, "RotaryEmbedding: k_positions");
  const std::int64_t max_position = std::max(q_pos.max().item<std::int64_t>(), k_pos.max().item<std::int64_t>());
  const RopeSpec spec = spec_for(max_position);
  if (q_positions.is_same(k_positions) || (q_pos.sizes() == k_pos.sizes() && torch::equal(q_pos, k_pos)))
    return rope_qk(q, k, q_pos, spec);
  return {rope(q, q_pos, spec), rope(k, k_pos, spec)};
}

}  // namespace posenc::torch_layer
