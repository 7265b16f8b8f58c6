// Golden's attention under a distance remap (GoldenParams::remap: Self-Extend, ReRoPE, leaky
// ReRoPE, Dual Chunk Attention; attention.h gives the formulas), per RoPE layer type:
//
//   <lt>.v             [P, head_dim]  seeded, uniform in [-1, 1)
//   <lt>.remap_logits  [P, P]         softmax_scale * query_scale[i] * (q[i] . k[j] with the rotary
//                                     slice's pairs rotated by the remapped distance D'(i, j) and the
//                                     attention factor squared), every pair (before masking)
//   <lt>.remap_out     [P, head_dim]  softmax over the keys query i sees, times v
//
// Computed in double from the float32 q, k, v and inv_freq: angle inv_freq[f] * D'(i, j) in
// double, so this is the remap's exact value. An engine rotates q and k at positions whose
// difference is D' (llama.cpp's Self-Extend moves cached keys with its K-shift) in float32; it
// differs by about position * 2^-24 radians per angle.
// Key j is seen by query i when positions[j] <= positions[i] (causal by position, as the fused
// kernel's mask) and, for sliding layers, positions[i] - positions[j] < window; chunked layers
// (Llama 4), the same window-sized chunk. A model's logit softcap is not applied.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "posenc/attention.h"
#include "posenc/model_spec.h"
#include "posenc/rope_schedule.h"
#include "posenc/safetensors.h"

namespace posenc {

struct GoldenRemapInput {
  const LayerSpec* layer = nullptr;
  const RopeSchedule* schedule = nullptr;  // inv_freq (float32, as HF's) and attention_factor
  const std::vector<std::int64_t>* positions = nullptr;
  const F32Tensor* q = nullptr;  // [P, head_dim] before rotation
  const F32Tensor* k = nullptr;
  const std::vector<double>* query_scales = nullptr;  // [P]
  PositionRemap remap;
};

// Appends <lt>.v, .remap_logits and .remap_out to `out` and returns the manifest's "remap" entry.
// Throws posenc::Error when a remapped angle exceeds kMaxRopeAngle.
nlohmann::json golden_remap_vectors(const GoldenRemapInput& in, const std::function<float()>& uniform,
                                    std::vector<F32Tensor>& out);

}  // namespace posenc
