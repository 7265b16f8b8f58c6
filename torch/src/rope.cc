#include "posenc_torch/rope.h"

#include <memory>
#include <utility>

#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_kernels.h"
#include "posenc_torch/rope_op.h"

namespace posenc::torch_layer {
namespace {

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

// sign +1: the rotation; -1: its transpose (rotate by -angle; DeepSeek-V3 also reads and writes
// in swapped orders): rope_native, the torch-native path, with the spec's arguments.
torch::Tensor formula(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec, double sign) {
  RopeOpArgs a = op_args(positions, spec);
  a.direction = sign < 0 ? -1 : 1;
  return rope_native(x, a);
}

// The kernels read CPU tensors of float32, bfloat16 or float16; any other tensor (a GPU's, or
// float64 for gradient checks) takes the formula on its own device.
bool takes_formula(const torch::Tensor& x) { return !x.is_cpu() || x.scalar_type() == torch::kFloat64; }

// Position ids as the path x takes reads them: for the kernels int64, contiguous, on the CPU
// (kernel_view.h); for the formula int64 where they are (rope_native moves them to x's device
// after checking them on the host).
torch::Tensor ids_for(const torch::Tensor& x, const torch::Tensor& positions, const char* what) {
  if (x.is_cpu()) return positions_view(positions, what);
  if (!positions.defined()) throw Error(std::string(what) + ": a tensor of position ids is needed, got an undefined one");
  return positions.to(torch::kLong);
}

// What every entry point checks first, before any memory is read: a spec with frequencies, and
// the positions on the path's device.
torch::Tensor checked_positions(const torch::Tensor& positions, const RopeSpec& spec, const torch::Tensor& x) {
  if (!spec.table()) throw Error("rope: the RopeSpec has no frequencies (build it from a RopeSchedule)");
  return ids_for(x, positions, "rope: positions");
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
  // float64 (gradient checks) or a tensor off the CPU: the formula, which autograd differentiates.
  if (takes_formula(q) || takes_formula(k)) {
    const torch::Tensor pos = checked_positions(positions, spec, q.is_cpu() ? k : q);
    return {formula(q, pos, spec, 1.0), formula(k, pos, spec.for_keys(), 1.0)};
  }
  const torch::Tensor pos = checked_positions(positions, spec, q);
  // posenc::rope_qk takes no xPos (its schema has no roles): then q and k each through posenc::rope.
  if (spec.params().xpos.enabled()) return {rope_op(q, op_args(pos, spec)), rope_op(k, op_args(pos, spec.for_keys()))};
  return rope_qk_op(q, k, op_args(pos, spec));
}

torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& positions, const RopeSpec& spec) {
  const torch::Tensor pos = checked_positions(positions, spec, x);
  if (takes_formula(x)) return formula(x, pos, spec, 1.0);
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
  const torch::Tensor q_pos = ids_for(q, q_positions, "RotaryEmbedding: q_positions");
  const torch::Tensor k_pos = ids_for(k, k_positions, "RotaryEmbedding: k_positions");
  // The runtime rule reads the largest position on the host, from the positions as given.
  const auto largest = [](const torch::Tensor& p) { return p.max().item<std::int64_t>(); };
  const std::int64_t max_position = std::max(largest(q_positions), largest(k_positions));
  const RopeSpec spec = spec_for(max_position);
  if (q_positions.is_same(k_positions) || (q_pos.sizes() == k_pos.sizes() && torch::equal(q_pos, k_pos)))
    return rope_qk(q, k, q_pos, spec);
  return {rope(q, q_pos, spec), rope(k, k_pos, spec)};
}

}  // namespace posenc::torch_layer
