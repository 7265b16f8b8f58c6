// Golden's per-axis M-RoPE vectors: one sequence text 2, image, text 2, video, text 2 (the 2-token
// text runs stand for <text><vision_start> and <vision_end><text>) at the 3-axis position ids HF's
// get_rope_index builds for it (posenc/mrope.h mrope_position_ids, the v5 rule), q and k rotated
// with each frequency at its axis' position (HF's apply_multimodal_rotary_pos_emb, Qwen3-VL's
// apply_interleaved_mrope: posenc's mrope_axis_map), in HF's float32 angles.
//
//   <lt>.vision.position_ids  [3, N]  T, H, W ids (float32, exact: below 2^24)
//   <lt>.vision.cos, .sin     [N, R]  cat(freqs, freqs) order, attention factor included
//   <lt>.vision.q, .k         [N, D]  seeded, uniform in [-1, 1)
//   <lt>.vision.q_out, .k_out [N, D]  rotated (no query scale: HF's vision models have none)
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <vector>

#include "posenc/golden.h"
#include "posenc/model_spec.h"
#include "posenc/mrope.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_schedule.h"

namespace posenc {

// Moves the tensors into `out`, naming each in entry["tensors"], and returns the entry.
nlohmann::json with_tensors(nlohmann::json entry, std::initializer_list<F32Tensor*> tensors, std::vector<F32Tensor>& out);

// The runs of golden's vision sequence for these grids (Qwen3-VL: the video as t frames of
// t = 1, each after a 2-token timestamp).
std::vector<TokenRun> golden_vision_runs(const MropeVision& vision, const std::array<int, 3>& image,
                                         const std::array<int, 3>& video);

// Appends the layer type's vision tensors to `out` and returns the manifest's "vision" entry.
// `uniform` draws q and k (the layer type's seeded stream).
nlohmann::json golden_vision_vectors(const ModelSpec& spec, const LayerSpec& layer, const RopeSchedule& schedule,
                                     const RopeApplyParams& ap, const GoldenParams& params,
                                     const std::function<float()>& uniform, std::vector<F32Tensor>& out);

// HunYuan-VL's XD-RoPE (mrope.h xdrope_column_axes): one sequence text 2, image, text 2 at
// xdrope_position_ids, each cos/sin column at its own axis' position, and q, k through HF's
// q * cos + rotate_half(q) * sin in float32 (the per-pair kernels cannot: a pair may read two
// axes). The same tensor names as above, position_ids [A, N] with A = 3 or 4 axes.
nlohmann::json golden_xdrope_vectors(const ModelSpec& spec, const LayerSpec& layer, const RopeSchedule& schedule,
                                     const RopeApplyParams& ap, const GoldenParams& params,
                                     const std::function<float()>& uniform, std::vector<F32Tensor>& out);

// The vision tower's own 2-D RoPE (ModelSpec::vision_rope): one image of image_grid's h x w
// patches (Llama 4: its whole tile and the class token), "vision_tower.{position_ids [2, N], cos,
// sin [N, head_dim], q, k, q_out, k_out [N, head_dim]}", each frequency at its axis' coordinate,
// pairs as the tower pairs them. Returns the manifest's "vision_tower" entry.
nlohmann::json golden_vision_tower_vectors(const VisionRope& rope, const GoldenParams& params,
                                           const std::function<float()>& uniform, std::vector<F32Tensor>& out);

}  // namespace posenc
