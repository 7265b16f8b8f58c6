// A model's whole positional semantics, per layer, from its config.json: which layers rotate,
// how channels pair, which channels rotate, the schedule, the attention kind and window, the
// position-dependent query scaling and the softmax scale. The rules per family live in one table
// (model_families.h); the schedules come from hf_config.h. `posenc spec` prints this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/hf_config.h"
#include "posenc/model_families.h"
#include "posenc/rope_schedule.h"

namespace posenc {

// A query multiplier that depends on the absolute position p (q *= at(p) before q.k).
struct QueryScaling {
  QueryScale rule = QueryScale::kNone;
  // Llama 4: attn_scale and floor_scale, q *= 1 + attn_scale * log1p(floor((p + 1) / floor_scale))
  //   (Llama4TextAttention; p is the cache position, hence the + 1).
  // Ministral 3: llama_4_scaling_beta and original_max_position_embeddings,
  //   q *= 1 + beta * log(1 + floor(p / original_max)) (get_llama_4_attn_scale; p = position_ids).
  double scale = 0;
  double floor_scale = 1;
  double at(std::int64_t position) const;  // 1 for kNone
  const char* name() const;  // "llama4_attn_temperature_tuning", "llama_4_scaling_beta", "none"
};

struct LayerSpec {
  int index = 0;
  std::string layer_type;       // "full_attention", "sliding_attention", "chunked_attention", ...
  bool rope = true;
  Pairing pairing = Pairing::kHalfSplit;
  int head_dim = 0;             // q/k channels per head (MLA: qk_nope_head_dim + qk_rope_head_dim)
  int rotary_offset = 0;        // first rotated channel (MLA: qk_nope_head_dim; else 0)
  int rotary_dim = 0;           // rotated channels from rotary_offset on (0 when !rope)
  std::string attention;        // "full", "sliding", "chunked", "linear", "cross", "none"
  std::optional<std::int64_t> window;  // sliding window or chunk size
  QueryScaling query_scale;
  double softmax_scale = 1;             // the scale on q.k, multiplier included
  double softmax_scale_multiplier = 1;  // DeepSeek MLA mscale^2; 1 when none
  std::string qk_norm;          // "" (none), "before_rope", "l2_after_rope"
  int schedule = -1;            // index into ModelSpec::schedules; -1 when !rope
};

struct ModelSpec {
  ModelRope rope;                      // per layer type, as hf_config reads it
  std::vector<RopeSchedule> schedules; // parallel to rope.layers (empty schedule where !has_rope)
  const FamilyQuirks* family = nullptr;  // nullptr: per-layer semantics unknown, layers empty
  std::vector<LayerSpec> layers;       // one per layer, in order
  std::vector<int> mrope_section;      // empty unless M-RoPE
  std::string mrope_style;             // "contiguous" (Qwen2-VL), "interleaved" (Qwen3-VL)
  std::vector<std::string> warnings;   // rope.warnings plus the spec's own
};

ModelSpec parse_model_spec(const std::string& json_text, const ConfigOptions& options = {});
ModelSpec load_model_spec(const std::string& path, const ConfigOptions& options = {});

}  // namespace posenc
