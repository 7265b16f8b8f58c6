// Learned 2-D position tables of vision towers, resized to the image: a table trained for one
// grid of patches (SigLIP's 16 x 16, ViT's 14 x 14) is interpolated to the image's own grid as
// each model's HF code does it, through torch's F.interpolate with align_corners=False:
//
//   bicubic              ViTEmbeddings.interpolate_pos_encoding (modeling_vit.py; DINOv2, CLIP
//                        likewise), Kimi-VL's Learnable2DInterpPosEmb: Keys' cubic convolution,
//                        A = -0.75, source x = (i + 0.5) * in / out - 0.5, taps clamped to the
//                        border (upsample_bicubic2d)
//   bilinear_antialias   Siglip2VisionEmbeddings.resize_positional_embeddings (modeling_siglip2.py,
//                        NaFlex): a triangle filter widened by in / out when shrinking, weights
//                        normalised over the taps inside the table (_upsample_bilinear2d_aa, PIL's)
//
// Idefics3 instead looks rows up at bucketised fractional coordinates; not here yet (its HF code
// changed between versions, and the newer form depends on the pixels' dtype).
// torch interpolates in float32 (SigLIP2 upcasts to float32 on the CPU first); posenc in double,
// rounded once to float32, so a value may differ from torch's by a few float32 ulps.
#pragma once

#include <vector>

#include "posenc/names.h"

namespace posenc {

enum class GridResize { kBicubic, kBilinearAntialias };
POSENC_ENUM_NAMES(GridResize, "grid resize", {GridResize::kBicubic, "bicubic"},
                  {GridResize::kBilinearAntialias, "bilinear_antialias"});

// A table of rows x cols positions of dim values each, row-major: values[(r * cols + c) * dim + k].
struct PositionGrid {
  int rows = 0, cols = 0, dim = 0;
  std::vector<float> values;
};

// The grid resized to rows x cols. Throws posenc::Error naming the value: sizes in [1, 65536],
// values.size() == rows * cols * dim, at most 2^28 values out, every value finite.
PositionGrid resize_position_grid(const PositionGrid& grid, int rows, int cols, GridResize mode);

}  // namespace posenc
