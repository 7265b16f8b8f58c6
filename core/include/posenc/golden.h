// Golden test vectors for inference engines: for chosen positions and each layer type of a
// model, what Hugging Face's modeling code computes, written as safetensors plus a JSON manifest.
//
//   DIR/golden.safetensors   F32 tensors, names "<layer_type>.<what>":
//     cos, sin   [P, rotary_dim]  as HF's rotary module returns them: cat(freqs, freqs) order,
//                                 attention factor included, angles float32(inv_freq * float32(p))
//                                 (RoPE layers only)
//     q, k       [P, head_dim]    one seeded head each, uniform in [-1, 1)
//     q_out      [P, head_dim]    q after the full positional treatment: rotary slice
//                                 [rotary_offset, rotary_offset + rotary_dim) rotated with the
//                                 model's pairing, then the position-dependent query scale
//     k_out      [P, head_dim]    k rotated
//     logits     [P, P]           softmax_scale * q_out[i] . k_out[j] (before masking)
//     k_shifted  [P, head_dim]    with GoldenParams::shift: k_out re-rotated by that delta (rope_shift)
//     v, remap_logits [P, P], remap_out [P, head_dim]   with GoldenParams::remap: the attention
//                                 output under Self-Extend, ReRoPE, leaky ReRoPE or DCA (golden_remap.h)
//   DIR/manifest.json         positions (row order), seed, seq_len, and per layer type its
//                             layers, pairing, dims, attention factor, softmax scale, query scales
//   M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5): per layer type also "<layer_type>.vision.*",
//   a text-image-text-video-text sequence at HF's 3-axis position ids (golden_mrope.h)
//   A vision tower with 2-D RoPE (ModelSpec::vision_rope: Pixtral, Llama 4, Gemma 4, MoonViT, the Qwen-VL
//   and GLM-4V towers): "vision_tower.*", one image of image_grid's h x w patches at the tower's
//   coordinates, and the manifest's "vision_tower" entry
//
// Dynamic NTK and LongRoPE depend on the sequence: the schedule is the one HF uses for a forward
// pass whose largest position is max(positions), i.e. seq_len = max(positions) + 1.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/model_spec.h"
#include "posenc/safetensors.h"

namespace posenc {

struct GoldenParams {
  std::vector<std::int64_t> positions;  // empty: default_golden_positions(spec)
  std::uint64_t seed = 0;
  // M-RoPE models with ModelSpec::mrope_vision: the grids (t, h, w in patches, before merging) of
  // the image and the video of the vision sequence (golden_mrope.h).
  std::array<int, 3> image_grid{1, 4, 6};
  std::array<int, 3> video_grid{2, 4, 4};
  // Also write "<layer_type>.k_shifted" [P, head_dim]: k_out re-rotated by this position delta
  // with rope_shift (rope_shift.h: llama.cpp's K-shift, p -> p + delta), what an engine's cache
  // holds after it closes a gap (delta < 0) or shifts its context. Every p + delta must be a position.
  std::optional<std::int64_t> shift = std::nullopt;
  // Also write, per RoPE layer type, "<layer_type>.{v, remap_logits, remap_out}": the causal
  // attention over the positions with RoPE's distances remapped (attention.h), in double.
  std::optional<PositionRemap> remap = std::nullopt;
};

// 0, 1, 127, 4095, the original context C, 4C and 131071, duplicates removed, in that order.
// C is original_max_position_embeddings, else max_position_embeddings, else 4096.
std::vector<std::int64_t> default_golden_positions(const ModelSpec& spec);

struct Golden {
  SafeTensors tensors;
  std::string manifest_json;
};

// Throws posenc::Error when the family's per-layer semantics are unknown, for a position
// outside [0, 2^31-1] or beyond the schedule's accurate range, or more than 4096 positions.
Golden make_golden(const ModelSpec& spec, const GoldenParams& params);

// Writes DIR/golden.safetensors and DIR/manifest.json (DIR is created if absent).
void write_golden(const Golden& golden, const std::string& dir);

}  // namespace posenc
