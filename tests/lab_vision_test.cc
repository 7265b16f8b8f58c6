// `lab vision` (posenc_lab/vision.h): the scenes are what the task says, the ViT's positions are
// wired as vision_model.h says (RoPE-Mixed at axial frequencies is RoPE-Axial on the kernels; no
// positions is blind to where patches are), and a run trains, caches and re-tests as the lab's
// other commands do.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "lab_support.h"
#include "posenc/axial_rope.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/vision.h"
#include "vision_model.h"

namespace posenc::lab {
namespace {

TEST(VisionScenes, LabelsAreTheDistanceRuleAndBalanced) {
  const VisionTask task;
  int near = 0;
  for (unsigned long long seed = 0; seed < 2000; ++seed) {
    const VisionImage im = vision_image(4, seed, task);
    const double d = std::hypot(im.a[0] - im.b[0], im.a[1] - im.b[1]);
    ASSERT_EQ(im.label, d < task.near ? 1 : 0) << "seed " << seed;
    ASSERT_GT(d, 2 * task.radius) << "the discs never overlap";
    for (const double v : {im.a[0], im.a[1], im.b[0], im.b[1]}) ASSERT_TRUE(v >= task.radius && v <= 1 - task.radius);
    near += im.label;
  }
  EXPECT_NEAR(near / 2000.0, 0.5, 0.04);  // binomial sd 0.011
}

TEST(VisionScenes, OneSeedIsOneSceneAtEveryGridAndCoverageIsTheDiscsArea) {
  const VisionTask task;
  for (unsigned long long seed : {3ull, 17ull, 99ull}) {
    const VisionImage coarse = vision_image(8, seed, task), fine = vision_image(24, seed, task);
    EXPECT_EQ(coarse.a[0], fine.a[0]);
    EXPECT_EQ(coarse.b[1], fine.b[1]);
    EXPECT_EQ(coarse.label, fine.label);
    for (const VisionImage* im : {&coarse, &fine}) {
      const int g = static_cast<int>(std::lround(std::sqrt(im->patches.size() / 2)));
      double area[2] = {0, 0};
      for (std::size_t p = 0; p < im->patches.size(); ++p) {
        ASSERT_TRUE(im->patches[p] >= 0 && im->patches[p] <= 1);
        area[p % 2] += im->patches[p] / (g * g);
      }
      const double disc = M_PI * task.radius * task.radius;
      EXPECT_NEAR(area[0], disc, 0.15 * disc) << "grid " << g;  // sampled at 4 x 4 points a patch
      EXPECT_NEAR(area[1], disc, 0.15 * disc) << "grid " << g;
      // The patch holding A's centre is mostly A: (row, col) = (y, x) * g.
      const std::size_t at = (static_cast<std::size_t>(im->a[1] * g) * g + static_cast<std::size_t>(im->a[0] * g)) * 2;
      EXPECT_GT(im->patches[at], 0.2f) << "grid " << g;
      EXPECT_EQ(im->patches[at + 1], 0.0f) << "B is elsewhere";
    }
  }
}

TEST(VisionScenes, BadTasksAndGridsAreErrorsNamingTheValue) {
  VisionTask t;
  t.radius = 0.3;
  EXPECT_THROW({ try { vision_image(8, 0, t); } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("radius must be in (0, 0.25), got 0.3"), std::string::npos); throw; } }, Error);
  t = VisionTask{};
  t.near = 0.1;  // under 2 radius: no near scene exists
  EXPECT_THROW(vision_image(8, 0, t), Error);
  EXPECT_THROW(vision_image(0, 0, VisionTask{}), Error);
  EXPECT_THROW(vision_image(kMaxVisionGrid + 1, 0, VisionTask{}), Error);
}

VitConfig tiny_vit(VisionScheme scheme) {
  VitConfig c;
  c.scheme = scheme;
  c.shape = {2, 32, 2};  // head width 16: F = 4 pairs per axis
  c.train_grid = 6;
  return c;
}

torch::Tensor random_patches(int grid) { return torch::rand({3, grid * grid, 2}); }

// RoPE-Mixed is RoPE-Axial when f_y is zero on the pairs that read the column and f_x on those
// that read the row (Heo et al. 2024, 3.2): the mixed rotation (torch operations) and the axial
// one (posenc::rope, the core's kernels) then agree, so both place pairs and coordinates alike.
TEST(VisionModel, MixedAtAxialFrequenciesIsAxialOnTheKernels) {
  torch::manual_seed(5);
  VisionTransformer axial(tiny_vit(VisionScheme::kAxial)), mixed(tiny_vit(VisionScheme::kMixed));
  AxialRopeParams p;
  p.axis_dim = 8;
  p.theta = 100;
  const torch::Tensor f = torch::tensor(axial_axis_frequencies(p)), zero = torch::zeros({4});
  torch::NoGradGuard no_grad;
  auto from = axial->named_parameters();
  for (auto& w : mixed->named_parameters()) {
    if (w.key().find("mixed_freqs") != std::string::npos) {
      w.value().copy_(torch::stack({torch::cat({zero, f}).expand({2, 8}), torch::cat({f, zero}).expand({2, 8})}));  // [x, y][H][8]
    } else {
      w.value().copy_(from[w.key()]);
    }
  }
  for (const int grid : {6, 11}) {
    const torch::Tensor x = random_patches(grid);
    EXPECT_TRUE(torch::allclose(mixed->forward(x, grid), axial->forward(x, grid), 1e-5, 1e-5)) << "grid " << grid;
  }
}

// Without positions the model cannot tell where a patch is: permuting the patches leaves its
// logits as they were; each positional scheme sees the permutation.
TEST(VisionModel, OnlyNoPositionsIsBlindToWherePatchesAre) {
  const int grid = 6;
  const torch::Tensor x = random_patches(grid), perm = torch::randperm(grid * grid);
  const torch::Tensor shuffled = x.index_select(1, perm);
  torch::NoGradGuard no_grad;
  for (const VisionScheme s : {VisionScheme::kNone, VisionScheme::kLearned, VisionScheme::kAxial, VisionScheme::kPixel, VisionScheme::kMixed}) {
    torch::manual_seed(1);
    VisionTransformer model(tiny_vit(s));
    if (s == VisionScheme::kLearned)  // its table starts near zero: make it count
      for (auto& w : model->named_parameters())
        if (w.key() == "table") w.value().normal_(0, 1);
    const double moved = (model->forward(x, grid) - model->forward(shuffled, grid)).abs().max().item<double>();
    if (s == VisionScheme::kNone) EXPECT_LT(moved, 1e-5) << to_string(s);
    else EXPECT_GT(moved, 1e-4) << to_string(s);
  }
}

TEST(VisionModel, GradientsReachEveryWeightOfEveryScheme) {
  for (const VisionScheme s : {VisionScheme::kLearned, VisionScheme::kAxial, VisionScheme::kPixel, VisionScheme::kMixed}) {
    torch::manual_seed(2);
    VisionTransformer model(tiny_vit(s));
    for (const int grid : {6, 9}) {  // 9: the learned table through its resampling
      model->zero_grad();
      model->forward(random_patches(grid), grid).pow(2).sum().backward();
      for (const auto& w : model->named_parameters()) {
        ASSERT_TRUE(w.value().grad().defined()) << to_string(s) << " " << w.key();
        EXPECT_TRUE(torch::isfinite(w.value().grad()).all().item<bool>()) << to_string(s) << " " << w.key();
        if (w.key() == "table" || w.key().find("mixed_freqs") != std::string::npos)
          EXPECT_GT(w.value().grad().abs().sum().item<double>(), 0) << to_string(s) << " " << w.key() << " grid " << grid;
      }
    }
  }
}

VisionConfig tiny_run(const std::string& out) {
  VisionConfig c;
  c.schemes = {"none", "learned", "axial", "pixel", "mixed"};
  c.training = {4, 6, 8, 2e-3, 2, 3, test::fresh_dir(out)};  // grid, steps, batch, lr, warm-up, checkpoints, out
  c.shape = {1, 16, 2};
  c.test_grids = {4, 6};
  c.test_images = 40;
  return c;
}

TEST(VisionRun, EverySchemeIsScoredAtEveryGridThenReadFromTheCache) {
  const VisionConfig c = tiny_run("lab_vision_run");
  const std::vector<VisionRow> rows = run_vision(c);
  ASSERT_EQ(rows.size(), c.schemes.size() * c.test_grids.size());
  for (const VisionRow& r : rows) EXPECT_TRUE(r.accuracy >= 0 && r.accuracy <= 1) << r.scheme << " " << r.grid;
  EXPECT_TRUE(std::filesystem::exists(c.training.out_dir + "/results.json"));
  EXPECT_TRUE(std::filesystem::exists(c.training.out_dir + "/vision-axial.ckpt"));
  const std::string table = format_vision_table(rows, c);
  EXPECT_NE(table.find("4x4*"), std::string::npos) << table;
  EXPECT_NE(table.find("mixed"), std::string::npos) << table;

  std::filesystem::remove(c.training.out_dir + "/vision-axial.ckpt");  // the cache answers: nothing trains again
  const std::vector<VisionRow> again = run_vision(c);
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(again[i].accuracy, rows[i].accuracy);
  EXPECT_FALSE(std::filesystem::exists(c.training.out_dir + "/vision-axial.ckpt")) << "nothing was trained again";

  VisionConfig wider = c;  // other test grids: the trained models (checkpoints) are tested again
  wider.schemes = {"pixel"};
  wider.test_grids = {6, 8};
  const std::vector<VisionRow> retested = run_vision(wider);
  ASSERT_EQ(retested.size(), 2u);
  const auto pixel6 = std::find_if(rows.begin(), rows.end(), [](const VisionRow& r) { return r.scheme == "pixel" && r.grid == 6; });
  EXPECT_EQ(retested[0].accuracy, pixel6->accuracy) << "the same weights, the same scenes";

  VisionConfig other = c;  // other training settings in the same directory: an Error naming them
  other.training.steps = 7;
  try {
    run_vision(other);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("steps 6 then, 7 now"), std::string::npos) << e.what();
  }
}

TEST(VisionRun, BadSettingsAreErrorsNamingThem) {
  const auto expect = [](VisionConfig c, const std::string& part) {
    try {
      validate_vision(c);
      ADD_FAILURE() << "expected: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  VisionConfig c = tiny_run("lab_vision_bad");
  VisionConfig b = c;
  b.schemes = {"axial", "bogus"};
  expect(b, "--schemes must be one of none|learned|axial|pixel|mixed, got 'bogus'");
  b = c;
  b.shape = {1, 12, 2};  // head width 6: pairs cannot split over two axes
  expect(b, "multiple of 4, got 6 (scheme axial)");
  b.schemes = {"none", "learned"};  // no rotation: any even head width
  EXPECT_NO_THROW(validate_vision(b));
  b = c;
  b.test_grids = {4, 33};
  expect(b, "--test-grids must be in [1, 32], got 33");
  b.test_grids = {6, 6};
  expect(b, "--test-grids");
  b.test_grids = {};
  expect(b, "--test-grids is empty");
  b = c;
  b.training.train_len = 0;
  expect(b, "--train-grid must be in [1, 32], got 0");
  b = c;
  b.schemes = {"axial", "axial"};
  expect(b, "--schemes");
}

}  // namespace
}  // namespace posenc::lab
