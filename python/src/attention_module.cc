// posenc.attention's C++ side: the core's fused attention (attention.h) forward and backward
// (attention_backward.h) over views that cross as data pointers, shapes and strides, as the
// RoPE kernels' do (module.cc). posenc/attention.py wraps both in a torch.autograd.Function.
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

namespace py = pybind11;

namespace posenc {
namespace {

template <class T>
T get(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw Error(std::string("attention: key '") + key + "' is missing");
  return d[key].cast<T>();
}

DType dtype_of(const std::string& name) {
  if (name == "float32") return DType::kF32;
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16") return DType::kF16;
  throw Error("attention takes float32, bfloat16 or float16 tensors, got " + name);
}

// A tensor's view: {data, dtype, batch, tokens, heads, head_dim, batch_stride, token_stride,
// head_stride} (strides in elements, channels contiguous).
RopeTensor view_of(const py::dict& d) {
  return strided(reinterpret_cast<void*>(get<std::uintptr_t>(d, "data")), dtype_of(get<std::string>(d, "dtype")),
                 {get<int>(d, "batch"), get<int>(d, "tokens"), get<int>(d, "heads"), get<int>(d, "head_dim")},
                 {get<std::int64_t>(d, "batch_stride"), get<std::int64_t>(d, "token_stride"),
                  get<std::int64_t>(d, "head_stride")});
}

// AttentionParams and the storage its pointers refer to (the frequencies, axes and slopes are
// copied here; the key padding and the T5 table stay the caller's tensors, alive for the call).
struct Params {
  std::vector<float> inv_freq;
  std::vector<std::uint8_t> axis_of_freq;
  std::vector<double> slopes;
  AttentionParams p;

  explicit Params(const py::dict& d) {
    p.scale = get<double>(d, "scale");
    p.mask.causal = get<bool>(d, "causal");
    p.mask.past = get<std::int64_t>(d, "past");
    p.mask.key_padding = reinterpret_cast<const std::uint8_t*>(get<std::uintptr_t>(d, "key_padding"));
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
      p.alibi_slopes = slopes.data();
      p.alibi_mode = get<bool>(d, "alibi_symmetric") ? AlibiMode::kSymmetric : AlibiMode::kCausal;
    }
    if (p.positions == AttentionPositions::kT5) {
      p.t5_table = reinterpret_cast<const float*>(get<std::uintptr_t>(d, "t5_table"));
      p.t5 = {get<int>(d, "t5_num_buckets"), get<int>(d, "t5_max_distance"), get<bool>(d, "t5_bidirectional")};
    }
    if (p.positions == AttentionPositions::kDistanceTable) {  // Kerple, Sandwich: [Hq, length] over |Delta|
      p.distance_table.values = reinterpret_cast<const float*>(get<std::uintptr_t>(d, "distance_table"));
      p.distance_table.length = get<std::int64_t>(d, "distance_length");
      p.distance_table.side = DistanceSide::kAbsolute;
    }
    if (p.positions == AttentionPositions::kForgetGate)  // FoX: c [B, Hq, T]
      p.gate_cumulative = reinterpret_cast<const float*>(get<std::uintptr_t>(d, "gate_cumulative"));
    p.remap.kind = from_name<PositionRemapKind>(get<std::string>(d, "remap"));
    p.remap.window = get<std::int64_t>(d, "remap_window");
    p.remap.group = get<std::int64_t>(d, "remap_group");
    p.remap.leak = get<double>(d, "remap_leak");
    p.remap.chunk_size = get<std::int64_t>(d, "remap_chunk_size");
    p.remap.local_size = get<std::int64_t>(d, "remap_local_size");
  }
  Params(const Params&) = delete;  // p points into this object
};

}  // namespace

void add_attention(py::module_& m) {
  // out and lse (a [B, Hq, S] float32 buffer, or 0) written; validated with the GIL held, so an
  // error is an exception before anything is written; the kernel runs without the GIL.
  // bf16_dot_products false: the f32 kernel on bf16 inputs, whose lse the f32 backward matches.
  m.def("attention", [](const py::dict& q, const py::dict& k, const py::dict& v, const py::dict& out,
                        const py::dict& params, std::uintptr_t lse, int threads, bool bf16_dot_products) {
    const Params p(params);
    const RopeTensor qv = view_of(q), kv = view_of(k), vv = view_of(v), ov = view_of(out);
    validate_attention(qv, kv, vv, ov, p.p);
    AttentionOptions options;
    options.threads = threads;
    options.lse = reinterpret_cast<float*>(lse);
    options.bf16_dot_products = bf16_dot_products;
    py::gil_scoped_release release;
    attention(qv, kv, vv, ov, p.p, options);
  });
  // grads: {dq, dk, dv} float32 views, overwritten; bias_grad (0, or a float32 buffer shaped as
  // the positions' bias input: T5's [buckets, Hq] table, the distance table [Hq, length], FoX's
  // c [B, Hq, T]) added to.
  m.def("attention_backward", [](const py::dict& q, const py::dict& k, const py::dict& v, const py::dict& out,
                                 const py::dict& dout, std::uintptr_t lse, const py::dict& grads, std::uintptr_t bias_grad,
                                 const py::dict& params, int threads) {
    const Params p(params);
    AttentionBackwardInputs in{view_of(q), view_of(k), view_of(v), view_of(out), view_of(dout),
                               reinterpret_cast<const float*>(lse)};
    AttentionGradients g{view_of(get<py::dict>(grads, "dq")), view_of(get<py::dict>(grads, "dk")),
                         view_of(get<py::dict>(grads, "dv"))};
    float* const dbias = reinterpret_cast<float*>(bias_grad);
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
