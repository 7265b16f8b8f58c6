#include "posenc_torch/fused_attention.h"

#include <string>
#include <utility>

#include "posenc/attention_backward.h"
#include "posenc/error.h"

namespace posenc::torch_layer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The spec rides in the autograd graph to backward (a capsule in saved_data): backward builds the
// same AttentionParams the forward used.
struct SpecHolder : torch::CustomClassHolder {
  explicit SpecHolder(FusedAttentionSpec s) : spec(std::move(s)) {}
  FusedAttentionSpec spec;
};

// q, k, v and gradients: float32 [B, H, tokens, D] with contiguous channels (copied if not).
torch::Tensor float_rows(const torch::Tensor& x, const char* name) {
  if (!x.defined() || x.dim() != 4)
    throw Error(std::string("fused_attention: ") + name + " must be a 4-D tensor [B, heads, tokens, head_dim]");
  if (x.scalar_type() != torch::kFloat)
    throw Error(std::string("fused_attention: ") + name + " must be float32, got " + c10::toString(x.scalar_type()));
  return x.stride(3) == 1 ? x : x.contiguous();
}

std::string shape(const torch::Tensor& x) { return c10::str(x.sizes()); }

// libtorch 1.13's Function::apply cannot take an undefined tensor (it records each input's
// device): an absent position, padding or table tensor travels as an empty one.
torch::Tensor absent() { return torch::empty({0}); }
bool present(const torch::Tensor& x) { return x.numel() > 0; }

// Positions or padding as the kernels read them: contiguous [B, tokens] (positions may also be
// [1, tokens], one row for every batch row).
torch::Tensor per_token(const torch::Tensor& x, torch::ScalarType type, std::int64_t B, std::int64_t tokens, bool one_row_ok,
                        const char* name) {
  if (x.dim() != 2 || x.size(1) != tokens || !(x.size(0) == B || (one_row_ok && x.size(0) == 1)))
    throw Error(std::string("fused_attention: ") + name + " must be [" + std::to_string(B) + ", " + std::to_string(tokens) +
                "], got " + shape(x));
  return x.to(type).contiguous();
}

PositionIds ids_of(const torch::Tensor& pos) {
  if (!present(pos)) return PositionIds::implicit();
  PositionIds ids = PositionIds::explicit_ids(pos.data_ptr<std::int64_t>());
  // Every batch row at the same positions: RoPE's cos/sin once per token (and [1, tokens] reads row 0).
  ids.shared_across_batch = pos.size(0) == 1 || pos.eq(pos.narrow(0, 0, 1)).all().item<bool>();
  return ids;
}

// The core's parameters over the spec and the prepared tensors (which must outlive them).
AttentionParams params_of(const FusedAttentionSpec& spec, const torch::Tensor& q_positions, const torch::Tensor& k_positions,
                          const torch::Tensor& padding, const torch::Tensor& table) {
  AttentionParams p;
  p.scale = spec.scale;
  p.mask.causal = spec.causal;
  p.mask.past = spec.past;
  p.mask.sliding_window = spec.sliding_window;
  p.mask.chunk = spec.chunk;
  p.mask.key_padding = present(padding) ? padding.data_ptr<std::uint8_t>() : nullptr;
  p.positions = spec.positions;
  p.q_positions = ids_of(q_positions);
  p.k_positions = ids_of(k_positions);
  if (spec.positions == AttentionPositions::kRope)
    p.rope = rope_apply_params(spec.rope.inv_freq, spec.rope.attention_factor, spec.rope.layout, spec.rope.axis_of_freq);
  p.alibi_slopes = spec.alibi_slopes.empty() ? nullptr : spec.alibi_slopes.data();
  p.alibi_mode = spec.alibi_mode;
  p.t5_table = present(table) ? table.data_ptr<float>() : nullptr;
  p.t5 = spec.t5;
  return p;
}

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  // q, k, v, table: differentiable; positions and padding: prepared by fused_attention().
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& table, const torch::Tensor& q_positions, const torch::Tensor& k_positions,
                               const torch::Tensor& padding, const c10::intrusive_ptr<SpecHolder>& holder) {
    const torch::Tensor qc = float_rows(q, "q"), kc = float_rows(k, "k"), vc = float_rows(v, "v");
    const torch::Tensor tc = table.contiguous();
    const AttentionParams p = params_of(holder->spec, q_positions, k_positions, padding, tc);
    const std::int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
    torch::Tensor out = torch::empty({B, S, H, D}, q.options());
    torch::Tensor lse = torch::empty({B, H, S}, q.options());
    AttentionOptions options;
    options.threads = torch::get_num_threads();
    options.lse = lse.data_ptr<float>();
    attention(kernel_view(qc), kernel_view(kc), kernel_view(vc), kernel_view(out.transpose(1, 2)), p, options);
    ctx->save_for_backward({qc, kc, vc, out, lse, tc});
    ctx->saved_data["q_positions"] = q_positions;
    ctx->saved_data["k_positions"] = k_positions;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["spec"] = c10::IValue::make_capsule(holder);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4], &table = saved[5];
    const torch::Tensor q_positions = ctx->saved_data["q_positions"].toTensor(), k_positions = ctx->saved_data["k_positions"].toTensor();
    const torch::Tensor padding = ctx->saved_data["padding"].toTensor();
    const auto holder = c10::static_intrusive_pointer_cast<SpecHolder>(ctx->saved_data["spec"].toCapsule());
    const AttentionParams p = params_of(holder->spec, q_positions, k_positions, padding, table);
    // dout arrives [B, S, Hq, D] like out; the kernels read it as [B, Hq, S, D].
    const torch::Tensor dout = float_rows(grads[0].transpose(1, 2), "the gradient of out");
    // dq in out's memory order ([B, S, Hq, D] storage): the kernels write rows, any strides.
    torch::Tensor dq = torch::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options()).transpose(1, 2);
    torch::Tensor dk = torch::empty_like(k, torch::MemoryFormat::Contiguous), dv = torch::empty_like(v, torch::MemoryFormat::Contiguous);
    torch::Tensor dtable = present(table) ? torch::zeros_like(table) : torch::Tensor();
    AttentionBackwardInputs in{kernel_view(q), kernel_view(k), kernel_view(v), kernel_view(out.transpose(1, 2)), kernel_view(dout),
                               lse.data_ptr<float>()};
    AttentionGradients g{kernel_view(dq), kernel_view(dk), kernel_view(dv), dtable.defined() ? dtable.data_ptr<float>() : nullptr};
    attention_backward(in, g, p, {torch::get_num_threads()});
    return {dq, dk, dv, dtable, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fused_attention(const FusedAttentionTensors& t, const FusedAttentionSpec& spec) {
  if (spec.positions == AttentionPositions::kT5 &&
      (!t.t5_table.defined() || t.t5_table.scalar_type() != torch::kFloat || t.t5_table.dim() != 2))
    throw Error("fused_attention: T5 needs t5_table, float32 [num_buckets, Hq]");
  for (const auto& [x, name] : {std::pair{&t.q, "q"}, std::pair{&t.k, "k"}, std::pair{&t.v, "v"}, std::pair{&t.t5_table, "t5_table"}})
    if (x->defined() && !x->is_cpu()) throw Error(std::string("fused_attention: ") + name + " must be on the CPU, got " + x->device().str());
  // The kernel indexes the table as [bucket][head] through a raw pointer: its shape must be exact.
  if (spec.positions == AttentionPositions::kT5 && t.q.defined() &&
      (t.t5_table.size(0) != spec.t5.num_buckets || t.t5_table.size(1) != t.q.size(1)))
    throw Error("fused_attention: t5_table must be [num_buckets, Hq] = [" + std::to_string(spec.t5.num_buckets) + ", " +
                std::to_string(t.q.size(1)) + "], got " + shape(t.t5_table));
  if (spec.positions == AttentionPositions::kAlibi && t.q.defined() && static_cast<std::int64_t>(spec.alibi_slopes.size()) != t.q.size(1))
    throw Error("fused_attention: ALiBi needs one slope per query head: " + std::to_string(spec.alibi_slopes.size()) +
                " slopes, " + std::to_string(t.q.size(1)) + " heads");
  float_rows(t.q, "q");
  float_rows(t.k, "k");
  const std::int64_t B = t.q.size(0), S = t.q.size(2), T = t.k.size(2);
  const torch::Tensor padding = t.key_padding.defined() ? per_token(t.key_padding.ne(0), torch::kUInt8, B, T, false, "key_padding")
                                                        : absent();
  torch::Tensor q_positions = absent(), k_positions = absent();
  if (spec.positions != AttentionPositions::kNone) {
    if (!t.q_positions.defined() || !t.k_positions.defined())
      throw Error(std::string("fused_attention: positions '") + to_string(spec.positions) + "' need q_positions and k_positions");
    q_positions = per_token(t.q_positions, torch::kInt64, B, S, true, "q_positions");
    k_positions = per_token(t.k_positions, torch::kInt64, B, T, true, "k_positions");
  }
  const torch::Tensor table = spec.positions == AttentionPositions::kT5 ? t.t5_table : absent();
  return FusedAttentionFunction::apply(t.q, t.k, t.v, table, q_positions, k_positions, padding, c10::make_intrusive<SpecHolder>(spec));
}

}  // namespace posenc::torch_layer
