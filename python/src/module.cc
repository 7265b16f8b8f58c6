// _posenc: the Python extension over posenc's core (pybind11). No second implementation and no
// torch C++ headers: tensors cross as DLPack capsules (tensor_arg.h), and the Python package
// (posenc/__init__.py) wraps them in torch.autograd.Function and torch.nn.Module.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <optional>
#include <string>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/kerple.h"
#include "posenc/learned.h"
#include "posenc/mrope.h"
#include "posenc/properties.h"
#include "posenc/rope_fields.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_params_json.h"
#include "posenc/rope_runtime.h"
#include "posenc/rope_schedule.h"
#include "posenc/rope_shift.h"
#include "posenc/sandwich.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc/transformer_xl.h"
#include "owned_array.h"
#include "tensor_arg.h"

namespace py = pybind11;
using namespace posenc;

namespace {

// RopeParams as Python keywords: one entry per field-table row under HF's name (rope_theta,
// rope_type), None for an unset optional field. posenc.schedule(**params) takes it back.
py::dict params_dict(const RopeParams& p) {
  py::dict d;
  for_each_field(p, [&](const RopeField& row, const auto& member) {
    if constexpr (std::is_same_v<std::decay_t<decltype(member)>, RopeType>) {
      d[row.name] = std::string(to_string(member));
    } else {
      d[row.name] = py::cast(member);
    }
  });
  return d;
}

py::dict model_dict(const ModelRope& m) {
  py::list layers;
  for (const LayerRope& l : m.layers) {
    py::dict d;
    d["layer_type"] = l.layer_type;
    d["has_rope"] = l.has_rope;
    d["params"] = params_dict(l.params);
    layers.append(d);
  }
  py::dict out;
  out["model_type"] = m.model_type;
  out["layers"] = layers;
  out["warnings"] = m.warnings;
  out["notes"] = m.notes;
  return out;
}

// A schedule as the Python Schedule's fields; the M-RoPE axis map comes from the params.
py::dict schedule_fields(const RopeSchedule& s, const RopeParams& params) {
  py::dict d;
  d["inv_freq"] = s.inv_freq;
  d["attention_factor"] = s.attention_factor;
  d["rope_type"] = std::string(to_string(s.type));
  d["rotary_dim"] = s.rotary_dim;
  d["rotated_dim"] = s.rotated_dim;
  d["base"] = s.base;
  d["correction_range"] = s.correction_range ? py::object(py::make_tuple((*s.correction_range)[0], (*s.correction_range)[1]))
                                             : py::object(py::none());
  d["uses_long_factors"] = s.uses_long_factors;
  // XD-RoPE (HunYuan-VL) has no per-frequency map (mrope.h xdrope_column_axes): text positions only.
  d["axis_of_freq"] = params.mrope_section.empty() || params.mrope_xdrope
                          ? std::vector<std::uint8_t>{}
                          : mrope_axis_map(params.mrope_section, params.mrope_interleaved);
  return d;
}

Numerics numerics_of(bool hf_float32) { return hf_float32 ? Numerics::kHfFloat32 : Numerics::kAccurate; }

py::dict schedule_dict(const std::string& params_json, std::optional<std::int64_t> seq_len, bool hf_float32) {
  const RopeParams params = rope_params_from_json(params_json, "params");
  return schedule_fields(compute_schedule(params, seq_len, numerics_of(hf_float32)), params);
}

// HF's runtime rule (RopeRuntime: dynamic NTK grows and resets, LongRoPE switches) for the
// Python modules, so Python and C++ follow one rule; update() returns the schedule in force.
struct PyRopeRuntime {
  RopeParams params;
  RopeRuntime runtime;
  PyRopeRuntime(const std::string& params_json, bool hf_float32)
      : params(rope_params_from_json(params_json, "params")), runtime(params, numerics_of(hf_float32)) {}
};

// One call of the RoPE kernels on a tensor, as Python passes it (by keyword): the tensor and its
// positions as DLPack capsules (tensor_arg.h), so nothing crosses as a raw address.
struct RotateCall {
  py::object data;                        // [B, S, H, D] (heads_dim 2) or [B, H, S, D] (heads_dim 1)
  int heads_dim = 2;
  py::object positions;                   // None: implicit positions offset, offset + 1, ...; else [S], [B, S] or [axes, B, S]
  std::int64_t offset = 0;
  std::vector<float> inv_freq;
  std::vector<std::uint8_t> axis_of_freq;  // M-RoPE: the axis of each frequency; empty otherwise
  double attention_factor = 1.0;
  std::string layout = "half_split";
  int direction = 1;                      // -1: the transpose (backward)
  int threads = 0;
  // xPos (rope_xpos.h): scale_base 0 is plain RoPE; the role of the one tensor this call rotates
  double xpos_scale_base = 0, xpos_gamma = 0.4, xpos_center = 0;
  std::string xpos_role = "query";        // query | key
};

template <class V>
void for_each_field(RotateCall& c, V&& visit) {
  visit("data", c.data);
  visit("heads_dim", c.heads_dim);
  visit("positions", c.positions);
  visit("offset", c.offset);
  visit("inv_freq", c.inv_freq);
  visit("axis_of_freq", c.axis_of_freq);
  visit("attention_factor", c.attention_factor);
  visit("layout", c.layout);
  visit("direction", c.direction);
  visit("threads", c.threads);
  visit("xpos_scale_base", c.xpos_scale_base);
  visit("xpos_gamma", c.xpos_gamma);
  visit("xpos_center", c.xpos_center);
  visit("xpos_role", c.xpos_role);
}

// Every keyword is required and known: a misspelt one is an Error naming it.
RotateCall rotate_call(const py::kwargs& kwargs) {
  RotateCall c;
  std::size_t found = 0;
  for_each_field(c, [&](const char* name, auto& member) {
    if (!kwargs.contains(name)) throw Error(std::string("rope_rotate: keyword '") + name + "' is missing");
    try {
      member = kwargs[name].cast<std::decay_t<decltype(member)>>();
    } catch (const py::cast_error&) {
      throw Error(std::string("rope_rotate: keyword '") + name + "' cannot be read from " +
                  std::string(py::repr(kwargs[name])).substr(0, 80));
    }
    ++found;
  });
  if (found != kwargs.size()) {
    std::string given;
    for (const auto& item : kwargs) given += " " + py::cast<std::string>(item.first);
    throw Error("rope_rotate: an unknown keyword among" + given);
  }
  return c;
}

// The call's strided view (of the tensor torch describes) and its kernel parameters.
RopeTensor view_of(const RotateCall& c) {
  const TensorArg t = tensor_arg(c.data, "data");
  check_written(t, "data");  // rotated in place
  return rope_view(t, c.heads_dim, "data");
}
RopeApplyParams apply_params_of(const RotateCall& c) {
  RopeApplyParams p = rope_apply_params(c.inv_freq, c.attention_factor, from_name<RopeLayout>(c.layout), c.axis_of_freq);
  p.direction = c.direction;
  if (c.xpos_role != "query" && c.xpos_role != "key")
    throw Error("xpos_role must be query or key, got '" + c.xpos_role + "'");
  p.xpos.scale_base = c.xpos_scale_base;
  p.xpos.gamma = c.xpos_gamma;
  p.xpos.center = c.xpos_center;
  p.xpos.first = c.xpos_role == "key" ? XPosRole::kKey : XPosRole::kQuery;
  return p;
}

// Rotates one strided view in place. The GIL is released while the kernel runs.
void rope_rotate_view(const RotateCall& c) {
  const RopeTensor x = view_of(c);
  const PositionIds ids = c.positions.is_none()
                              ? PositionIds::implicit(c.offset)
                              : position_ids(tensor_arg(c.positions, "positions"), x.batch, x.tokens, c.offset, "positions");
  if (ids.axes > 1 && c.axis_of_freq.empty())
    throw Error("positions: " + std::to_string(ids.axes) + " position axes, but the schedule has no M-RoPE axis map "
                "(axis_of_freq): pass [S] or [B, S] positions");
  const RopeApplyParams p = apply_params_of(c);
  RopeKernelOptions options;
  options.threads = c.threads;
  validate(x, ids, p);  // with the GIL held: errors become exceptions before any write
  py::gil_scoped_release release;
  rope_rotate(x, nullptr, ids, p, options);
}

// Shifts post-RoPE keys in place by delta positions (rope_shift.h: p -> p + delta), tokens
// [begin, end); the call's positions (None) and offset are not read (the keys' own are not needed).
void rope_shift_view(const RotateCall& c, std::int64_t delta, int begin, int end) {
  RopeShiftParams shift;
  shift.rope = apply_params_of(c);
  shift.delta = delta;
  shift.begin = begin;
  shift.end = end;
  KernelOptions options;
  options.threads = c.threads;
  rope_shift(view_of(c), shift, options);  // validates before it writes
}

}  // namespace

namespace posenc {
void add_rotary_variants(py::module_& m);  // rotary_module.cc
void add_vision_module(py::module_& m);    // vision_module.cc
void add_engine_kit(py::module_& m);  // engine_module.cc
void add_plots(py::module_& m);       // plot_module.cc
}  // namespace posenc

PYBIND11_MODULE(_posenc, m) {
  m.doc() = "posenc's C++ core (use the posenc package, not this module)";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);
  m.def("load_hf_config", [](const std::string& path, bool lenient, bool hf_compatible) {
    return model_dict(load_hf_config(path, ConfigOptions{lenient, hf_compatible}));
  });
  m.def("parse_hf_config", [](const std::string& text, bool lenient, bool hf_compatible) {
    return model_dict(parse_hf_config(text, ConfigOptions{lenient, hf_compatible}));
  });
  // ModelRope::select over the layer types a Python Model holds: one rule for which layer type a
  // model shows, the CLI's and Python's.
  m.def("select_layer", [](const std::vector<std::pair<std::string, bool>>& layers, const std::string& layer_type) {
    ModelRope model;
    for (const auto& [type, has_rope] : layers) model.layers.push_back(LayerRope{type, has_rope, {}, std::nullopt});
    return static_cast<int>(&model.select(layer_type) - model.layers.data());
  });
  m.def("schedule", &schedule_dict);
  py::class_<PyRopeRuntime>(m, "RopeRuntime")
      .def(py::init<const std::string&, bool>())
      .def("update", [](PyRopeRuntime& r, std::int64_t max_position_id) {
        return schedule_fields(r.runtime.update(max_position_id), r.params);
      })
      .def_property_readonly("max_seq_len_cached", [](const PyRopeRuntime& r) { return r.runtime.max_seq_len_cached(); });
  m.def("rope_rotate", [](const py::kwargs& kwargs) { rope_rotate_view(rotate_call(kwargs)); });
  add_rotary_variants(m);
  add_vision_module(m);
  add_engine_kit(m);
  add_plots(m);
  m.def("rope_shift", [](std::int64_t delta, int begin, int end, const py::kwargs& kwargs) {
    rope_shift_view(rotate_call(kwargs), delta, begin, end);
  });
  m.attr("learned_init_std") = kLearnedInitStd;  // N(0, std) of learned position tables and T5 biases
  m.def("kernel_target", [] { return std::string(rope_kernel_target()); });
  m.def("max_threads", [] { return kMaxThreads; });
  m.def("sinusoidal_table", [](const std::vector<std::int64_t>& positions, int dim, const std::string& layout, double base,
                               const std::string& freq) {
    SinusoidalParams p;
    p.dim = dim;
    p.layout = from_name<SinusoidalLayout>(layout);
    p.freqs = from_name<SinusoidalFreqs>(freq);
    p.base = base;
    validate(p);
    return owned_array(sinusoidal_table(p, positions));
  });
  m.def("alibi_slopes", &alibi_slopes);
  m.def("kerple_init", [](int heads, const std::string& kind) {  // (r1, r2) posenc's Kerple starts from
    const KerpleParams p = kerple_init(heads, from_name<KerpleKind>(kind));
    return std::make_pair(p.r1, p.r2);
  });
  m.def("kerple_table", [](const std::vector<double>& r1, const std::vector<double>& r2, const std::string& kind,
                           std::int64_t length) {
    KerpleParams p;
    p.kind = from_name<KerpleKind>(kind);
    p.r1 = r1;
    p.r2 = r2;
    return owned_array(kerple_table(p, length));
  });
  m.def("sandwich_table", [](int heads, int dim, std::int64_t length) {
    return owned_array(sandwich_table(SandwichParams{heads, dim}, length));
  });
  m.def("deberta_relative_positions", [](int q_len, int k_len, int buckets, int max_relative) {
    return owned_array(deberta_relative_positions(q_len, k_len, {buckets, max_relative}));
  });
  m.def("xl_relative_sinusoid",
        [](int dim, int klen, int clamp_len) { return owned_array(xl_relative_sinusoid(dim, klen, clamp_len)); });
  m.def("check", [](int dim, std::int64_t positions, std::uint64_t seed) {
    CheckOptions o;
    o.dim = dim;
    o.positions = positions;
    o.seed = seed;
    py::list out;
    for (const PropertyCheck& c : run_property_checks(o)) {
      py::dict d;
      d["name"] = c.name;
      d["claim"] = c.claim;
      d["measured"] = c.measured;
      d["tolerance"] = c.tolerance;
      d["passed"] = c.pass();
      out.append(d);
    }
    return out;
  });
  // Qwen2-VL's (row, column) ids of a t x h x w grid in the tower's block-major order, [2][t h w].
  m.def("vision_2d_position_ids", [](int t, int h, int w, int merge_size) {
    if (t > 0 && h > 0 && w > 0 && std::int64_t{t} * h * w > (std::int64_t{1} << 26))
      throw Error("a vision grid of " + std::to_string(std::int64_t{t} * h * w) + " patches; at most 2^26");
    return owned_array(vision_2d_position_ids(t, h, w, merge_size));
  });
  // Qwen3-Omni ("qwen3-omni") returns float64 ids (HF's float32 values) and a float rope_delta.
  m.def("mrope_position_ids", [](const std::vector<std::tuple<std::string, int, int, int, int>>& runs, int merge_size,
                                  const std::string& rule, double time_interval, const std::vector<double>& video_seconds,
                                  double seconds_per_chunk) {
    std::vector<TokenRun> r;
    std::size_t videos = 0;
    for (const auto& [kind, length, t, h, w] : runs) {
      TokenRun run;
      if (kind == "text") run.kind = TokenRun::kText;
      else if (kind == "image") run.kind = TokenRun::kImage;
      else if (kind == "video") run.kind = TokenRun::kVideo;
      else if (kind == "audio") run.kind = TokenRun::kAudio;
      else if (kind == "video_with_audio") run.kind = TokenRun::kVideoWithAudio;
      else throw Error("run kind must be text, image, video, video_with_audio or audio, got '" + kind + "'");
      run.length = length;
      run.t = t;
      run.h = h;
      run.w = w;
      run.time_interval = time_interval;
      run.seconds_per_chunk = seconds_per_chunk;
      const bool video = run.kind == TokenRun::kVideo || run.kind == TokenRun::kVideoWithAudio;  // HF's video_idx
      if (video && videos < video_seconds.size()) run.seconds_per_grid = video_seconds[videos];
      videos += video;
      r.push_back(run);
    }
    if (!video_seconds.empty() && video_seconds.size() != videos)
      throw Error("video_seconds_per_grid has " + std::to_string(video_seconds.size()) + " values for " +
                  std::to_string(videos) + " video runs; give one per video (or none: 1 second each)");
    if (rule == "qwen3-omni") {
      MropeFloatIndex index = qwen3_omni_position_ids(r, merge_size);
      return py::make_tuple(owned_array(std::move(index.ids)), index.seq_len, index.rope_delta);
    }
    if (rule != "v5" && rule != "v4.49") throw Error("rule must be 'v5', 'v4.49' or 'qwen3-omni', got '" + rule + "'");
    MropeIndex index = mrope_position_ids(r, merge_size, rule == "v5" ? MropeIndexRule::kV5 : MropeIndexRule::kV4_49);
    return py::make_tuple(owned_array(std::move(index.ids)), index.seq_len, index.rope_delta);
  });
  m.def("qwen_omni_audio_tokens", [](std::int64_t mel_frames, bool qwen3) { return qwen_omni_audio_tokens(mel_frames, qwen3); });
  // relative: a contiguous int64 tensor (capsule), read in place; the buckets an owned array (8
  // bytes each, where lists cost ~36 in and out).
  m.def("t5_buckets", [](const py::object& relative, int num_buckets, int max_distance, bool bidirectional) {
    const T5BucketParams p{num_buckets, max_distance, bidirectional};
    validate(p);
    const TensorArg r = tensor_arg(relative, "relative");
    const auto* in = static_cast<const std::int64_t*>(contiguous_buffer(r, ElementKind::kI64, r.shape, "relative"));
    std::vector<std::int64_t> out(static_cast<std::size_t>(r.numel));
    {
      py::gil_scoped_release release;
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = t5_bucket(in[i], p);
    }
    return owned_array(std::move(out));
  });
}
