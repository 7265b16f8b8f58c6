// The schedule handle: a config.json text → ModelSpec (model_spec.h, the same reading as
// `posenc spec`), one layer selected, its schedule held by a RopeRuntime so HF's runtime rule
// (rope_runtime.h) moves it; getters copy out what the handle owns.
#include <climits>
#include <cmath>
#include <memory>

#include "capi_internal.h"
#include "config_text.h"  // kMaxConfigBytes: the limit every reader of a config shares
#include "posenc/mrope.h"

namespace posenc::capi {
namespace {

// POSENC_ATTENTION_* and posenc_layer_info.query_scale_rule are the C++ enums' values.
static_assert(static_cast<int>(AttentionKind::kFull) == POSENC_ATTENTION_FULL &&
              static_cast<int>(AttentionKind::kSliding) == POSENC_ATTENTION_SLIDING &&
              static_cast<int>(AttentionKind::kChunked) == POSENC_ATTENTION_CHUNKED &&
              static_cast<int>(AttentionKind::kLinear) == POSENC_ATTENTION_LINEAR &&
              static_cast<int>(AttentionKind::kCross) == POSENC_ATTENTION_CROSS &&
              static_cast<int>(AttentionKind::kNone) == POSENC_ATTENTION_NONE);
static_assert(static_cast<int>(QueryScale::kLlama4Temperature) == 1 && static_cast<int>(QueryScale::kLlama4ScalingBeta) == 2 &&
              static_cast<int>(QueryScale::kQwenLogN) == 3);

constexpr std::uint32_t kKnownFlags = POSENC_CONFIG_LENIENT | POSENC_CONFIG_HF_COMPATIBLE | POSENC_CONFIG_HF_FLOAT32;

ModelSpec parse(const char* json, std::int64_t length, std::uint32_t flags, posenc_schedule& h) {
  require(json, "json");
  in_range(length, 1, static_cast<std::int64_t>(config_text::kMaxConfigBytes), "length (bytes of config.json text, at most 16 MiB)");
  if (flags & ~kKnownFlags)
    fail("flags " + std::to_string(flags) + " has unknown bits (known: 1 lenient, 2 hf_compatible, 4 hf_float32)");
  h.numerics = (flags & POSENC_CONFIG_HF_FLOAT32) ? Numerics::kHfFloat32 : Numerics::kAccurate;
  const ConfigOptions options{(flags & POSENC_CONFIG_LENIENT) != 0, (flags & POSENC_CONFIG_HF_COMPATIBLE) != 0};
  ModelSpec spec = parse_model_spec(std::string(json, static_cast<std::size_t>(length)), options);
  // A schedule handle is RoPE's: a learned-table, ALiBi or T5 model is refused naming its scheme.
  if (!spec.positions.is_rope()) fail(not_rope_message(spec.positions), POSENC_ERR_VALUE);
  return spec;
}

// Fills the handle from layer type rope_index of the spec (-1: a NoPE layer) and the layer's facts.
void fill(posenc_schedule& h, const ModelSpec& spec, int rope_index, const LayerSpec& layer) {
  h.family_known = spec.family != nullptr;
  h.layer = layer;
  h.model_type = spec.rope.model_type;
  h.layer_type = layer.layer_type;
  h.has_rope = rope_index >= 0 && spec.rope.layers[static_cast<std::size_t>(rope_index)].has_rope;
  if (!h.has_rope) return;
  h.params = spec.rope.layers[static_cast<std::size_t>(rope_index)].params;
  h.runtime.emplace(h.params, h.numerics);
  h.rope_type = to_string(h.params.type);
  h.mrope_section = spec.mrope_section;
  if (spec.mrope_style == MropeStyle::kXdrope) {
    h.mrope_style = "xdrope";  // no per-frequency axis map (mrope.h xdrope_column_axes): 1-D positions
  } else if (!spec.mrope_section.empty()) {
    const bool interleaved = spec.mrope_style == MropeStyle::kInterleaved;
    h.mrope_style = interleaved ? "interleaved" : "contiguous";
    h.axis_of_freq = mrope_axis_map(spec.mrope_section, interleaved);
    const std::size_t freqs = h.schedule()->inv_freq.size();
    if (h.axis_of_freq.size() != freqs)
      throw Error("mrope_section sums to " + std::to_string(h.axis_of_freq.size()) + " frequencies, the schedule has " +
                  std::to_string(freqs));
  }
}

// A layer's facts when the family is unknown: what the schedule says, the rest defaults.
LayerSpec default_layer(const LayerRope& l, const RopeSchedule& s) {
  LayerSpec layer;
  layer.index = -1;
  layer.layer_type = l.layer_type;
  layer.head_dim = l.params.head_dim;
  layer.rotary_dim = s.rotary_dim;
  layer.softmax_scale = 1.0 / std::sqrt(static_cast<double>(l.params.head_dim));
  return layer;
}

// One scalar fact of a schedule handle written to *out: the checks every getter shares.
template <class T, class Fact>
posenc_status scalar_out(const char* function, const posenc_schedule* schedule, T* out, Fact fact) {
  return guarded(function, [&] {
    const posenc_schedule& s = handle(schedule);
    require(out, "out");
    *out = static_cast<T>(fact(s));
  });
}

}  // namespace
}  // namespace posenc::capi

using namespace posenc;
using namespace posenc::capi;

extern "C" {

POSENC_API posenc_status posenc_schedule_from_config(const char* json, int64_t length, uint32_t flags,
                                                     int64_t layer_index, posenc_schedule** out) {
  return guarded(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    auto h = std::make_unique<posenc_schedule>();
    const ModelSpec spec = parse(json, length, flags, *h);
    if (spec.layers.empty())
      fail("model_type '" + spec.rope.model_type +
               "': posenc does not know this family's per-layer semantics; select by layer type "
               "(posenc_schedule_from_config_type)",
           POSENC_ERR_VALUE);
    in_range(layer_index, 0, static_cast<std::int64_t>(spec.layers.size()) - 1, "layer_index");
    const LayerSpec& layer = spec.layers[static_cast<std::size_t>(layer_index)];
    fill(*h, spec, layer.rope ? layer.schedule : -1, layer);
    *out = h.release();
  });
}

POSENC_API posenc_status posenc_schedule_from_config_type(const char* json, int64_t length, uint32_t flags,
                                                          const char* layer_type, posenc_schedule** out) {
  return guarded(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    auto h = std::make_unique<posenc_schedule>();
    const ModelSpec spec = parse(json, length, flags, *h);
    const LayerRope& chosen = spec.rope.select(layer_type ? layer_type : "");
    const int index = static_cast<int>(&chosen - spec.rope.layers.data());
    const LayerSpec* layer = nullptr;
    for (const LayerSpec& l : spec.layers)
      if (l.schedule == index && !layer) layer = &l;
    fill(*h, spec, index, layer ? *layer : default_layer(chosen, spec.schedules[static_cast<std::size_t>(index)]));
    *out = h.release();
  });
}

POSENC_API posenc_status posenc_schedule_at(const posenc_schedule* schedule, int64_t seq_len, posenc_schedule** out) {
  return guarded(__func__, [&] {
    require(out, "out");
    *out = nullptr;
    const posenc_schedule& s = handle(schedule);
    in_range(seq_len, 1, kMaxPosition, "seq_len");
    auto h = std::make_unique<posenc_schedule>(s);
    // A fresh rotary module after one call of seq_len tokens: HF's rule, not compute_schedule at
    // seq_len (dynamic NTK keeps the init frequencies below max_position_embeddings).
    if (h->has_rope) {
      h->runtime.emplace(h->params, h->numerics);
      h->runtime->update(seq_len - 1);
    }
    *out = h.release();
  });
}

POSENC_API posenc_status posenc_schedule_update(posenc_schedule* schedule, int64_t max_position_id) {
  return guarded(__func__, [&] {
    require(schedule, "schedule");
    in_range(max_position_id, 0, kMaxPosition - 1, "max_position_id");
    if (schedule->has_rope) schedule->runtime->update(max_position_id);
  });
}

POSENC_API void posenc_schedule_free(posenc_schedule* schedule) { delete schedule; }

POSENC_API posenc_status posenc_schedule_inv_freq(const posenc_schedule* schedule, float* out, int64_t capacity,
                                                  int64_t* count) {
  return guarded(__func__, [&] {
    const posenc_schedule& s = handle(schedule);
    copy_out(s.has_rope ? s.schedule()->inv_freq : std::vector<float>{}, out, capacity, count, "inv_freq");
  });
}

POSENC_API posenc_status posenc_schedule_axis_of_freq(const posenc_schedule* schedule, uint8_t* out, int64_t capacity,
                                                      int64_t* count) {
  return guarded(__func__, [&] { copy_out(handle(schedule).axis_of_freq, out, capacity, count, "axis_of_freq"); });
}

POSENC_API posenc_status posenc_schedule_attention_factor(const posenc_schedule* schedule, double* out) {
  return scalar_out(__func__, schedule, out,
                    [](const posenc_schedule& s) { return s.has_rope ? s.schedule()->attention_factor : 1.0; });
}

POSENC_API posenc_status posenc_schedule_rotary_dim(const posenc_schedule* schedule, int32_t* out) {
  return scalar_out(__func__, schedule, out,
                    [](const posenc_schedule& s) { return s.has_rope ? s.schedule()->rotary_dim : 0; });
}

POSENC_API posenc_status posenc_schedule_head_dim(const posenc_schedule* schedule, int32_t* out) {
  return scalar_out(__func__, schedule, out,
                    [](const posenc_schedule& s) { return s.layer.head_dim > 0 ? s.layer.head_dim : s.params.head_dim; });
}

POSENC_API posenc_status posenc_schedule_layer(const posenc_schedule* schedule, posenc_layer_info* out) {
  return guarded(__func__, [&] {
    const posenc_schedule& s = handle(schedule);
    require(out, "out");
    // Every field is an output: a shorter struct (an older header) gets the fields it has, a
    // longer one (a newer header) keeps its tail as it was.
    const std::uint32_t size = out->struct_size;
    if (size < sizeof(std::uint32_t) || size > (1u << 16))
      fail("posenc_layer_info.struct_size " + std::to_string(size) + " is not a size (set it to sizeof)");
    posenc_layer_info i{};
    i.struct_size = size;
    const LayerSpec& l = s.layer;
    const RopeSchedule* r = s.schedule();
    i.family_known = s.family_known;
    i.index = l.index;
    i.rope = s.has_rope;
    i.layout = l.layout == RopeLayout::kHalfSplit ? POSENC_LAYOUT_HALF_SPLIT
               : l.layout == RopeLayout::kInterleaved ? POSENC_LAYOUT_INTERLEAVED
                                                      : POSENC_LAYOUT_DEEPSEEK_V3;
    i.head_dim = l.head_dim;
    i.rotary_offset = l.rotary_offset;
    i.rotary_dim = s.has_rope ? l.rotary_dim : 0;
    i.attention = static_cast<int32_t>(l.attention);
    i.window = l.window ? *l.window : -1;
    i.softmax_scale = l.softmax_scale;
    i.softmax_scale_multiplier = l.softmax_scale_multiplier;
    i.query_scale_rule = static_cast<int32_t>(l.query_scale.rule);
    i.query_scale = l.query_scale.scale;
    i.query_floor_scale = l.query_scale.floor_scale;
    i.attention_factor = r ? r->attention_factor : 1.0;
    i.base = r ? r->base : 0.0;
    i.seq_len = r && r->seq_len ? *r->seq_len : -1;
    i.uses_long_factors = r && r->uses_long_factors;
    for (std::size_t a = 0; a < 3 && a < s.mrope_section.size(); ++a) i.mrope_section[a] = s.mrope_section[a];
    i.model_type = s.model_type.c_str();
    i.layer_type = s.layer_type.c_str();
    i.rope_type = s.rope_type.c_str();
    i.pairing = pairing_name(l.layout);
    i.output_order = output_order(l.layout) ? output_order(l.layout) : "";
    i.attention_name = to_string(l.attention);
    i.qk_norm = to_string(l.qk_norm);
    i.query_scale_name = l.query_scale.name();
    i.mrope_style = s.mrope_style.c_str();
    // Only the bytes the caller's struct has (an older header's shorter struct).
    std::memcpy(out, &i, size < sizeof i ? size : sizeof i);
  });
}

POSENC_API posenc_status posenc_schedule_query_scale_at(const posenc_schedule* schedule, int64_t position,
                                                        double* out) {
  return guarded(__func__, [&] {
    const posenc_schedule& s = handle(schedule);
    require(out, "out");
    *out = s.layer.query_scale.at(in_range(position, 0, kMaxPosition, "position"));
  });
}

}  // extern "C"
