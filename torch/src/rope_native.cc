// posenc::rope's torch-native path (rope_op.h): the kernels' rotation in torch operations on x's
// device, for tensors the kernels cannot read (a GPU) and for the float64 formula.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/names.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_xpos.h"
#include "posenc_torch/rope_op.h"
#include "rope_native.h"

namespace posenc::torch_layer {
namespace {

// Angles in float64, except where the device has none (Apple's MPS): float32 there.
at::ScalarType angle_dtype(const at::Tensor& x) { return x.device().type() == c10::DeviceType::MPS ? at::kFloat : at::kDouble; }

// Positions [P, S] (P = 1 or B) or [axes, P, S] as angle_dtype numbers on x's device, offset added.
at::Tensor positions_of(const at::Tensor& x, const RopeOpArgs& a, at::ScalarType dtype) {
  const std::int64_t B = x.size(0), S = x.size(2);
  const auto on = x.options().dtype(dtype);
  if (!a.positions || !a.positions->defined()) return (at::arange(S, on) + static_cast<double>(a.offset)).unsqueeze(0);
  const at::Tensor& p = *a.positions;
  if (at::isComplexType(p.scalar_type()) || p.scalar_type() == at::kBool)
    throw Error(std::string("posenc::rope: positions must be integers or real numbers, got ") + c10::toString(p.scalar_type()));
  const bool flat = p.dim() == 1 && p.size(0) == S, rows = p.dim() == 2 && (p.size(0) == B || p.size(0) == 1) && p.size(1) == S;
  const bool axial = p.dim() == 3 && p.size(0) >= 1 && (p.size(1) == B || p.size(1) == 1) && p.size(2) == S;  // any number of axes (video: 3, N-D axial)
  if (!flat && !rows && !axial)
    throw Error("posenc::rope: positions must be [S], [B, S] or [axes, B, S] with B = " + std::to_string(B) + ", S = " +
                std::to_string(S) + ", got " + c10::str(p.sizes()));
  if (axial && a.axis_of_freq.empty()) throw Error("posenc::rope: [axes, B, S] positions need axis_of_freq (M-RoPE, a vision tower)");
  for (const std::int64_t axis : a.axis_of_freq)
    if (axis < 0 || axis >= (axial ? p.size(0) : 1))
      throw Error("posenc::rope: axis_of_freq entry " + std::to_string(axis) + " names no axis of positions " + c10::str(p.sizes()));
  const at::Tensor moved = p.to(x.device()).to(dtype) + static_cast<double>(a.offset);
  return flat ? moved.unsqueeze(0) : moved;
}

// xPos's scale of x's role (rope_xpos.h), [P, S, half], at positions pos ([P, S], angle_dtype,
// offset added), after validate_xpos's bound (read on the host, as the kernels check it). For a
// float32 x at integer positions the core's XPosScales, the kernels' own float32 bits, once per
// distinct position; for float64 (the formula in double, whose scores then depend on m - n to
// double rounding) and real positions zeta_i^(+-(m - c)/B) in angle_dtype.
at::Tensor xpos_scale(const RopeOpArgs& a, const at::Tensor& pos, std::int64_t half, at::ScalarType work) {
  if (a.xpos_role != "query" && a.xpos_role != "key") throw Error("posenc::rope: xpos_role must be query or key, got '" + a.xpos_role + "'");
  const bool key = a.xpos_role == "key";
  const XPosParams params{a.xpos_scale_base, a.xpos_gamma, a.xpos_center, key ? XPosRole::kKey : XPosRole::kQuery};
  const at::Tensor host = pos.detach().to(at::kCPU, at::kDouble);
  if (host.numel() > 0) {
    const double lo = host.min().item<double>(), hi = host.max().item<double>();
    validate_xpos(params, static_cast<std::int64_t>(std::floor(lo)), static_cast<std::int64_t>(std::ceil(hi)));
  }
  if (work == at::kDouble || !host.equal(host.round())) {
    const auto on = pos.options();
    const at::Tensor zeta = (at::arange(half, on) / static_cast<double>(half) + a.xpos_gamma) / (1 + a.xpos_gamma);
    const at::Tensor scale = ((pos.unsqueeze(-1) - a.xpos_center) * (zeta.log() * ((key ? -1.0 : 1.0) / a.xpos_scale_base))).exp();
    return work == at::kDouble ? scale : scale.to(at::kFloat);
  }
  const auto [unique, inverse] = at::_unique(host.to(at::kLong), true, true);
  const XPosScales scales(params, static_cast<int>(half));
  XPosScales::Block block;
  at::Tensor table = at::empty({unique.numel(), half}, at::kFloat);
  std::vector<float> other(static_cast<std::size_t>(half));
  const std::int64_t* m = unique.data_ptr<std::int64_t>();
  for (std::int64_t u = 0; u < unique.numel(); ++u) {
    float* row = table.data_ptr<float>() + u * half;
    key ? scales.at(m[u], other.data(), row, block) : scales.at(m[u], row, other.data(), block);
  }
  return table.index({inverse}).to(pos.device());  // [P, S, half]
}

// The kernels' checks (rope_apply.h validate: shapes, axes, positions in [0, 2^31-1], angles,
// xPos's bound, the attention factor) on the call as the kernels would take it: the frequencies
// and integer positions copied to the host (a GPU caller pays that copy; real positions and more
// than 3 axes, which only this path takes, are checked by xpos_scale's bound alone).
void check_as_the_kernels(const at::Tensor& x, const RopeOpArgs& a, RopeLayout layout) {
  if (a.offset < 0) throw Error("posenc::rope: offset must be >= 0, got " + std::to_string(a.offset));
  const at::Tensor f = a.inv_freq.detach().to(at::kCPU, at::kFloat).contiguous();
  const std::vector<float> inv_freq(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  std::vector<std::uint8_t> axes;
  for (const std::int64_t axis : a.axis_of_freq) axes.push_back(static_cast<std::uint8_t>(axis));  // 0 .. axes - 1: checked above
  RopeApplyParams params = rope_apply_params(inv_freq, a.attention_factor, layout, axes);
  params.xpos = {a.xpos_scale_base, a.xpos_gamma, a.xpos_center, a.xpos_role == "key" ? XPosRole::kKey : XPosRole::kQuery};
  static float placeholder = 0;
  const auto n = [&](int d) { return static_cast<int>(x.size(d)); };
  const RopeTensor view = bhsd(&placeholder, DType::kF32, {n(0), n(2), n(1), n(3)});  // sizes only: validate reads no data
  if (!a.positions || !a.positions->defined()) return validate(view, PositionIds::implicit(a.offset), params);
  const at::Tensor& p = *a.positions;
  if (at::isFloatingType(p.scalar_type()) || (p.dim() == 3 && p.size(0) > 3)) return;  // only this path takes them
  const at::Tensor ids = p.detach().to(at::kCPU, at::kLong).contiguous();
  const std::int64_t rows = p.dim() == 1 ? 1 : p.size(p.dim() - 2);  // [S]: one row; [P, S], [axes, P, S]: P
  PositionIds positions = PositionIds::explicit_ids(ids.data_ptr<std::int64_t>(), p.dim() == 3 ? static_cast<int>(p.size(0)) : 1,
                                                    rows * x.size(2));
  positions.offset = a.offset;
  positions.shared_across_batch = rows == 1;
  validate(view, positions, params);
}

}  // namespace

at::Tensor rope_native(const at::Tensor& x, const RopeOpArgs& a) { return rotate_native(x, a, true); }

at::Tensor rotate_native(const at::Tensor& x, const RopeOpArgs& a, bool check) {
  if (!x.defined() || x.dim() != 4) throw Error("posenc::rope: x must be 4-D [B, H, S, D]");
  if (!at::isFloatingType(x.scalar_type())) throw Error(std::string("posenc::rope: x must be floating, got ") + c10::toString(x.scalar_type()));
  if (!a.inv_freq.defined() || a.inv_freq.dim() != 1 || !at::isFloatingType(a.inv_freq.scalar_type()))
    throw Error("posenc::rope: inv_freq must be a floating [F] tensor");
  const std::int64_t half = a.inv_freq.size(0);
  if (2 * half > x.size(3))
    throw Error("posenc::rope: rotary dim 2F = " + std::to_string(2 * half) + " exceeds head_dim " + std::to_string(x.size(3)));
  if (!a.axis_of_freq.empty() && static_cast<std::int64_t>(a.axis_of_freq.size()) != half)
    throw Error("posenc::rope: axis_of_freq must be empty or one axis per frequency (" + std::to_string(half) + ")");
  const auto layout = try_from_name<RopeLayout>(a.layout);
  if (!layout) throw Error("posenc::rope: layout must be one of " + enum_names_joined<RopeLayout>() + ", got '" + a.layout + "'");
  if (a.direction != 1 && a.direction != -1) throw Error("posenc::rope: direction must be 1 or -1, got " + std::to_string(a.direction));
  const at::ScalarType angles_in = angle_dtype(x);
  const at::ScalarType work = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;  // the kernels compute in float32
  const at::Tensor pos = positions_of(x, a, angles_in);  // shapes checked first: the kernels' checks read the ids
  if (check) check_as_the_kernels(x, a, *layout);
  const at::Tensor inv = a.inv_freq.to(x.device()).to(angles_in);  // keeps inv_freq's gradient (learned frequencies)
  at::Tensor angles;  // [P, S, half]
  if (pos.dim() == 3) {
    const at::Tensor axes = at::tensor(a.axis_of_freq, x.options().dtype(at::kLong));
    angles = pos.index_select(0, axes).permute({1, 2, 0}) * inv;
  } else {
    angles = pos.unsqueeze(-1) * inv;
  }
  at::Tensor c = (angles.cos() * a.attention_factor).to(work);
  at::Tensor s = (angles.sin() * (a.attention_factor * static_cast<double>(a.direction))).to(work);
  if (a.xpos_scale_base != 0) {  // xPos reads one position axis: the first
    const at::Tensor scale = xpos_scale(a, pos.dim() == 3 ? pos.select(0, 0) : pos, half, work).to(work);
    c = c * scale;
    s = s * scale;
  }
  c = c.unsqueeze(1);  // [P, 1, S, half]: every head
  s = s.unsqueeze(1);
  const at::Tensor xw = x.to(work);
  const at::Tensor rot = xw.narrow(-1, 0, 2 * half), pass = xw.narrow(-1, 2 * half, x.size(3) - 2 * half);
  // Half-split reads and writes halves; interleaved pairs; DeepSeek-V3 reads pairs and writes
  // halves, so its transpose reads halves and writes pairs.
  const bool transposed_v3 = *layout == RopeLayout::kDeepSeekV3 && a.direction < 0;
  const bool reads_halves = *layout == RopeLayout::kHalfSplit || transposed_v3;
  const bool writes_pairs = *layout == RopeLayout::kInterleaved || transposed_v3;
  at::Tensor first, second;
  if (reads_halves) {
    first = rot.narrow(-1, 0, half);
    second = rot.narrow(-1, half, half);
  } else {
    const at::Tensor pairs = rot.unflatten(-1, {half, 2});
    first = pairs.select(-1, 0);
    second = pairs.select(-1, 1);
  }
  const at::Tensor out_first = first * c - second * s, out_second = second * c + first * s;
  const at::Tensor out = writes_pairs ? at::stack({out_first, out_second}, -1).flatten(-2) : at::cat({out_first, out_second}, -1);
  return at::cat({out, pass}, -1).to(x.scalar_type());
}

}  // namespace posenc::torch_layer
