#include "posenc/vision_rope.h"

#include <cmath>
#include <limits>
#include <string>

#include "inv_freq.h"
#include "posenc/error.h"
#include "posenc/mrope.h"

namespace posenc {
namespace {

void check_params(const VisionRopeParams& p) {
  const std::string family = to_string(p.family);
  if (p.head_dim < 4 || p.head_dim > 65536 || p.head_dim % 4 != 0)
    throw Error(family + " vision RoPE needs head_dim in [4, 65536] divisible by 4, got " + std::to_string(p.head_dim));
  if (!std::isfinite(p.theta) || !(p.theta > 0))
    throw Error(family + " vision RoPE needs rope_theta finite and > 0, got " + format_number(p.theta));
  if (p.family == VisionRopeFamily::kQwen2Vl) {
    if (p.merge_size < 1 || p.merge_size > 64)
      throw Error("qwen2_vl vision RoPE needs spatial_merge_size in [1, 64], got " + std::to_string(p.merge_size));
  } else if (p.family != VisionRopeFamily::kGemma4 && (p.patches_per_side < 1 || p.patches_per_side > 65536)) {
    throw Error(family + " vision RoPE needs image_size / patch_size in [1, 65536] patches per side, got " +
                std::to_string(p.patches_per_side));
  }
}

// At most 2^26 patches (1 GiB of ids), rows and columns in [1, limit].
void check_grid(const std::string& family, int rows, int cols, int limit) {
  if (rows < 1 || cols < 1 || rows > limit || cols > limit || std::int64_t{rows} * cols > (std::int64_t{1} << 26))
    throw Error(family + " vision RoPE: an image of " + std::to_string(rows) + " x " + std::to_string(cols) +
                " patches; rows and columns must be in [1, " + std::to_string(limit) + "], at most 2^26 patches");
}

}  // namespace

VisionRope vision_rope(const VisionRopeParams& params) {
  check_params(params);
  VisionRope v;
  v.params = params;
  const int D = params.head_dim, F = D / 2;
  v.inv_freq.resize(static_cast<std::size_t>(F));
  v.axis_of_freq.resize(static_cast<std::size_t>(F));
  // HF's float32 `1 / theta^(arange(0, d, 2) / d)`: over d = D (1-D RoPE's u_j: Pixtral, MoonViT's
  // arange(0, D, 4) being u_{2k}) and over d = D / 2 (w_k: the Qwen-VL, Llama 4 and Gemma 4 towers).
  const std::vector<float> u = default_inv_freq<float>(params.theta, D, F);
  const std::vector<float> w = default_inv_freq<float>(params.theta, F, F / 2);
  for (const float f : {u.back(), w.back(), u.front()})  // the smallest and largest frequencies
    if (!std::isfinite(f) || !(f >= std::numeric_limits<float>::min()))
      throw Error(to_string(params.family) + std::string(" vision RoPE: rope_theta ") + format_number(params.theta) +
                  " makes a float32 frequency " + format_number(f) + "; expected theta whose frequencies stay finite "
                  "and normal (HF's float32 would compute inf, NaN or 0)");
  for (int k = 0; k < F / 2; ++k) {
    const std::size_t first = static_cast<std::size_t>(k), second = static_cast<std::size_t>(F / 2 + k);
    switch (params.family) {
      case VisionRopeFamily::kQwen2Vl:  // VisionRotaryEmbedding(dim = D / 2): rows, then the same on columns
      case VisionRopeFamily::kLlama4:   // freq_dim = D / 2, arange(0, freq_dim, 2)[:freq_dim // 2]: columns, then rows
        v.inv_freq[first] = v.inv_freq[second] = w[first];
        break;
      case VisionRopeFamily::kPixtral:  // freqs over dim = D; freqs[::2] on rows, freqs[1::2] on columns
        v.inv_freq[first] = u[2 * first];
        v.inv_freq[second] = u[2 * first + 1];
        break;
      case VisionRopeFamily::kGemma4:  // spatial_dim = D / 2, arange(0, spatial_dim, 2) / spatial_dim per half
        v.inv_freq[first] = v.inv_freq[second] = w[first];
        v.axis_of_freq[first] = 1;  // channels [0, D/2): x, the column
        v.axis_of_freq[second] = 0;
        continue;
      case VisionRopeFamily::kMoonVit:  // arange(0, dim, 4) / dim, each frequency on the column then the row
        v.inv_freq[2 * first] = v.inv_freq[2 * first + 1] = u[2 * first];
        v.axis_of_freq[2 * first] = 1;
        v.axis_of_freq[2 * first + 1] = 0;
        continue;
    }
    const bool columns_first = params.family == VisionRopeFamily::kLlama4;
    v.axis_of_freq[first] = columns_first ? 1 : 0;
    v.axis_of_freq[second] = columns_first ? 0 : 1;
  }
  switch (params.family) {
    case VisionRopeFamily::kQwen2Vl:
      v.hf_source = "modeling_qwen2_vl.py: VisionRotaryEmbedding, Qwen2VisionTransformerPretrainedModel.rot_pos_emb, "
                    "apply_rotary_pos_emb_vision (rotate_half)";
      break;
    case VisionRopeFamily::kPixtral:
      v.hf_source = "modeling_pixtral.py: PixtralRotaryEmbedding, position_ids_in_meshgrid, apply_rotary_pos_emb (rotate_half)";
      break;
    case VisionRopeFamily::kLlama4:
      v.layout = RopeLayout::kInterleaved;
      v.hf_source = "modeling_llama4.py: Llama4VisionRotaryEmbedding, vision_apply_rotary_emb (complex pairs)";
      break;
    case VisionRopeFamily::kGemma4:
      v.blocks = 2;
      v.hf_source = "modeling_gemma4.py: Gemma4VisionRotaryEmbedding, apply_multidimensional_rope (rotate_half in each "
                    "half of the head; q_norm/k_norm before RoPE, attention scaling 1.0)";
      break;
    case VisionRopeFamily::kMoonVit:
      v.layout = RopeLayout::kInterleaved;
      v.hf_source = "remote code moonshotai/Kimi-VL-A3B-Instruct modeling_kimi_vl.py: Rope2DPosEmb, apply_rope "
                    "(complex pairs; not in HF transformers; read in vLLM's port, moonvit.py)";
      break;
  }
  return v;
}

std::vector<std::int64_t> vision_rope_position_ids(const VisionRope& rope, int rows, int cols) {
  const VisionRopeParams& p = rope.params;
  const std::string family = to_string(p.family);
  switch (p.family) {
    case VisionRopeFamily::kQwen2Vl:
      check_grid(family, rows, cols, 65536);
      return vision_2d_position_ids(1, rows, cols, p.merge_size);
    case VisionRopeFamily::kPixtral:
    case VisionRopeFamily::kMoonVit:
    case VisionRopeFamily::kGemma4: {
      // Gemma 4's image_position_ids (a meshgrid, x the column, y the row), Pixtral's position_ids_in_meshgrid, MoonViT's get_freqs_cis_by_seqlens (table[:h, :w]):
      // row r, column c read the table at r * patches_per_side + c, whose angles are r on the row
      // frequencies and c on the column ones; each image starts again at (0, 0).
      check_grid(family, rows, cols, p.family == VisionRopeFamily::kGemma4 ? 65536 : p.patches_per_side);
      const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
      std::vector<std::int64_t> ids(2 * n);
      for (std::size_t i = 0; i < n; ++i) {
        ids[i] = static_cast<std::int64_t>(i / static_cast<std::size_t>(cols));
        ids[n + i] = static_cast<std::int64_t>(i % static_cast<std::size_t>(cols));
      }
      return ids;
    }
    case VisionRopeFamily::kLlama4: {
      // The tower resizes every tile to image_size: its table covers exactly side x side patches
      // (img_idx = arange(side^2)), coordinates + 1, then the class token, masked to angle 0.
      const int side = p.patches_per_side;
      if (rows != side || cols != side)
        throw Error("llama4 vision RoPE covers the whole tile of " + std::to_string(side) + " x " + std::to_string(side) +
                    " patches (image_size / patch_size); got " + std::to_string(rows) + " x " + std::to_string(cols));
      if (std::int64_t{side} * side + 1 > (std::int64_t{1} << 26))
        throw Error("llama4 vision RoPE: " + std::to_string(side) + " patches per side is more than 2^26 tokens");
      const std::size_t n = static_cast<std::size_t>(side) * static_cast<std::size_t>(side) + 1;
      std::vector<std::int64_t> ids(2 * n, 0);  // the class token, last, stays at (0, 0)
      for (std::size_t i = 0; i + 1 < n; ++i) {
        ids[i] = static_cast<std::int64_t>(i / static_cast<std::size_t>(side)) + 1;
        ids[n + i] = static_cast<std::int64_t>(i % static_cast<std::size_t>(side)) + 1;
      }
      return ids;
    }
  }
  throw Error("unknown vision RoPE family");
}

std::string vision_rope_token_order(const VisionRope& rope) {
  const VisionRopeParams& p = rope.params;
  const std::string side = std::to_string(p.patches_per_side);
  switch (p.family) {
    case VisionRopeFamily::kQwen2Vl:
      return "merge blocks of " + std::to_string(p.merge_size) + " x " + std::to_string(p.merge_size) +
             " patches, block-major; coordinates from 0";
    case VisionRopeFamily::kPixtral:
    case VisionRopeFamily::kMoonVit:
      return "row-major over the image's own patches (at most " + side + " per side); coordinates from 0";
    case VisionRopeFamily::kGemma4:
      return "row-major over the image's own patches; coordinates from 0 (padding patches at (-1, -1) are masked out)";
    case VisionRopeFamily::kLlama4:
      return "row-major over the whole " + side + " x " + side + " tile, coordinates from 1, then the class token (angle 0)";
  }
  return "";
}

std::string vision_rope_summary(const VisionRope& rope) {
  const VisionRopeParams& p = rope.params;
  const int F = p.head_dim / 2;
  const std::string first = "[0, " + std::to_string(F / 2) + ")", second = "[" + std::to_string(F / 2) + ", " + std::to_string(F) + ")";
  std::string axes;
  switch (p.family) {
    case VisionRopeFamily::kQwen2Vl: axes = first + " read the row, " + second + " the column (the same frequencies)"; break;
    case VisionRopeFamily::kPixtral: axes = first + " read the row, " + second + " the column (1-D RoPE's even and odd frequencies)"; break;
    case VisionRopeFamily::kLlama4: axes = first + " read the column, " + second + " the row (the same frequencies)"; break;
    case VisionRopeFamily::kMoonVit: axes = "2i read the column, 2i + 1 the row (the same frequency)"; break;
    case VisionRopeFamily::kGemma4:
      axes = first + " read the column on channels [0, " + std::to_string(F) + "), " + second + " the row on [" +
             std::to_string(F) + ", " + std::to_string(p.head_dim) + "), each half its own RoPE (the same frequencies)";
      break;
  }
  return std::string(to_string(p.family)) + " 2-D RoPE: head_dim " + std::to_string(p.head_dim) + ", theta " +
         format_number(p.theta) + ", " + pairing_name(rope.layout) + " pairs; frequencies " + axes + "; tokens " +
         vision_rope_token_order(rope);
}

std::vector<RopeApplyParams> vision_rope_apply_params(const VisionRope& rope) {
  std::vector<RopeApplyParams> out;
  const int per_block = static_cast<int>(rope.inv_freq.size()) / rope.blocks;
  for (int b = 0; b < rope.blocks; ++b) {
    RopeApplyParams p = rope_apply_params(rope.inv_freq, 1.0, rope.layout, rope.axis_of_freq);
    p.inv_freq += b * per_block;
    p.axis_of_freq += b * per_block;
    p.num_freqs = per_block;
    p.channel_offset = 2 * b * per_block;
    p.angles = Numerics::kHfFloat32;  // HF's float32 angles, cos and sin
    out.push_back(p);
  }
  return out;
}

}  // namespace posenc
