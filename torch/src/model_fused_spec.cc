// Which forwards of a TransformerLM the fused kernel serves, and its parameters for one forward.
#include <utility>

#include "posenc_torch/model.h"

namespace posenc::torch_layer {

bool fused_attention_covers(const ModelConfig& c) {
  switch (c.scheme) {
    case Scheme::kNope:
    case Scheme::kSinusoidal:
    case Scheme::kLearned:
    case Scheme::kRope:
    case Scheme::kXpos:
    case Scheme::kRopeLearned:  // q and k rotated before the kernel, which attends without positions
    case Scheme::kAlibi:
    case Scheme::kT5:
    case Scheme::kKerple:
    case Scheme::kSandwich:
    case Scheme::kDpb:
    case Scheme::kFox:
    case Scheme::kFire: return true;  // FIRE while its queries are below L (FireBias::table_covers)
    default: return false;  // XL, DeBERTa, Shaw, CoPE: content-dependent terms; PoPE: q, k of 2 head_dim; M-RoPE
  }
}

std::shared_ptr<const AttentionSpec> TransformerLMImpl::fused_spec(const ForwardContext& ctx) const {
  AttentionParams p;
  p.mask.causal = config_.causal;
  p.mask.past = ctx.past;
  AttentionSpec::Data data;
  data.key_padding = ctx.key_mask;
  if (ctx.rope) {
    p.positions = AttentionPositions::kRope;
    p.remap = remap;
    data.rope = *ctx.rope;
  } else if (alibi) {
    p.positions = AttentionPositions::kAlibi;
    p.alibi_mode = config_.causal ? AlibiMode::kCausal : AlibiMode::kSymmetric;
    // The buffer's float32 slopes: the kernel adds them in float32 (attention_plan.h).
    const torch::Tensor slopes = alibi->slopes.to(torch::kDouble).contiguous();
    data.alibi_slopes.assign(slopes.data_ptr<double>(), slopes.data_ptr<double>() + slopes.numel());
  } else if (t5) {
    p.positions = AttentionPositions::kT5;
    p.t5 = config_.t5;
  } else if (ctx.distance_table.defined()) {
    p.positions = AttentionPositions::kDistanceTable;
    p.distance_table.side = side();  // Kerple and Sandwich depend on |Delta|, DPB on Delta
    p.distance_table.length = side() == DistanceSide::kSigned ? (ctx.distance_table.size(1) + 1) / 2 : ctx.distance_table.size(1);
  } else if (config_.scheme == Scheme::kFox) {
    p.positions = AttentionPositions::kForgetGate;  // c per layer, passed with q, k, v
  }
  if (p.positions != AttentionPositions::kNone) {
    data.q_positions = ctx.q_positions;
    data.k_positions = ctx.k_positions;
  }
  return std::make_shared<const AttentionSpec>(p, std::move(data));
}

}  // namespace posenc::torch_layer
