// posenc::attention: the core's fused attention forward (CPU kernel) and its backward (the
// Autograd kernel's), boxed: the arguments cross as one list of fields (attention_op_args.h).
#include "posenc_torch/attention_op.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <limits>
#include <memory>

#include "attention_op_args.h"
#include "attention_op_call.h"
#include "op_registration.h"
#include "posenc/attention_backward.h"
#include "posenc/error.h"
#include "posenc_torch/kernel_view.h"

namespace posenc::torch_layer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const c10::OperatorHandle& attention_handle() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("posenc::attention", "");
  return op;
}

// posenc::attention through the dispatcher: the Autograd kernel, then the CPU kernel.
std::pair<at::Tensor, at::Tensor> dispatched(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionOpArgs& args) {
  torch::jit::Stack stack{q, k, v};
  push_fields(args, stack);
  attention_handle().callBoxed(stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

// x with a contiguous last dimension, as the kernels' views need (a copy only when it is not).
at::Tensor rows(const at::Tensor& x) { return x.stride(3) == 1 ? x : x.contiguous(); }

// out [B, Hq, S, D] in q's memory order: [B, S, Hq, D] storage when q's heads are inner to its
// tokens (a transposed [B, S, H, D] tensor), [B, Hq, S, D] otherwise.
at::Tensor output_like(const at::Tensor& q, at::ScalarType dtype) {
  const auto options = q.options().dtype(dtype);
  if (q.size(2) > 1 && q.stride(1) < q.stride(2))
    return at::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, options).transpose(1, 2);
  return at::empty(q.sizes(), options);
}

std::pair<at::Tensor, at::Tensor> forward_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const AttentionOpArgs& a) {
  const AttentionShape s = attention_shape(q, k, v);
  const AttentionCall call(a, s);
  at::Tensor out = output_like(q, q.scalar_type());
  at::Tensor lse = at::empty({s.batch, s.heads, s.q_tokens}, q.options().dtype(at::kFloat));
  if (s.empty()) {  // nothing to attend: zeros, and -inf for rows that see no key
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out, lse};
  }
  const at::Tensor qr = rows(q), kr = rows(k), vr = rows(v);
  const RopeTensor qv = kernel_view(qr, "posenc::attention: q"), kv = kernel_view(kr, "posenc::attention: k");
  const RopeTensor vv = kernel_view(vr, "posenc::attention: v"), ov = kernel_view(out, "posenc::attention: out");
  validate_attention(qv, kv, vv, ov, call.params());
  AttentionOptions options;
  static_cast<KernelOptions&>(options) = call.options();
  options.lse = lse.data_ptr<float>();
  options.bf16_dot_products = a.bf16_dot_products;
  attention(qv, kv, vv, ov, call.params(), options);
  return {out, lse};
}

// dq, dk, dv and the bias input's gradient (undefined without one), in float32 and then in the
// inputs' dtypes: the backward's math is float32 whatever the forward's storage.
variable_list backward_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                           const at::Tensor& lse, const at::Tensor& dout, const AttentionOpArgs& a) {
  const AttentionShape s = attention_shape(q, k, v);
  const AttentionCall call(a, s);
  const at::Tensor qf = rows(q.to(at::kFloat)), kf = rows(k.to(at::kFloat)), vf = rows(v.to(at::kFloat));
  at::Tensor dq = at::zeros_like(qf), dk = at::zeros_like(kf), dv = at::zeros_like(vf);
  at::Tensor dbias = call.bias().defined() ? at::zeros_like(call.bias()) : at::Tensor();
  if (!s.empty()) {
    const at::Tensor of = rows(out.to(at::kFloat)), gf = rows(dout.to(at::kFloat)), lf = lse.contiguous();
    const AttentionBackwardInputs in{kernel_view(qf), kernel_view(kf), kernel_view(vf), kernel_view(of),
                                     kernel_view(gf, "posenc::attention: the gradient of out"), lf.data_ptr<float>()};
    AttentionGradients g{kernel_view(dq), kernel_view(dk), kernel_view(dv)};
    const AttentionParams& p = call.params();
    float* const bias_grad = dbias.defined() ? dbias.data_ptr<float>() : nullptr;
    if (p.positions == AttentionPositions::kT5) g.t5_table_grad = bias_grad;
    if (p.positions == AttentionPositions::kDistanceTable) g.distance_table_grad = bias_grad;
    if (p.positions == AttentionPositions::kForgetGate) g.gate_cumulative_grad = bias_grad;
    validate_attention_backward(in, g, p);
    attention_backward(in, g, p, call.options());
  }
  return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()),
          dbias.defined() ? dbias.to(a.bias->scalar_type()) : at::Tensor()};
}

// The call's arguments for the backward, without their tensors (those are saved variables, so
// a change in place before the backward is autograd's usual error), but with a copy of inv_freq
// (the backward rotates by the frequencies the forward read).
struct ArgsHolder : torch::CustomClassHolder {
  explicit ArgsHolder(AttentionOpArgs a) : args(std::move(a)) {}
  AttentionOpArgs args;
};

at::Tensor or_undefined(const c10::optional<at::Tensor>& x) { return x ? *x : at::Tensor(); }
c10::optional<at::Tensor> or_none(const at::Tensor& x) { return x.defined() ? c10::optional<at::Tensor>(x) : c10::nullopt; }

// The gradients of a backward run with create_graph: each behind a node that raises when it is
// differentiated (torch's once_differentiable does the same in Python), instead of constants
// that would make a double backward silently wrong.
variable_list not_differentiable_again(variable_list grads) {
  for (at::Tensor& g : grads)
    if (g.defined()) g = g.detach().requires_grad_(true);
  torch::autograd::DelayedError error(
      "posenc::attention's backward is not differentiable (a double backward, e.g. a gradient penalty through "
      "attention): use posenc.attention(..., backend='torch'), differentiable to any order",
      static_cast<int>(grads.size()));
  return error.apply(std::move(grads));
}

class AttentionFunction : public torch::autograd::Function<AttentionFunction> {
 public:
  // bias: the differentiable bias input, or an empty placeholder (libtorch 1.13's apply cannot
  // take an undefined tensor); a.bias says which.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& bias, AttentionOpArgs a) {
    if (a.bias) a.bias = bias;
    at::Tensor out, lse;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      std::tie(out, lse) = dispatched(q, k, v, a);
    }
    ctx->mark_non_differentiable({lse});
    ctx->save_for_backward({q, k, v, out, lse, or_undefined(a.bias), or_undefined(a.q_positions),
                            or_undefined(a.k_positions), or_undefined(a.key_padding)});
    a.bias = a.q_positions = a.k_positions = a.key_padding = c10::nullopt;
    if (a.inv_freq) a.inv_freq = a.inv_freq->detach().clone();
    ctx->saved_data["args"] = c10::IValue::make_capsule(c10::make_intrusive<ArgsHolder>(std::move(a)));
    return {out, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    AttentionOpArgs a = c10::static_intrusive_pointer_cast<ArgsHolder>(ctx->saved_data["args"].toCapsule())->args;
    a.bias = or_none(saved[5]);
    a.q_positions = or_none(saved[6]);
    a.k_positions = or_none(saved[7]);
    a.key_padding = or_none(saved[8]);
    variable_list g = backward_cpu(saved[0], saved[1], saved[2], saved[3], saved[4], grads[0], a);
    if (at::GradMode::is_enabled() && grads[0].requires_grad()) g = not_differentiable_again(std::move(g));
    g.push_back(at::Tensor());  // the arguments
    return g;
  }
};

at::Tensor pop_tensor(torch::jit::Stack& stack) {
  at::Tensor x = stack.back().toTensor();
  stack.pop_back();
  return x;
}

void attention_cpu(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const AttentionOpArgs a = pop_fields(*stack);
  const at::Tensor v = pop_tensor(*stack), k = pop_tensor(*stack), q = pop_tensor(*stack);
  auto [out, lse] = forward_cpu(q, k, v, a);
  stack->emplace_back(std::move(out));
  stack->emplace_back(std::move(lse));
}

bool off_cpu(const at::Tensor& x) { return x.defined() && !x.is_cpu(); }

// The torch-native path's (out, lse) onto the stack (attention_native, attention_op.h).
void push_native(torch::jit::Stack& stack, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionOpArgs& a) {
  auto [out, lse] = attention_native(q, k, v, a);
  stack.emplace_back(std::move(out));
  stack.emplace_back(std::move(lse));
}

void attention_autograd(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  AttentionOpArgs a = pop_fields(*stack);
  const at::Tensor v = pop_tensor(*stack), k = pop_tensor(*stack), q = pop_tensor(*stack);
  if (off_cpu(q) || off_cpu(k) || off_cpu(v)) return push_native(*stack, q, k, v, a);  // on a GPU: torch's own autograd
  if (a.inv_freq && a.inv_freq->requires_grad() && at::GradMode::is_enabled())
    throw Error("posenc::attention's kernel gives no gradient to inv_freq: learned frequencies rotate q and k first "
                "(rope_native, or Python's apply_rope) and attend with positions 'none'; off the CPU the torch-native "
                "path differentiates inv_freq");
  const bool bias_grad = a.bias && a.bias->requires_grad();
  if (at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad() || bias_grad))
    a.bf16_dot_products = false;  // the backward recomputes the scores in f32: the lse must match them
  const at::Tensor bias = a.bias ? *a.bias : at::empty({0});
  variable_list out = AttentionFunction::apply(q, k, v, bias, std::move(a));
  stack->emplace_back(std::move(out[0]));
  stack->emplace_back(std::move(out[1]));
}

// Off the CPU below autograd (torch.inference_mode()): the torch-native path.
void attention_other_devices(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const AttentionOpArgs a = pop_fields(*stack);
  const at::Tensor v = pop_tensor(*stack), k = pop_tensor(*stack), q = pop_tensor(*stack);
  push_native(*stack, q, k, v, a);
}

}  // namespace

std::pair<at::Tensor, at::Tensor> attention_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const AttentionOpArgs& args) {
  if (off_cpu(q) || off_cpu(k) || off_cpu(v)) return attention_native(q, k, v, args);
  return dispatched(q, k, v, args);
}

void register_attention_ops(const OpLibraries& libraries) {
  libraries.def.def(attention_schema().c_str());
  libraries.cpu.impl("attention", torch::CppFunction::makeFromBoxedFunction<&attention_cpu>());
  libraries.autograd.impl("attention", torch::CppFunction::makeFromBoxedFunction<&attention_autograd>());
  libraries.other_devices.impl("attention", torch::CppFunction::makeFromBoxedFunction<&attention_other_devices>());
}

}  // namespace posenc::torch_layer
