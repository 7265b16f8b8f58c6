// The vision lab (`posenc lab vision`): a tiny ViT on a synthetic image task, trained at one grid
// of patches and tested on the same scenes rendered at finer grids, the multi-resolution test of
// Heo et al. 2024 ("Rotary Position Embedding for Vision Transformer", ECCV: RoPE-Axial and
// RoPE-Mixed against learned absolute positions) in miniature, beside EVA's and timm's pixel
// frequencies.
//
// The task: a unit canvas holds two discs, A and B (radius 0.09, apart); is the distance between
// their centres under 0.35? Each patch of a g x g grid reads two numbers, the fractions of it that
// A and B cover (4 x 4 samples). A finer grid draws the same scene with more, smaller patches, so a
// model that learned distances in patches must carry them to distances it never saw, and one that
// reads coordinates in [-1, 1] (pixel frequencies) sees the same geometry. Labels are balanced, so
// chance is 50%. Plain C++ types: callers need not include <torch/torch.h>.
#pragma once

#include <string>
#include <vector>

#include "posenc/names.h"
#include "posenc_lab/run_settings.h"

namespace posenc::lab {

// How the ViT knows where a patch is.
enum class VisionScheme {
  kNone,     // no positions: the baseline that cannot tell near from far
  kLearned,  // a learned table [d_model, g, g] added to the patch embeddings; other grids read it
             // bicubic-resampled (timm's resample_abs_pos_embed, DeiT's fine-tuning at 384)
  kAxial,    // 2-D axial RoPE, lang frequencies at integer patch coordinates (theta 100, rope-vit's
             // RoPE-Axial), on posenc's RoPE kernels
  kPixel,    // 2-D axial RoPE, pixel frequencies at coordinates linspace(-1, 1, g) (EVA-02, timm)
  kMixed,    // RoPE-Mixed: learned per-layer, per-head 2-D frequencies (theta 10), integer coordinates
};

// The scene, in canvas units.
struct VisionTask {
  double radius = 0.09;  // of each disc
  double near = 0.35;    // label 1: the centres are closer than this
  int samples = 4;       // coverage samples per patch side
};

struct VisionConfig {
  std::vector<std::string> schemes = {"none", "learned", "axial", "pixel", "mixed"};
  // train_len: patches per side of the training grid; 400 steps of 64 images, warm-up 50, lr 2e-3.
  TrainSettings training{8, 400, 64, 2e-3, 50, 100, "out/lab-vision", 0, LrSchedule::kWarmupCosine};
  ModelShape shape{2, 64, 4};  // layers, d_model, heads (head width 16: 4 pairs per axis)
  std::vector<int> test_grids = {8, 12, 16};
  VisionTask task;
  int seed = 0;
  int test_images = 512;  // per grid: the same scenes at every grid
};

// Grids of at most 32 x 32 patches (test images are scored 64 at a time, fewer at fine grids).
inline constexpr int kMaxVisionGrid = 32;

struct VisionRow {
  std::string scheme;
  int grid = 0;
  double accuracy = 0;  // fraction of the test images classified right
};

// One image: patches [grid * grid][2] row-major (row = y, from the top; channels: A's and B's
// coverage in [0, 1]), its label, and the discs' centres (x, y) in [0, 1]. The scene is a function
// of seed alone, so one seed gives the same discs at every grid.
struct VisionImage {
  std::vector<float> patches;
  int label = 0;
  double a[2] = {0, 0}, b[2] = {0, 0};
};
VisionImage vision_image(int grid, unsigned long long seed, const VisionTask& task);
// The seed of vision_image for training row `index` of a run seeded `seed` (rows counted from
// step 0), and for test image `index` (the same for every seed and grid): disjoint streams.
unsigned long long vision_training_scene(int seed, unsigned long long index);
unsigned long long vision_test_scene(unsigned long long index);
// Throws Error naming the field: radius in (0, 0.25), near in (2 radius, sqrt(2) (1 - 2 radius)),
// samples in [1, 16].
void validate_vision_task(const VisionTask& task);

// Throws Error naming the first bad setting (run_vision's own check, before anything is made).
void validate_vision(const VisionConfig& config);
// Trains (or resumes from <out>/vision-<scheme>.ckpt) and tests each scheme; rows are cached per
// scheme in <out>/vision-<scheme>.result.json under the keys of result_cache.h (other test grids
// test the trained model again). Writes <out>/results.json (vision_json).
std::vector<VisionRow> run_vision(const VisionConfig& config);
std::string format_vision_table(const std::vector<VisionRow>& rows, const VisionConfig& config);
std::string vision_json(const std::vector<VisionRow>& rows, const VisionConfig& config);

}  // namespace posenc::lab

namespace posenc {
POSENC_ENUM_NAMES(lab::VisionScheme, "--schemes", {lab::VisionScheme::kNone, "none"}, {lab::VisionScheme::kLearned, "learned"},
                  {lab::VisionScheme::kAxial, "axial"}, {lab::VisionScheme::kPixel, "pixel"}, {lab::VisionScheme::kMixed, "mixed"});
}  // namespace posenc
