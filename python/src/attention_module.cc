// posenc.attention's C++ side: the core's fused attention (attention.h) forward and backward
// (attention_backward.h) over tensors that cross as DLPack capsules (tensor_arg.h), as the RoPE
// kernels' do (module.cc): every buffer's shape is checked here against the views it goes with.
// posenc/attention.py wraps both in a torch.autograd.Function.
// The Python side builds each dict; every key is read here by name (a missing one is an Error
// naming it), and the core validates the call before it writes anything.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/error.h"
#include "posenc/names.h"
#include "remap_arg.h"
#include "tensor_arg.h"

namespace py = pybind11;

namespace posenc {
namespace {

template <class T>
T get(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw Error(std::string("attention: key '") + key + "' is missing");
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    throw Error(std::string("attention: key '") + key + "' cannot be read from " + std::string(py::repr(d[key])).substr(0, 80));
  }
}

}  // namespace

PositionRemap remap_of(const py::dict& d) {
  PositionRemap r;
  r.kind = from_name<PositionRemapKind>(get<std::string>(d, "remap"));
  r.window = get<std::int64_t>(d, "remap_window");
  r.group = get<std::int64_t>(d, "remap_group");
  r.leak = get<double>(d, "remap_leak");
  r.chunk_size = get<std::int64_t>(d, "remap_chunk_size");
  r.local_size = get<std::int64_t>(d, "remap_local_size");
  return r;
}

namespace {

// A tensor the kernel writes: its view, checked for aliasing elements.
RopeTensor written_view(const py::handle& capsule, int heads_dim, const char* name) {
  const TensorArg t = tensor_arg(capsule, name);
  check_written(t, name);
  return rope_view(t, heads_dim, name);
}

// A contiguous float32 buffer of `shape` from a capsule (None: nullptr).
float* f32_buffer(const py::handle& capsule, const std::vector<std::int64_t>& shape, const char* name) {
  if (capsule.is_none()) return nullptr;
  return static_cast<float*>(contiguous_buffer(tensor_arg(capsule, name), ElementKind::kF32, shape, name));
}

// The shape of the positions' bias input, as the kernel reads it: T5's [buckets, Hq] table, the
// distance table [Hq, width] (length, or 2 length - 1 signed), FoX's c [B, Hq, T]; empty without one.
std::vector<std::int64_t> bias_shape(const AttentionParams& p, const RopeTensor& q, const RopeTensor& k) {
  if (p.positions == AttentionPositions::kT5) return {p.t5.num_buckets, q.heads};
  if (p.positions == AttentionPositions::kDistanceTable) {
    if (p.distance_table.length < 1 || p.distance_table.length > (std::int64_t{1} << 31))
      throw Error("distance_length must be in [1, 2^31], got " + std::to_string(p.distance_table.length));
    return {q.heads, p.distance_table.width()};
  }
  if (p.positions == AttentionPositions::kForgetGate) return {q.batch, q.heads, k.tokens};
  return {};
}

// AttentionParams and the storage its pointers refer to (the frequencies, axes and slopes are
// copied here; the key padding and the bias input stay the caller's tensors, alive for the call),
// each buffer checked against q's and k's views.
struct Params {
  std::vector<float> inv_freq;
  std::vector<std::uint8_t> axis_of_freq;
  std::vector<double> slopes;
  AttentionParams p;

  Params(const py::dict& d, const RopeTensor& q, const RopeTensor& k) {
    p.scale = get<double>(d, "scale");
    p.mask.causal = get<bool>(d, "causal");
    p.mask.past = get<std::int64_t>(d, "past");
    const py::object padding = get<py::object>(d, "key_padding");  // None, or uint8 [B, T]
    if (!padding.is_none())
      p.mask.key_padding = static_cast<const std::uint8_t*>(
          contiguous_buffer(tensor_arg(padding, "key_padding"), ElementKind::kU8, {q.batch, k.tokens}, "key_padding"));
    p.mask.sliding_window = get<std::int64_t>(d, "window");
    p.mask.chunk = get<std::int64_t>(d, "chunk");
    p.positions = from_name<AttentionPositions>(get<std::string>(d, "positions"));
    p.q_positions = PositionIds::implicit(get<std::int64_t>(d, "q_offset"));
    p.k_positions = PositionIds::implicit(get<std::int64_t>(d, "k_offset"));
    if (p.positions == AttentionPositions::kRope) {
      inv_freq = get<std::vector<float>>(d, "inv_freq");
      axis_of_freq = get<std::vector<std::uint8_t>>(d, "axis_of_freq");
      p.rope = rope_apply_params(inv_freq, get<double>(d, "attention_factor"),
                                 from_name<RopeLayout>(get<std::string>(d, "layout")), axis_of_freq);
    }
    if (p.positions == AttentionPositions::kAlibi) {
      slopes = get<std::vector<double>>(d, "alibi_slopes");
      if (slopes.size() != static_cast<std::size_t>(q.heads))
        throw Error("alibi_slopes: " + std::to_string(slopes.size()) + " slopes for " + std::to_string(q.heads) +
                    " query heads; expected one per query head");
      p.alibi_slopes = slopes.data();
      p.alibi_mode = get<bool>(d, "alibi_symmetric") ? AlibiMode::kSymmetric : AlibiMode::kCausal;
    }
    if (p.positions == AttentionPositions::kT5) {
      p.t5 = {get<int>(d, "t5_num_buckets"), get<int>(d, "t5_max_distance"), get<bool>(d, "t5_bidirectional")};
      p.t5_table = f32_buffer(get<py::object>(d, "t5_table"), bias_shape(p, q, k), "t5_table");
    }
    if (p.positions == AttentionPositions::kDistanceTable) {  // Kerple, Sandwich: [Hq, length] over |Delta|; DPB signed
      p.distance_table.length = get<std::int64_t>(d, "distance_length");
      p.distance_table.side = from_name<DistanceSide>(get<std::string>(d, "distance_side"));
      p.distance_table.values = f32_buffer(get<py::object>(d, "distance_table"), bias_shape(p, q, k), "distance_table");
    }
    if (p.positions == AttentionPositions::kForgetGate)  // FoX: c [B, Hq, T]
      p.gate_cumulative = f32_buffer(get<py::object>(d, "gate_cumulative"), bias_shape(p, q, k), "gate_cumulative");
    p.remap = remap_of(d);
  }
  Params(const Params&) = delete;  // p points into this object
};

}  // namespace

void add_attention(py::module_& m) {
  // q, k, v, out: capsules of 4-D tensors in heads_dim's order; out and lse (float32 [B, Hq, S],
  // or None) written; validated with the GIL held, so an error is an exception before anything
  // is written; the kernel runs without the GIL.
  // bf16_dot_products false: the f32 kernel on bf16 inputs, whose lse the f32 backward matches.
  m.def("attention", [](const py::object& q, const py::object& k, const py::object& v, const py::object& out,
                        int heads_dim, const py::dict& params, const py::object& lse, int threads, bool bf16_dot_products) {
    const RopeTensor qv = rope_view(tensor_arg(q, "q"), heads_dim, "q"), kv = rope_view(tensor_arg(k, "k"), heads_dim, "k");
    const RopeTensor vv = rope_view(tensor_arg(v, "v"), heads_dim, "v");
    const RopeTensor ov = written_view(out, heads_dim, "out");
    const Params p(params, qv, kv);
    validate_attention(qv, kv, vv, ov, p.p);
    AttentionOptions options;
    options.threads = threads;
    options.lse = f32_buffer(lse, {qv.batch, qv.heads, qv.tokens}, "lse");
    options.bf16_dot_products = bf16_dot_products;
    py::gil_scoped_release release;
    attention(qv, kv, vv, ov, p.p, options);
  });
  // views: {q, k, v, out, dout}; grads: {dq, dk, dv} float32, overwritten; bias_grad (None, or a
  // float32 buffer shaped as the positions' bias input: T5's [buckets, Hq] table, the distance
  // table [Hq, length], FoX's c [B, Hq, T]) added to.
  m.def("attention_backward", [](const py::dict& views, int heads_dim, const py::object& lse, const py::dict& grads,
                                 const py::object& bias_grad, const py::dict& params, int threads) {
    auto view = [&](const py::dict& d, const char* name) {
      return rope_view(tensor_arg(get<py::object>(d, name), name), heads_dim, name);
    };
    const RopeTensor q = view(views, "q"), k = view(views, "k");
    const Params p(params, q, k);
    AttentionBackwardInputs in{q, k, view(views, "v"), view(views, "out"), view(views, "dout"),
                               f32_buffer(lse, {q.batch, q.heads, q.tokens}, "lse")};
    AttentionGradients g{written_view(get<py::object>(grads, "dq"), heads_dim, "dq"),
                         written_view(get<py::object>(grads, "dk"), heads_dim, "dk"),
                         written_view(get<py::object>(grads, "dv"), heads_dim, "dv")};
    const std::vector<std::int64_t> shape = bias_shape(p.p, q, k);
    if (!bias_grad.is_none() && shape.empty()) throw Error("attention_backward: a bias_grad without a bias input");
    float* const dbias = shape.empty() ? nullptr : f32_buffer(bias_grad, shape, "bias_grad");
    if (p.p.positions == AttentionPositions::kT5) g.t5_table_grad = dbias;
    if (p.p.positions == AttentionPositions::kDistanceTable) g.distance_table_grad = dbias;
    if (p.p.positions == AttentionPositions::kForgetGate) g.gate_cumulative_grad = dbias;
    validate_attention_backward(in, g, p.p);
    KernelOptions options;
    options.threads = threads;
    py::gil_scoped_release release;
    attention_backward(in, g, p.p, options);
  });
}

}  // namespace posenc
