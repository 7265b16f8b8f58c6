#include "posenc_torch/fused_attention.h"

#include <string>
#include <utility>

#include "posenc/attention_backward.h"
#include "posenc/error.h"

namespace posenc::torch_layer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The spec rides in the autograd graph to backward (a capsule in saved_data): backward reads the
// same AttentionParams, positions and cos/sin table the forward read.
struct SpecHolder : torch::CustomClassHolder {
  explicit SpecHolder(std::shared_ptr<const AttentionSpec> s) : spec(std::move(s)) {}
  std::shared_ptr<const AttentionSpec> spec;
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
// device): an absent T5 table travels as an empty one.
torch::Tensor absent() { return torch::empty({0}); }
bool present(const torch::Tensor& x) { return x.numel() > 0; }

// Positions (or padding) must be [B, tokens], positions also [1, tokens] (one row for every
// batch row): the kernels index them through raw pointers.
void check_rows(const torch::Tensor& x, std::int64_t B, std::int64_t tokens, bool one_row_ok, const char* name) {
  if (x.dim() != 2 || x.size(1) != tokens || !(x.size(0) == B || (one_row_ok && x.size(0) == 1)))
    throw Error(std::string("fused_attention: ") + name + " must be [" + std::to_string(B) + ", " + std::to_string(tokens) +
                "], got " + shape(x));
}

// Ids over positions_view's tensor; [1, tokens] is read as every batch row's. Rows that happen to
// be equal need no flag: RoPE reads its table by position, the biases compute from positions.
PositionIds ids_of(const torch::Tensor& pos) {
  if (!pos.defined()) return PositionIds::implicit();
  PositionIds ids = PositionIds::explicit_ids(pos.data_ptr<std::int64_t>());
  ids.shared_across_batch = pos.size(0) == 1;
  return ids;
}

// Points the bias input of p's positions (T5's table, the distance table, FoX's c) at bias.
void set_bias(AttentionParams& p, const torch::Tensor& bias) {
  const float* values = present(bias) ? bias.data_ptr<float>() : nullptr;
  if (p.positions == AttentionPositions::kT5) p.t5_table = values;
  if (p.positions == AttentionPositions::kDistanceTable) p.distance_table.values = values;
  if (p.positions == AttentionPositions::kForgetGate) p.gate_cumulative = values;
}

KernelOptions kernel_options(const AttentionSpec& spec) {
  KernelOptions options;
  options.threads = torch::get_num_threads();
  if (spec.params().positions == AttentionPositions::kRope) options.table = spec.data().rope.table();
  return options;
}

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  // q, k, v, table: differentiable.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& table, const c10::intrusive_ptr<SpecHolder>& holder) {
    const torch::Tensor qc = float_rows(q, "q"), kc = float_rows(k, "k"), vc = float_rows(v, "v");
    const torch::Tensor tc = table.contiguous();
    const AttentionSpec& spec = *holder->spec;
    AttentionParams p = spec.params();
    set_bias(p, tc);
    const std::int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3);
    torch::Tensor out = torch::empty({B, S, H, D}, q.options());
    torch::Tensor lse = torch::empty({B, H, S}, q.options());
    const AttentionOptions options{kernel_options(spec), lse.data_ptr<float>()};
    attention(kernel_view(qc, "fused_attention: q"), kernel_view(kc, "fused_attention: k"), kernel_view(vc, "fused_attention: v"),
              kernel_view(out.transpose(1, 2)), p, options);
    ctx->save_for_backward({qc, kc, vc, out, lse, tc});
    ctx->saved_data["spec"] = c10::IValue::make_capsule(holder);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4], &table = saved[5];
    const AttentionSpec& spec = *c10::static_intrusive_pointer_cast<SpecHolder>(ctx->saved_data["spec"].toCapsule())->spec;
    AttentionParams p = spec.params();
    set_bias(p, table);
    // dout arrives [B, S, Hq, D] like out; the kernels read it as [B, Hq, S, D].
    const torch::Tensor dout = float_rows(grads[0].transpose(1, 2), "the gradient of out");
    // dq in out's memory order ([B, S, Hq, D] storage): the kernels write rows, any strides.
    torch::Tensor dq = torch::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options()).transpose(1, 2);
    torch::Tensor dk = torch::empty_like(k, torch::MemoryFormat::Contiguous), dv = torch::empty_like(v, torch::MemoryFormat::Contiguous);
    torch::Tensor dtable = present(table) ? torch::zeros_like(table) : torch::Tensor();
    AttentionBackwardInputs in{kernel_view(q), kernel_view(k), kernel_view(v), kernel_view(out.transpose(1, 2)),
                               kernel_view(dout, "fused_attention: the gradient of out"), lse.data_ptr<float>()};
    AttentionGradients g{kernel_view(dq), kernel_view(dk), kernel_view(dv)};
    float* const dbias = dtable.defined() ? dtable.data_ptr<float>() : nullptr;
    if (p.positions == AttentionPositions::kT5) g.t5_table_grad = dbias;
    if (p.positions == AttentionPositions::kDistanceTable) g.distance_table_grad = dbias;
    if (p.positions == AttentionPositions::kForgetGate) g.gate_cumulative_grad = dbias;
    attention_backward(in, g, p, kernel_options(spec));
    return {dq, dk, dv, dtable, torch::Tensor()};
  }
};

}  // namespace

AttentionSpec::AttentionSpec(const AttentionParams& params, Data data) : data_(std::move(data)), params_(params) {
  const AttentionPositions positions = params_.positions;
  if (positions != AttentionPositions::kNone && (!data_.q_positions.defined() || !data_.k_positions.defined()))
    throw Error(std::string("fused_attention: positions '") + to_string(positions) + "' need q_positions and k_positions");
  if (data_.q_positions.defined()) data_.q_positions = positions_view(data_.q_positions, "fused_attention: q_positions");
  if (data_.k_positions.defined()) data_.k_positions = positions_view(data_.k_positions, "fused_attention: k_positions");
  if (data_.key_padding.defined()) {
    require_cpu(data_.key_padding, "fused_attention: key_padding");
    data_.key_padding = data_.key_padding.ne(0).to(torch::kUInt8).contiguous();
  }
  if (positions == AttentionPositions::kRope && !data_.rope.table())
    throw Error("fused_attention: positions 'rope' need a RopeSpec with frequencies");
  params_.mask.key_padding = data_.key_padding.defined() ? data_.key_padding.data_ptr<std::uint8_t>() : nullptr;
  params_.q_positions = ids_of(data_.q_positions);
  params_.k_positions = ids_of(data_.k_positions);
  params_.rope = data_.rope.params();
  params_.alibi_slopes = data_.alibi_slopes.empty() ? nullptr : data_.alibi_slopes.data();
  params_.t5_table = nullptr;  // per call, from the differentiable tensor
  params_.distance_table.values = nullptr;
  params_.gate_cumulative = nullptr;
}

torch::Tensor fused_attention(const FusedAttentionTensors& t, std::shared_ptr<const AttentionSpec> spec) {
  if (!spec) throw Error("fused_attention: needs an AttentionSpec");
  const AttentionParams& p = spec->params();
  for (const auto& [x, name] : {std::pair{&t.q, "fused_attention: q"}, std::pair{&t.k, "fused_attention: k"},
                                std::pair{&t.v, "fused_attention: v"}, std::pair{&t.t5_table, "fused_attention: t5_table"},
                                std::pair{&t.distance_table, "fused_attention: distance_table"},
                                std::pair{&t.gate_cumulative, "fused_attention: gate_cumulative"}})
    if (x->defined()) require_cpu(*x, name);
  if (p.positions == AttentionPositions::kT5 &&
      (!t.t5_table.defined() || t.t5_table.scalar_type() != torch::kFloat || t.t5_table.dim() != 2))
    throw Error("fused_attention: T5 needs t5_table, float32 [num_buckets, Hq]");
  // The kernel indexes the table as [bucket][head] through a raw pointer: its shape must be exact.
  if (p.positions == AttentionPositions::kT5 && t.q.defined() &&
      (t.t5_table.size(0) != p.t5.num_buckets || t.t5_table.size(1) != t.q.size(1)))
    throw Error("fused_attention: t5_table must be [num_buckets, Hq] = [" + std::to_string(p.t5.num_buckets) + ", " +
                std::to_string(t.q.size(1)) + "], got " + shape(t.t5_table));
  const std::vector<double>& slopes = spec->data().alibi_slopes;
  if (p.positions == AttentionPositions::kAlibi && t.q.defined() && static_cast<std::int64_t>(slopes.size()) != t.q.size(1))
    throw Error("fused_attention: ALiBi needs one slope per query head: " + std::to_string(slopes.size()) + " slopes, " +
                std::to_string(t.q.size(1)) + " heads");
  float_rows(t.q, "q");
  float_rows(t.k, "k");
  const std::int64_t B = t.q.size(0), S = t.q.size(2), T = t.k.size(2);
  const AttentionSpec::Data& d = spec->data();
  if (d.key_padding.defined()) check_rows(d.key_padding, B, T, false, "key_padding");
  if (d.q_positions.defined()) check_rows(d.q_positions, B, S, true, "q_positions");
  if (d.k_positions.defined()) check_rows(d.k_positions, B, T, true, "k_positions");
  if (p.positions == AttentionPositions::kDistanceTable) {
    const std::int64_t width = p.distance_table.width();
    if (!t.distance_table.defined() || t.distance_table.scalar_type() != torch::kFloat || t.distance_table.dim() != 2 ||
        t.distance_table.size(0) != t.q.size(1) || t.distance_table.size(1) != width)
      throw Error("fused_attention: the distance table must be float32 [Hq, width] = [" + std::to_string(t.q.size(1)) + ", " +
                  std::to_string(width) + "], got " + (t.distance_table.defined() ? shape(t.distance_table) : "none"));
  }
  if (p.positions == AttentionPositions::kForgetGate &&
      (!t.gate_cumulative.defined() || t.gate_cumulative.scalar_type() != torch::kFloat || t.gate_cumulative.dim() != 3 ||
       t.gate_cumulative.size(0) != B || t.gate_cumulative.size(1) != t.q.size(1) || t.gate_cumulative.size(2) != T))
    throw Error("fused_attention: FoX's gate_cumulative must be float32 [B, Hq, T] = [" + std::to_string(B) + ", " +
                std::to_string(t.q.size(1)) + ", " + std::to_string(T) + "], got " +
                (t.gate_cumulative.defined() ? shape(t.gate_cumulative) : "none"));
  const torch::Tensor table = p.positions == AttentionPositions::kT5              ? t.t5_table
                              : p.positions == AttentionPositions::kDistanceTable ? t.distance_table
                              : p.positions == AttentionPositions::kForgetGate    ? t.gate_cumulative
                                                                                  : absent();
  return FusedAttentionFunction::apply(t.q, t.k, t.v, table, c10::make_intrusive<SpecHolder>(std::move(spec)));
}

}  // namespace posenc::torch_layer
