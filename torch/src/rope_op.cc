#include "posenc_torch/rope_op.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

#include "posenc/error.h"
#include "posenc/names.h"
#include "posenc/rope_kernels.h"
#include "posenc/threads.h"
#include "posenc_torch/kernel_view.h"
#include "op_registration.h"

namespace posenc::torch_layer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The kernels' parameters for one call; inv_freq and axes stay owned by the caller's vectors.
struct KernelCall {
  std::vector<float> inv_freq;
  std::vector<std::uint8_t> axes;
  RopeApplyParams params;
};

KernelCall kernel_call(const RopeOpArgs& a) {
  if (!a.inv_freq.defined() || a.inv_freq.dim() != 1 || a.inv_freq.scalar_type() != at::kFloat)
    throw Error("posenc::rope: inv_freq must be a float32 [F] tensor");
  require_cpu(a.inv_freq, "posenc::rope: inv_freq");
  const at::Tensor f = a.inv_freq.contiguous();
  KernelCall c;
  c.inv_freq.assign(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  for (const std::int64_t axis : a.axis_of_freq) {
    if (axis < 0 || axis > 2) throw Error("posenc::rope: axis_of_freq entries must be 0, 1 or 2, got " + std::to_string(axis));
    c.axes.push_back(static_cast<std::uint8_t>(axis));
  }
  const auto layout = try_from_name<RopeLayout>(a.layout);
  if (!layout) throw Error("posenc::rope: layout must be half_split, interleaved or deepseek_v3, got '" + a.layout + "'");
  c.params = rope_apply_params(c.inv_freq, a.attention_factor, *layout, c.axes);
  if (a.direction != 1 && a.direction != -1) throw Error("posenc::rope: direction must be 1 or -1, got " + std::to_string(a.direction));
  c.params.direction = static_cast<int>(a.direction);
  if (a.xpos_role != "query" && a.xpos_role != "key") throw Error("posenc::rope: xpos_role must be query or key, got '" + a.xpos_role + "'");
  c.params.xpos.scale_base = a.xpos_scale_base;
  c.params.xpos.gamma = a.xpos_gamma;
  c.params.xpos.center = a.xpos_center;
  c.params.xpos.first = a.xpos_role == "key" ? XPosRole::kKey : XPosRole::kQuery;
  return c;
}

// The positions as the kernels read them, for x [B, H, S, D]; `ids` (int64, contiguous) must
// outlive the result. [S] and [B, S] rows that are all the same take cos/sin once per token.
PositionIds position_ids(const RopeOpArgs& a, const at::Tensor& x, const std::vector<std::uint8_t>& axes, at::Tensor& ids) {
  if (a.offset < 0) throw Error("posenc::rope: offset must be >= 0, got " + std::to_string(a.offset));
  if (!a.positions || !a.positions->defined()) return PositionIds::implicit(a.offset);
  const at::Tensor& p = *a.positions;
  if (p.scalar_type() != at::kLong && p.scalar_type() != at::kInt)
    throw Error(std::string("posenc::rope: positions must be int32 or int64, got ") + c10::toString(p.scalar_type()));
  ids = positions_view(p, "posenc::rope: positions");
  const std::int64_t B = x.size(0), S = x.size(2);
  const bool flat = p.dim() == 1 && p.size(0) == S, rows = p.dim() == 2 && p.size(0) == B && p.size(1) == S;
  const bool axial = p.dim() == 3 && p.size(0) >= 1 && p.size(0) <= 3 && p.size(1) == B && p.size(2) == S;
  if (!flat && !rows && !axial)
    throw Error("posenc::rope: positions must be [S], [B, S] or [axes, B, S] with B = " + std::to_string(B) +
                ", S = " + std::to_string(S) + ", got " + c10::str(p.sizes()));
  if (axial && axes.empty()) throw Error("posenc::rope: [axes, B, S] positions need axis_of_freq (M-RoPE, a vision tower)");
  if (!axial && !axes.empty() && *std::max_element(axes.begin(), axes.end()) > 0)
    throw Error("posenc::rope: this axis_of_freq reads several position axes: positions must be [axes, B, S]");
  PositionIds out = PositionIds::explicit_ids(ids.data_ptr<std::int64_t>(), axial ? static_cast<int>(p.size(0)) : 1, B * S);
  out.offset = a.offset;
  out.shared_across_batch = flat || (rows && (B <= 1 || ids.eq(ids.narrow(0, 0, 1)).all().item<bool>()));
  return out;
}

// A copy to rotate in place, in x's memory order when its channels are contiguous (a gradient
// may arrive expanded or with strided channels: then a contiguous copy).
at::Tensor fresh_copy(const at::Tensor& x) {
  const bool dense = x.stride(-1) == 1 && x.is_non_overlapping_and_dense();
  return dense ? x.clone() : x.contiguous();
}

void check_tensor(const at::Tensor& x, const char* what) {
  require_cpu(x, what);
  if (x.dim() != 4) throw Error(std::string(what) + " must be 4-D [B, H, S, D], got " + std::to_string(x.dim()) + "-D");
  if (x.scalar_type() == at::kDouble)
    throw Error(std::string(what) + " is float64: the kernels take float32, bfloat16 or float16; float64 takes the "
                "formula (rope_formula; Python backend='torch')");
}

// Rotates out (and k_out) in place through the kernels; both fresh copies of the inputs.
void rotate(at::Tensor& out, at::Tensor* k_out, const RopeOpArgs& a) {
  const KernelCall c = kernel_call(a);
  at::Tensor ids;
  const PositionIds positions = position_ids(a, out, c.axes, ids);
  if (k_out && (out.numel() == 0 || k_out->numel() == 0)) {  // one of them empty: the other alone
    if (out.numel() != 0) rotate(out, nullptr, a);
    if (k_out->numel() != 0) rotate(*k_out, nullptr, a);
    return;
  }
  if (out.numel() == 0) return;
  const RopeTensor x = kernel_view(out, "posenc::rope: x");
  RopeKernelOptions options;
  options.threads = std::clamp(at::get_num_threads(), 1, kMaxThreads);
  if (k_out) {
    if (k_out->size(0) != out.size(0) || k_out->size(2) != out.size(2))
      throw Error("posenc::rope_qk: q and k need the same batch and tokens, got " + c10::str(out.sizes()) + " and " +
                  c10::str(k_out->sizes()));
    const RopeTensor k = kernel_view(*k_out, "posenc::rope_qk: k");
    validate(x, positions, c.params);
    validate(k, positions, c.params);
    rope_rotate(x, &k, positions, c.params, options);
  } else {
    validate(x, positions, c.params);
    rope_rotate(x, nullptr, positions, c.params, options);
  }
}

RopeOpArgs args_of(const c10::optional<at::Tensor>& positions, const at::Tensor& inv_freq, c10::IntArrayRef axes,
                   double attention_factor, c10::string_view layout, std::int64_t offset, std::int64_t direction) {
  RopeOpArgs a;
  a.positions = positions;
  a.inv_freq = inv_freq;
  a.axis_of_freq = axes.vec();
  a.attention_factor = attention_factor;
  a.layout = std::string(layout);
  a.offset = offset;
  a.direction = direction;
  return a;
}

// posenc::rope's xPos arguments (rope_qk has none).
RopeOpArgs with_xpos(RopeOpArgs a, double scale_base, double gamma, double center, c10::string_view role) {
  a.xpos_scale_base = scale_base;
  a.xpos_gamma = gamma;
  a.xpos_center = center;
  a.xpos_role = std::string(role);
  return a;
}

// ---- CPU kernels (below autograd) ----

at::Tensor rope_cpu(const at::Tensor& x, const c10::optional<at::Tensor>& positions, const at::Tensor& inv_freq,
                    c10::IntArrayRef axes, double attention_factor, c10::string_view layout, std::int64_t offset,
                    std::int64_t direction, double xpos_scale_base, double xpos_gamma, double xpos_center,
                    c10::string_view xpos_role) {
  check_tensor(x, "posenc::rope: x");
  const RopeOpArgs a = with_xpos(args_of(positions, inv_freq, axes, attention_factor, layout, offset, direction), xpos_scale_base,
                                 xpos_gamma, xpos_center, xpos_role);
  at::Tensor out = fresh_copy(x);
  rotate(out, nullptr, a);
  return out;
}

std::tuple<at::Tensor, at::Tensor> rope_qk_cpu(const at::Tensor& q, const at::Tensor& k, const c10::optional<at::Tensor>& positions,
                                               const at::Tensor& inv_freq, c10::IntArrayRef axes, double attention_factor,
                                               c10::string_view layout, std::int64_t offset, std::int64_t direction) {
  check_tensor(q, "posenc::rope_qk: q");
  check_tensor(k, "posenc::rope_qk: k");
  at::Tensor qo = fresh_copy(q), ko = fresh_copy(k);
  rotate(qo, &ko, args_of(positions, inv_freq, axes, attention_factor, layout, offset, direction));
  return {qo, ko};
}

// ---- Autograd: the backward of y = R x is R^T g, the same operator with -direction ----

void save_args(AutogradContext* ctx, const RopeOpArgs& a) {
  // Saved as a variable: positions changed in place before the backward are an error, as for
  // any tensor autograd saves, not a silent rotation by other angles.
  ctx->save_for_backward({a.positions ? *a.positions : at::Tensor()});
  ctx->saved_data["inv_freq"] = a.inv_freq;
  ctx->saved_data["axes"] = a.axis_of_freq;
  ctx->saved_data["attention_factor"] = a.attention_factor;
  ctx->saved_data["layout"] = a.layout;
  ctx->saved_data["offset"] = a.offset;
  ctx->saved_data["direction"] = a.direction;
  ctx->saved_data["xpos"] = std::vector<double>{a.xpos_scale_base, a.xpos_gamma, a.xpos_center};
  ctx->saved_data["xpos_role"] = a.xpos_role;
}

// The saved call with the opposite direction: the transpose.
RopeOpArgs transposed_args(AutogradContext* ctx) {
  RopeOpArgs a;
  const at::Tensor p = ctx->get_saved_variables()[0];
  if (p.defined()) a.positions = p;
  a.inv_freq = ctx->saved_data["inv_freq"].toTensor();
  a.axis_of_freq = ctx->saved_data["axes"].toIntVector();
  a.attention_factor = ctx->saved_data["attention_factor"].toDouble();
  a.layout = ctx->saved_data["layout"].toStringRef();
  a.offset = ctx->saved_data["offset"].toInt();
  a.direction = -ctx->saved_data["direction"].toInt();
  const std::vector<double> xpos = ctx->saved_data["xpos"].toDoubleVector();
  a.xpos_scale_base = xpos[0];
  a.xpos_gamma = xpos[1];
  a.xpos_center = xpos[2];
  a.xpos_role = ctx->saved_data["xpos_role"].toStringRef();
  return a;
}

void refuse_learned_frequencies(const at::Tensor& inv_freq) {
  if (inv_freq.requires_grad() && at::GradMode::is_enabled())
    throw Error("posenc::rope gives no gradient to inv_freq: learned frequencies take the formula "
                "(Python: backend='auto' or 'torch'; C++: rope_formula)");
}

class RopeOpFunction : public torch::autograd::Function<RopeOpFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const RopeOpArgs& a) {
    save_args(ctx, a);
    at::AutoDispatchBelowADInplaceOrView guard;
    return rope_op(x, a);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    return {rope_op(grads[0], transposed_args(ctx)), at::Tensor()};
  }
};

class RopeQKOpFunction : public torch::autograd::Function<RopeQKOpFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const RopeOpArgs& a) {
    save_args(ctx, a);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [qo, ko] = rope_qk_op(q, k, a);
    return {qo, ko};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const RopeOpArgs a = transposed_args(ctx);
    at::Tensor gq = grads[0], gk = grads[1];
    if (gq.defined() && gk.defined()) {
      std::tie(gq, gk) = rope_qk_op(gq, gk, a);
    } else if (gq.defined() || gk.defined()) {  // a gradient that reached one of them alone
      at::Tensor& g = gq.defined() ? gq : gk;
      g = rope_op(g, a);
    }
    return {gq, gk, at::Tensor()};
  }
};

at::Tensor rope_autograd(const at::Tensor& x, const c10::optional<at::Tensor>& positions, const at::Tensor& inv_freq,
                         c10::IntArrayRef axes, double attention_factor, c10::string_view layout, std::int64_t offset,
                         std::int64_t direction, double xpos_scale_base, double xpos_gamma, double xpos_center,
                         c10::string_view xpos_role) {
  RopeOpArgs a = with_xpos(args_of(positions, inv_freq, axes, attention_factor, layout, offset, direction), xpos_scale_base,
                           xpos_gamma, xpos_center, xpos_role);
  if (x.defined() && !x.is_cpu()) return rope_native(x, a);  // torch.ops.posenc.rope on a GPU: torch's own autograd
  refuse_learned_frequencies(inv_freq);
  a.inv_freq = inv_freq.detach();
  return RopeOpFunction::apply(x, a);
}

std::tuple<at::Tensor, at::Tensor> rope_qk_autograd(const at::Tensor& q, const at::Tensor& k,
                                                    const c10::optional<at::Tensor>& positions, const at::Tensor& inv_freq,
                                                    c10::IntArrayRef axes, double attention_factor, c10::string_view layout,
                                                    std::int64_t offset, std::int64_t direction) {
  if ((q.defined() && !q.is_cpu()) || (k.defined() && !k.is_cpu()))  // on a GPU: torch's own autograd
    return rope_qk_op(q, k, args_of(positions, inv_freq, axes, attention_factor, layout, offset, direction));
  refuse_learned_frequencies(inv_freq);
  const variable_list out =
      RopeQKOpFunction::apply(q, k, args_of(positions, inv_freq.detach(), axes, attention_factor, layout, offset, direction));
  return {out[0], out[1]};
}

}  // namespace

at::Tensor rope_op(const at::Tensor& x, const RopeOpArgs& a) {
  if (x.defined() && !x.is_cpu()) return rope_native(x, a);
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("posenc::rope", "").typed<decltype(rope_cpu)>();
  return op.call(x, a.positions, a.inv_freq, a.axis_of_freq, a.attention_factor, a.layout, a.offset, a.direction,
                 a.xpos_scale_base, a.xpos_gamma, a.xpos_center, a.xpos_role);
}

std::pair<at::Tensor, at::Tensor> rope_qk_op(const at::Tensor& q, const at::Tensor& k, const RopeOpArgs& a) {
  if ((q.defined() && !q.is_cpu()) || (k.defined() && !k.is_cpu())) {
    RopeOpArgs plain = a;  // as the kernel: posenc::rope_qk's schema has no xPos
    plain.xpos_scale_base = 0;
    return {rope_native(q, plain), rope_native(k, plain)};
  }
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("posenc::rope_qk", "").typed<decltype(rope_qk_cpu)>();
  auto [qo, ko] = op.call(q, k, a.positions, a.inv_freq, a.axis_of_freq, a.attention_factor, a.layout, a.offset, a.direction);
  return {qo, ko};
}

namespace {

// posenc::rope_native: rope_native with the operator's arguments, a CompositeImplicitAutograd
// kernel (torch's own autograd through the operations it calls), on any device.
at::Tensor rope_native_op(const at::Tensor& x, const c10::optional<at::Tensor>& positions, const at::Tensor& inv_freq,
                          c10::IntArrayRef axes, double attention_factor, c10::string_view layout, std::int64_t offset,
                          std::int64_t direction, double xpos_scale_base, double xpos_gamma, double xpos_center,
                          c10::string_view xpos_role) {
  const RopeOpArgs a = with_xpos(args_of(positions, inv_freq, axes, attention_factor, layout, offset, direction), xpos_scale_base,
                                 xpos_gamma, xpos_center, xpos_role);
  return rope_native(x, a);
}

// posenc::rope_qk off the CPU below autograd: each tensor through rope_native (no xPos: the schema has none).
std::tuple<at::Tensor, at::Tensor> rope_qk_native_op(const at::Tensor& q, const at::Tensor& k, const c10::optional<at::Tensor>& positions,
                                                     const at::Tensor& inv_freq, c10::IntArrayRef axes, double attention_factor,
                                                     c10::string_view layout, std::int64_t offset, std::int64_t direction) {
  const RopeOpArgs a = args_of(positions, inv_freq, axes, attention_factor, layout, offset, direction);
  return {rope_native(q, a), rope_native(k, a)};
}

}  // namespace

void register_rope_ops(const OpLibraries& libraries) {
  libraries.def.def("rope_native(Tensor x, Tensor? positions, Tensor inv_freq, int[] axis_of_freq, float attention_factor, "
                    "str layout, int offset, int direction, float xpos_scale_base=0., float xpos_gamma=0.4, "
                    "float xpos_center=0., str xpos_role=\"query\") -> Tensor");
  libraries.def.impl("rope_native", rope_native_op);
  libraries.def.def("rope(Tensor x, Tensor? positions, Tensor inv_freq, int[] axis_of_freq, float attention_factor, str layout, "
                    "int offset, int direction, float xpos_scale_base=0., float xpos_gamma=0.4, float xpos_center=0., "
                    "str xpos_role=\"query\") -> Tensor");
  libraries.def.def("rope_qk(Tensor q, Tensor k, Tensor? positions, Tensor inv_freq, int[] axis_of_freq, float attention_factor, "
                    "str layout, int offset, int direction) -> (Tensor, Tensor)");
  libraries.cpu.impl("rope", rope_cpu);
  libraries.cpu.impl("rope_qk", rope_qk_cpu);
  libraries.autograd.impl("rope", rope_autograd);
  libraries.autograd.impl("rope_qk", rope_qk_autograd);
  libraries.other_devices.impl("rope", rope_native_op);
  libraries.other_devices.impl("rope_qk", rope_qk_native_op);
}

}  // namespace posenc::torch_layer
