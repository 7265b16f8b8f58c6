// The 2-D RoPE of a vision tower: each patch of an image, at row r and column c of its grid of
// patches, rotates its q and k by angles that read r on some frequencies and c on the others, so
// q.k depends on the row and column offsets only. The towers differ in which frequencies read
// which axis, how channels pair, where coordinates start and which tokens are not rotated:
//
//   qwen2_vl  VisionRotaryEmbedding(head_dim / 2) (modeling_qwen2_vl.py; also Qwen2.5-VL,
//             Qwen3-VL, GLM-4.1V): F = head_dim / 2 frequencies, w_k = theta^(-2k / (head_dim/2))
//             for k < F / 2 read the row, the same F / 2 again the column; rotate_half pairs;
//             patches in m x m merge blocks (mrope.h vision_2d_position_ids).
//   pixtral   PixtralRotaryEmbedding (modeling_pixtral.py; Mistral 3's tower): the F = head_dim / 2
//             frequencies u_j = theta^(-2j / head_dim) of 1-D RoPE, the even ones u_0, u_2, .. on
//             the row, the odd ones u_1, u_3, .. on the column, in that order; rotate_half pairs;
//             patches row-major, a table of image_size / patch_size patches per side.
//   llama4    Llama4VisionRotaryEmbedding (modeling_llama4.py): w_k = theta^(-4k / head_dim),
//             k < F / 2, pairs 0 .. F/2 - 1 read the column, the rest the row, each at its
//             coordinate + 1; GPT-J (interleaved) pairs; patches row-major over the whole
//             (image_size / patch_size)^2 grid, then the class token, unrotated (angle 0).
//   gemma4    Gemma4VisionRotaryEmbedding, apply_multidimensional_rope (modeling_gemma4.py): the head
//             splits in two halves, channels [0, D/2) rotate by the column, [D/2, D) by the row,
//             each half its own rotate_half RoPE over w_k = theta^(-2k / (D/2)), k < D/4 (pairs
//             (c, c + D/4) inside a half); theta 100 by default; patches row-major from 0 (the
//             processor's image_position_ids, x = column, y = row); q/k RMSNorm before RoPE.
//   moonvit   Rope2DPosEmb of Kimi-VL's MoonViT (remote code, moonshotai/Kimi-VL-A3B-Instruct's
//             modeling_kimi_vl.py, read in vLLM's port moonvit.py; HF transformers has none): w_i = theta^(-4i / head_dim),
//             pair 2i reads the column at w_i, pair 2i + 1 the row at w_i; GPT-J pairs; patches
//             row-major, coordinates from 0, a table of 512 x 512 (theta 10000, both fixed in code).
//
// Angles are HF's float32 products float32(inv_freq * float32(coordinate)); a coordinate here
// is what multiplies the frequency (Llama 4's are 1-based, its class token's 0).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/names.h"
#include "posenc/rope_apply.h"

namespace posenc {

enum class VisionRopeFamily { kQwen2Vl, kPixtral, kLlama4, kMoonVit, kGemma4 };
POSENC_ENUM_NAMES(VisionRopeFamily, "vision rope family", {VisionRopeFamily::kQwen2Vl, "qwen2_vl"},
                  {VisionRopeFamily::kPixtral, "pixtral"}, {VisionRopeFamily::kLlama4, "llama4"},
                  {VisionRopeFamily::kMoonVit, "moonvit"}, {VisionRopeFamily::kGemma4, "gemma4"});

struct VisionRopeParams {
  VisionRopeFamily family = VisionRopeFamily::kQwen2Vl;
  int head_dim = 0;        // per head; divisible by 4
  double theta = 10000.0;  // rope_theta of the vision config
  // Pixtral, Llama 4: image_size / patch_size, the patches per side of the tower's table (Pixtral
  // refuses larger images; Llama 4 always takes the full square); MoonViT 512. Qwen2-VL, Gemma 4: unused.
  int patches_per_side = 0;
  int merge_size = 2;  // Qwen2-VL: spatial_merge_size, the order of its patches
};

// A vision tower's 2-D RoPE: what each frequency reads and how channels pair.
struct VisionRope {
  VisionRopeParams params;
  std::vector<float> inv_freq;             // [head_dim / 2], float32 as HF forms them
  std::vector<std::uint8_t> axis_of_freq;  // [head_dim / 2]: 0 = row, 1 = column
  RopeLayout layout = RopeLayout::kHalfSplit;
  // The head splits into `blocks` equal parts of channels; block b is its own RoPE in `layout` over
  // frequencies [b F / blocks, (b + 1) F / blocks) (F = head_dim / 2). Gemma 4: 2; the others 1.
  int blocks = 1;
  const char* hf_source = "";  // the HF class and function this follows
};

// Throws posenc::Error naming the value: head_dim in [4, 65536] divisible by 4, theta finite
// > 0, patches_per_side in [1, 65536] for Pixtral and Llama 4, merge_size in [1, 64] for Qwen2-VL.
VisionRope vision_rope(const VisionRopeParams& params);

// The coordinates [2][tokens] (rows, then columns) of one image of rows x cols patches, in the
// order the tower takes its tokens (see above), rows[n] at ids[n] and columns at ids[tokens + n]:
// Qwen2-VL merge blocks, Pixtral and MoonViT row-major (rows, cols <= patches_per_side), Gemma 4
// row-major, Llama 4 the full grid (rows = cols = patches_per_side) 1-based then its class token
// at (0, 0).
std::vector<std::int64_t> vision_rope_position_ids(const VisionRope& rope, int rows, int cols);

// What the tower does, in a line for `posenc spec` and golden's manifest: family, head_dim,
// theta, pairing, which frequencies read which axis, the order of the tokens.
std::string vision_rope_summary(const VisionRope& rope);
// The order of its tokens alone ("row-major over ...").
std::string vision_rope_token_order(const VisionRope& rope);

// rope_apply_params over the tower's frequencies and axes, one per block (its channel_offset and
// frequencies); the rope must outlive them. Rotate [tokens, heads, head_dim] with each in turn and
// PositionIds::explicit_ids(ids.data(), 2, tokens).
std::vector<RopeApplyParams> vision_rope_apply_params(const VisionRope& rope);

}  // namespace posenc
