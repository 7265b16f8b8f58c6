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
//   bucket, bucket_bf16, bucket_f16   Idefics3VisionEmbeddings.forward (modeling_idefics3.py; Idefics2
//                        and SmolVLM are the same code): no interpolation; output row i along an
//                        axis is table row bucket_rows(table side, patches, the pixels' dtype)[i]
//                        (HF v5's formula; the coordinates are rounded to the pixels' dtype, so a
//                        bfloat16 model reads other rows than a float32 one: 26 rows, 26 patches
//                        read 0, 1, 2, 2, 4, ... in bfloat16)
//   grid_sample_bicubic  Glm4vVisionEmbeddings.forward (modeling_glm4v.py; GLM-4.1V, 4.5V, 4.6V): the
//                        table sampled by F.grid_sample(mode="bicubic", align_corners=False,
//                        padding_mode="border") at norm = ((i + 0.5) / out) * 2 - 1, source
//                        ((norm + 1) * in - 1) / 2, both in float32 as HF computes them: bicubic's
//                        source index, rounded through float32 (it equals bicubic to float rounding)
// torch interpolates in float32 (SigLIP2 upcasts to float32 on the CPU first); posenc in double,
// rounded once to float32, so a value may differ from torch's by a few float32 ulps.
#pragma once

#include <vector>

#include "posenc/half.h"
#include "posenc/names.h"

namespace posenc {

enum class GridResize { kBicubic, kBilinearAntialias, kBucket, kBucketBf16, kBucketF16, kGridSampleBicubic };
POSENC_ENUM_NAMES(GridResize, "grid resize", {GridResize::kBicubic, "bicubic"},
                  {GridResize::kBilinearAntialias, "bilinear_antialias"}, {GridResize::kBucket, "bucket"},
                  {GridResize::kBucketBf16, "bucket_bf16"}, {GridResize::kBucketF16, "bucket_f16"},
                  {GridResize::kGridSampleBicubic, "grid_sample_bicubic"});

// A table of rows x cols positions of dim values each, row-major: values[(r * cols + c) * dim + k].
struct PositionGrid {
  int rows = 0, cols = 0, dim = 0;
  std::vector<float> values;
};

// The grid resized to rows x cols. Throws posenc::Error naming the value: sizes in [1, 65536],
// values.size() == rows * cols * dim, at most 2^28 values out, every value finite.
PositionGrid resize_position_grid(const PositionGrid& grid, int rows, int cols, GridResize mode);

// Idefics3's table rows along one axis: for an image of `patches` patches over a table of `table`
// rows, patch i reads row bucketize(frac_i, torch.arange(1/table, 1.0, 1/table), right=True) with
// frac_i = min(float32(i * float32(1 / patches)), float32(1 - 1e-6)) rounded to coordinate_dtype.
// position_ids = rows_h[i] * table + rows_w[j] for a square table (HF's num_patches_per_side).
std::vector<int> bucket_rows(int table, int patches, DType coordinate_dtype);

}  // namespace posenc
