// posenc::attention's torch-native path (attention_op.h): the kernel's attention in torch
// operations on q's device, differentiable by autograd. The conventions are the kernel's
// (core/include/posenc/attention.h): masks by key index (query i at key index past + i),
// positional terms by position id. It materialises the [B, Hq, S, T] scores; the kernel never does.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attention_op_call.h"
#include "posenc/error.h"
#include "posenc/t5_bias.h"
#include "posenc_torch/attention_op.h"
#include "posenc_torch/rope_op.h"
#include "rope_native.h"

namespace posenc::torch_layer {
namespace {

// The small tensors an AttentionCall reads, copied to the CPU: the arguments are checked once,
// by the kernel's own checks (attention_op_call.h), whatever the device.
AttentionOpArgs on_cpu(AttentionOpArgs a) {
  for (c10::optional<at::Tensor>* t : {&a.q_positions, &a.k_positions, &a.key_padding, &a.inv_freq, &a.bias})
    if (*t) *t = (*t)->detach().cpu();
  return a;
}

// A view for validate_attention, which reads sizes and never data.
RopeTensor shape_view(const at::Tensor& x) {
  static float placeholder = 0;
  const auto n = [&](int d) { return static_cast<int>(x.size(d)); };
  return bhsd(&placeholder, DType::kF32, {n(0), n(2), n(1), n(3)});
}

// Position ids [P, tokens] (P = 1 or B), int64 on dev: explicit ids + offset, or index + offset.
at::Tensor positions_on(const c10::optional<at::Tensor>& ids, std::int64_t offset, std::int64_t tokens, const at::Device dev) {
  if (ids) return ids->to(dev).to(at::kLong) + offset;
  return (at::arange(tokens, at::TensorOptions(dev).dtype(at::kLong)) + offset).unsqueeze(0);
}

// kv heads [B, Hk, T, D] read by each of their group query heads: [B, Hk * group, T, D].
at::Tensor per_query_head(const at::Tensor& x, std::int64_t group) {
  if (group == 1) return x;
  return x.unsqueeze(2).expand({x.size(0), x.size(1), group, x.size(2), x.size(3)}).flatten(1, 2);
}

struct Call {
  const AttentionOpArgs& args;
  const AttentionParams& params;
  std::int64_t group = 1;
  double scale = 1;
};

// x [B, H, tokens, D] (float32) rotated at pos ([P, tokens], integer or real) as the kernel
// rotates it: channels [offset, offset + rotary) of the first `heads` heads, xPos's role's scale.
at::Tensor rotated(const Call& c, const at::Tensor& x, const at::Tensor& pos, const char* role, std::int64_t heads) {
  const AttentionOpArgs& a = c.args;
  RopeOpArgs r;
  r.positions = pos;
  r.inv_freq = *a.inv_freq;
  r.axis_of_freq = a.axis_of_freq;
  r.attention_factor = a.attention_factor;
  r.layout = a.rope_layout;
  r.xpos_scale_base = a.xpos_scale_base;
  r.xpos_gamma = a.xpos_gamma;
  r.xpos_center = a.xpos_center;
  r.xpos_role = role;
  const std::int64_t offset = a.rope_channel_offset, D = x.size(3);
  const at::Tensor part = x.narrow(1, 0, heads);
  const at::Tensor turned = at::cat({part.narrow(-1, 0, offset), rotate_native(part.narrow(-1, offset, D - offset), r, false)}, -1);
  return heads == x.size(1) ? turned : at::cat({turned, x.narrow(1, heads, x.size(1) - heads)}, 1);
}

at::Tensor scores_of(const Call& c, const at::Tensor& q, const at::Tensor& k) {
  return at::matmul(q, per_query_head(k, c.group).transpose(-1, -2)) * c.scale;  // [B, Hq, S, T]
}

// RoPE's scores, with a remap's far branches (attention.h's formulas).
at::Tensor rope_scores(const Call& c, const at::Tensor& q, const at::Tensor& k, const at::Tensor& q_pos, const at::Tensor& k_pos) {
  const AttentionOpArgs& a = c.args;
  const std::int64_t Hq = q.size(1), n = a.rope_rotated_heads;
  const bool every_head = n == 0 || n >= Hq;
  const at::Tensor near = scores_of(c, rotated(c, q, q_pos, "query", every_head ? Hq : n),
                                    rotated(c, k, k_pos, "key", every_head ? k.size(1) : n / c.group));
  const PositionRemap& remap = c.params.remap;
  const auto far = [&](const at::Tensor& q_at, const at::Tensor& k_at) {
    return scores_of(c, rotated(c, q, q_at, "query", Hq), rotated(c, k, k_at, "key", k.size(1)));
  };
  const std::int64_t w = remap.window;
  const at::Tensor delta = remap.kind == PositionRemapKind::kNone ? at::Tensor() : (q_pos.unsqueeze(-1) - k_pos.unsqueeze(-2)).unsqueeze(1);
  switch (remap.kind) {
    case PositionRemapKind::kNone: return near;
    case PositionRemapKind::kSelfExtend: {
      const at::Tensor q_at = at::div(q_pos, remap.group, "floor") + (w - w / remap.group);
      return at::where(delta < w, near, far(q_at, at::div(k_pos, remap.group, "floor")));
    }
    case PositionRemapKind::kReRope: return at::where(delta < w, near, far(at::full_like(q_pos, w), at::zeros_like(k_pos)));
    case PositionRemapKind::kLeakyReRope: {
      const double leak = remap.leak;
      const at::Tensor q_at = q_pos.to(at::kDouble) / leak + (static_cast<double>(w) - static_cast<double>(w) / leak);
      return at::where(delta < w, near, far(q_at, k_pos.to(at::kDouble) / leak));
    }
    case PositionRemapKind::kDualChunk: {  // by chunk of position: own (or later), previous, earlier
      const std::int64_t chunk = remap.chunk_size - remap.local_size, size = remap.chunk_size;
      const at::Tensor k_at = at::remainder(k_pos, chunk);
      const at::Tensor previous = far(at::clamp_max(at::remainder(q_pos, chunk) + chunk, size), k_at);
      const at::Tensor earlier = far(at::full_like(q_pos, std::min(2 * chunk - 1, size)), k_at);
      const at::Tensor back =
          (at::div(q_pos, chunk, "floor").unsqueeze(-1) - at::div(k_pos, chunk, "floor").unsqueeze(-2)).unsqueeze(1);
      return at::where(back <= 0, near, at::where(back == 1, previous, earlier));
    }
  }
  return near;
}

// T5's bucket as a step function of r = key - query position: pieces [start_i, start_i+1), one
// bucket each, found on the host with the core's t5_bucket by bisection (it is monotone on r <= 0
// and on r >= 1, and constant from +-max_distance on: validate(T5BucketParams)), at most
// 2 num_buckets + 2 of them whatever max_distance; the device looks r up with bucketize.
struct BucketSteps {
  std::vector<std::int64_t> starts, buckets;
};

BucketSteps bucket_steps(const T5BucketParams& t5) {
  BucketSteps steps;
  const auto side = [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t start = lo; start <= hi;) {
      const int bucket = t5_bucket(start, t5);
      std::int64_t same = start, other = hi + 1;  // t5_bucket(same) == bucket; the piece ends before other
      while (other - same > 1) {
        const std::int64_t mid = same + (other - same) / 2;
        (t5_bucket(mid, t5) == bucket ? same : other) = mid;
      }
      steps.starts.push_back(start);
      steps.buckets.push_back(bucket);
      start = same + 1;
    }
  };
  side(-static_cast<std::int64_t>(t5.max_distance), 0);
  side(1, t5.max_distance);
  return steps;
}

// T5's bias [P, Hq, S, T]: table[bucket(kpos - qpos)][h].
at::Tensor t5_bias(const Call& c, const at::Tensor& table, const at::Tensor& delta) {
  const BucketSteps steps = bucket_steps(c.params.t5);
  const auto on = delta.options().dtype(at::kLong);
  const at::Tensor boundaries = at::tensor(steps.starts, on).narrow(0, 1, static_cast<std::int64_t>(steps.starts.size()) - 1);
  const std::int64_t max_distance = c.params.t5.max_distance;
  const at::Tensor relative = at::clamp(-delta.squeeze(1), -max_distance, max_distance);  // [P, S, T]
  const at::Tensor buckets = at::tensor(steps.buckets, on).index({at::bucketize(relative, boundaries, false, true)});
  return table.index({buckets}).permute({0, 3, 1, 2});  // [P, S, T, Hq] -> [P, Hq, S, T]
}

}  // namespace

std::pair<at::Tensor, at::Tensor> attention_native(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const AttentionOpArgs& a) {
  for (const auto& [x, name] : {std::pair{&k, "k"}, std::pair{&v, "v"}})
    if (x->defined() && q.defined() && x->device() != q.device())
      throw Error(std::string("posenc::attention: ") + name + " is on " + x->device().str() + " and q on " + q.device().str() +
                  ": q, k and v must be on one device");
  const AttentionShape s = attention_shape(q, k, v);
  const AttentionOpArgs cpu = on_cpu(a);
  const AttentionCall checked(cpu, s, AttentionCall::Table::kNone);
  const AttentionParams& p = checked.params();
  validate_attention(shape_view(q), shape_view(k), shape_view(v), shape_view(q), p);
  const at::Device dev = q.device();
  const auto on = q.options().dtype(at::kFloat);
  if (s.empty())  // nothing to attend: zeros, and -inf for rows that see no key
    return {at::zeros(q.sizes(), q.options()), at::full({s.batch, s.heads, s.q_tokens}, -std::numeric_limits<float>::infinity(), on)};
  const Call c{a, p, s.heads / s.kv_heads, p.scale > 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim))};
  const at::Tensor qw = q.to(at::kFloat), kw = k.to(at::kFloat), vw = v.to(at::kFloat);  // the kernel's math is float32
  const std::int64_t S = s.q_tokens, T = s.k_tokens, past = p.mask.past >= 0 ? p.mask.past : T - S;
  const at::Tensor q_index = at::arange(S, at::TensorOptions(dev).dtype(at::kLong)) + past;  // key index of each query
  const at::Tensor k_index = at::arange(T, at::TensorOptions(dev).dtype(at::kLong));
  const at::Tensor q_pos = positions_on(a.q_positions, a.q_offset, S, dev), k_pos = positions_on(a.k_positions, a.k_offset, T, dev);
  // [P, 1, S, T] query - key position, formed only by the terms that read it.
  const auto distances = [&] { return (q_pos.unsqueeze(-1) - k_pos.unsqueeze(-2)).unsqueeze(1); };
  at::Tensor scores;
  switch (p.positions) {
    case AttentionPositions::kRope: scores = rope_scores(c, qw, kw, q_pos, k_pos); break;
    case AttentionPositions::kAlibi: {
      const at::Tensor slopes = at::tensor(a.alibi_slopes, on.dtype(at::kDouble)).to(at::kFloat).view({1, s.heads, 1, 1});
      const at::Tensor delta = distances();
      scores = scores_of(c, qw, kw) - slopes * (a.alibi_symmetric ? delta.abs() : delta).to(at::kFloat);
      break;
    }
    case AttentionPositions::kT5: scores = scores_of(c, qw, kw) + t5_bias(c, a.bias->to(dev).to(at::kFloat), distances()); break;
    case AttentionPositions::kDistanceTable: {
      const at::Tensor values = a.bias->to(dev).to(at::kFloat);  // [Hq, width]
      const bool is_signed = p.distance_table.side == DistanceSide::kSigned;
      const at::Tensor delta = distances();
      const at::Tensor column = (is_signed ? delta + (p.distance_table.length - 1) : delta.abs()).squeeze(1);  // [P, S, T]
      scores = scores_of(c, qw, kw) + values.index({at::indexing::Slice(), column}).permute({1, 0, 2, 3});
      break;
    }
    case AttentionPositions::kForgetGate: {  // c[past + i] - c[j], by key index
      const at::Tensor gate = a.bias->to(dev).to(at::kFloat);  // [B, Hq, T]
      scores = scores_of(c, qw, kw) + gate.index_select(2, q_index).unsqueeze(-1) - gate.unsqueeze(2);
      break;
    }
    case AttentionPositions::kNone: scores = scores_of(c, qw, kw); break;
  }
  at::Tensor visible = at::ones({S, T}, at::TensorOptions(dev).dtype(at::kBool));
  if (a.causal || a.window > 0) {
    const at::Tensor behind = q_index.unsqueeze(-1) - k_index.unsqueeze(0);  // [S, T] by key index
    if (a.causal) visible = visible & (behind >= 0);
    if (a.window > 0) visible = visible & (behind < a.window);
  }
  if (a.chunk > 0) visible = visible & (at::div(k_index, a.chunk, "floor").unsqueeze(0) == at::div(q_index, a.chunk, "floor").unsqueeze(-1));
  visible = visible.view({1, 1, S, T});
  if (a.key_padding) visible = visible & a.key_padding->to(dev).ne(0).view({s.batch, 1, 1, T});
  scores = scores.masked_fill(visible.bitwise_not(), -std::numeric_limits<double>::infinity());
  // The softmax from its row maximum (0 for a row that sees no key: its weights are then 0, its
  // out zeros and its lse -inf, as the kernel's, and no NaN reaches a gradient).
  const at::Tensor row_max = std::get<0>(scores.detach().max(-1, true));
  const at::Tensor shift = row_max.masked_fill(row_max.eq(-std::numeric_limits<double>::infinity()), 0);
  const at::Tensor weights = (scores - shift).exp();
  const at::Tensor total = weights.sum(-1, true);
  const at::Tensor probs = weights / total.clamp_min(std::numeric_limits<float>::min());
  const at::Tensor out = at::matmul(probs, per_query_head(vw, c.group)).to(q.scalar_type());  // [B, Hq, S, D]
  const at::Tensor lse = (total.detach().log() + shift).squeeze(-1);
  return {out, lse};
}

}  // namespace posenc::torch_layer
