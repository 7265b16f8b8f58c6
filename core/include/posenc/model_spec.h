// A model's whole positional semantics, per layer, from its config.json: which layers rotate,
// how channels pair, which channels rotate, the schedule, the attention kind and window, the
// position-dependent query scaling and the softmax scale. The rules per family live in one table
// (model_families.h), the rules of layers in one pass (model_layers.cc); the schedules come from
// hf_config.h, read from the same parsed document. `posenc spec` prints this.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/hf_config.h"
#include "posenc/model_families.h"
#include "posenc/model_positions.h"
#include "posenc/mrope.h"
#include "posenc/rope_schedule.h"
#include "posenc/vision_rope.h"

namespace posenc {

// A query multiplier that depends on the absolute position p (q *= at(p) before q.k).
struct QueryScaling {
  QueryScale rule = QueryScale::kNone;
  // Llama 4: attn_scale and floor_scale, q *= 1 + attn_scale * log1p(floor((p + 1) / floor_scale))
  //   (Llama4TextAttention; p is the cache position, hence the + 1).
  // Ministral 3: llama_4_scaling_beta and original_max_position_embeddings,
  //   q *= 1 + beta * log(1 + floor(p / original_max)) (get_llama_4_attn_scale; p = position_ids).
  // Qwen-1: use_logn_attn, floor_scale = seq_length, q *= log(p + 1) / log(seq_length) past it
  //   (QWenAttention logn_list; p is the cache index).
  double scale = 0;
  double floor_scale = 1;
  double at(std::int64_t position) const;  // 1 for kNone
  const char* name() const;  // "llama4_attn_temperature_tuning", "llama_4_scaling_beta", "qwen_logn_attn", "none"
};

// What a layer's attention attends to.
enum class AttentionKind {
  kFull,     // every earlier token
  kSliding,  // the last `window` tokens
  kChunked,  // tokens of the same `window`-sized chunk (Llama 4's RoPE layers)
  kLinear,   // linear attention (Gated DeltaNet, KDA): no positions
  kCross,    // cross-attention to the image (Mllama): no positions
  kNone,     // not attention (LFM2's short convolutions, the hybrids' Mamba and MLP blocks)
};
POSENC_ENUM_NAMES(AttentionKind, "attention", {AttentionKind::kFull, "full"}, {AttentionKind::kSliding, "sliding"},
                  {AttentionKind::kChunked, "chunked"}, {AttentionKind::kLinear, "linear"},
                  {AttentionKind::kCross, "cross"}, {AttentionKind::kNone, "none"});

// Where a layer normalises q and k per head (the family's rule, QkNorm, applied to the layer).
enum class QkNormPlacement {
  kNone,
  kBeforeRope,   // RMSNorm (or LayerNorm) on q and k, then RoPE
  kL2AfterRope,  // Llama 4: L2 norm after RoPE
  kAfterRope,    // HunYuan: RMSNorm on q and k after RoPE
};
POSENC_ENUM_NAMES(QkNormPlacement, "qk_norm", {QkNormPlacement::kNone, "none"},
                  {QkNormPlacement::kBeforeRope, "before_rope"}, {QkNormPlacement::kL2AfterRope, "l2_after_rope"},
                  {QkNormPlacement::kAfterRope, "after_rope"});

// DeepSeek-V3.2's lightning indexer in one layer (FamilyQuirks::dsa_indexer): its own q/k heads,
// rotated with the layer's schedule at the same positions, with their own pairing and channels.
struct IndexerSpec {
  int heads = 0;         // index_n_heads
  int head_dim = 0;      // index_head_dim
  int rotary_offset = 0; // first rotated channel: 0, the rope part comes first
  int rotary_dim = 0;    // qk_rope_head_dim
  RopeLayout layout = RopeLayout::kHalfSplit;
  double softmax_scale = 1;  // index_head_dim^-0.5, before the indexer's ReLU
  std::vector<std::array<int, 2>> rotated_channels;
};

struct LayerSpec {
  int index = 0;
  std::string layer_type;       // "full_attention", "sliding_attention", "chunked_attention", ...
  bool rope = true;
  RopeLayout layout = RopeLayout::kHalfSplit;  // pairing_name() and output_order() (rope_apply.h) print it
  int head_dim = 0;             // q/k channels per head (MLA: qk_nope_head_dim + qk_rope_head_dim)
  int rotary_offset = 0;        // first rotated channel (MLA: qk_nope_head_dim; else 0)
  int rotary_dim = 0;           // rotated channels from rotary_offset on (0 when !rope)
  AttentionKind attention = AttentionKind::kFull;
  std::optional<std::int64_t> window;  // sliding window or chunk size
  QueryScaling query_scale;
  double softmax_scale = 1;             // the scale on q.k, multiplier included
  double softmax_scale_multiplier = 1;  // DeepSeek MLA mscale^2; 1 when none
  QkNormPlacement qk_norm = QkNormPlacement::kNone;
  int schedule = -1;            // index into ModelSpec::schedules; -1 when !rope
  // The channels that rotate, as [begin, end) ranges: [rotary_offset, rotary_offset + rotary_dim)
  // unless the schedule has zero frequencies (proportional), whose channels pass through: Gemma 4's
  // 64 angles over head_dim 512 rotate [0, 64) and [256, 320) under rotate_half. Empty when !rope.
  std::vector<std::array<int, 2>> rotated_channels;
  // Gemma 3n / 4: the earlier layer whose K/V (its rotated keys) this layer attends with; the
  // layer rotates only its queries. nullopt: the layer computes its own K/V.
  std::optional<int> kv_shared_from;
  std::optional<IndexerSpec> indexer;  // DeepSeek-V3.2's DSA indexer; nullopt for every other family
};

// What HF's get_rope_index reads besides the grids (vision_config, defaults of HF's classes).
struct MropeVision {
  std::string family;             // the model_type whose get_rope_index applies
  int merge_size = 2;             // vision_config.spatial_merge_size
  double time_interval = 1;       // T step per temporal patch: Qwen2.5-VL tokens_per_second (x 1 s per grid)
  bool frames_split = false;      // Qwen3-VL: a video is one t = 1 grid per frame, timestamps between
  // Where the run after a vision run starts (Qwen2.5-Omni: the last piece's max + 1, as HF <= 4.49)
  // and the T step of an image's temporal patches (Qwen2.5-Omni: position_id_per_seconds).
  MropeIndexRule rule = MropeIndexRule::kV5;
  double image_time_interval = 1;
};

struct ModelSpec {
  // The model's positional scheme. Not RoPE (BERT, BLOOM, T5, Whisper, ...): everything below is
  // empty, the stacks say what the model has instead.
  ModelPositions positions;
  ModelRope rope;                      // per layer type, as hf_config reads it
  std::vector<RopeSchedule> schedules; // parallel to rope.layers (empty schedule where !has_rope)
  const FamilyQuirks* family = nullptr;  // nullptr: per-layer semantics unknown, layers empty
  std::vector<LayerSpec> layers;       // one per layer, in order
  // A model whose layers are all alike but not counted (no num_hidden_layers, no layer_types):
  // the facts of every layer, index 0 standing for each. Set only when `layers` is empty.
  std::optional<LayerSpec> every_layer;
  std::vector<int> mrope_section;      // empty unless M-RoPE
  std::optional<MropeStyle> mrope_style;  // set with mrope_section
  // The vision positions of the families whose get_rope_index posenc follows (qwen2_vl,
  // qwen2_5_vl, qwen3_vl(_moe), qwen3_5(_moe), hunyuan_vl, qwen2_5_omni without audio); unset for
  // other M-RoPE models (GLM-4.1V).
  std::optional<MropeVision> mrope_vision;
  // The vision tower's own 2-D RoPE (vision_config of Pixtral, Llama 4, the Qwen-VL towers);
  // independent of the text model's positions above.
  std::optional<VisionRope> vision_rope;
  std::vector<std::string> warnings;   // rope.warnings plus the spec's own
};

ModelSpec parse_model_spec(const std::string& json_text, const ConfigOptions& options = {});
ModelSpec load_model_spec(const std::string& path, const ConfigOptions& options = {});

}  // namespace posenc
