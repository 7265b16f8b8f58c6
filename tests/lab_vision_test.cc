// `lab vision` (posenc_lab/vision.h): the scenes are what the task says, the ViT's positions are
// wired as vision_model.h says (RoPE-Mixed at axial frequencies is RoPE-Axial on the kernels; no
// positions is blind to where patches are), and a run trains, caches and re-tests as the lab's
// other commands do.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

#include "lab_support.h"
#include "posenc/axial_rope.h"
#include "posenc/rope_apply.h"
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

// Training rows and test images come from disjoint streams, whatever the seed (the test stream
// was once a seed's own).
TEST(VisionScenes, NoSeedTrainsOnTheTestScenes) {
  std::set<unsigned long long> test;
  for (unsigned long long i = 0; i < 4096; ++i) test.insert(vision_test_scene(i));
  for (const int seed : {0, 1, 2, 32343, 2147483647})
    for (unsigned long long i = 0; i < 20000; ++i) ASSERT_EQ(test.count(vision_training_scene(seed, i)), 0u) << seed << " " << i;
  EXPECT_NE(vision_training_scene(0, 5), vision_training_scene(1, 5));
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

// RoPE-Mixed at phi = 0 (f_x = [f, 0], f_y = [0, f]) is RoPE-Axial (Heo et al. 2024, 3.2): the
// mixed rotation (torch operations) and the axial one (posenc::rope, the core's kernels) then
// agree, so both place pairs and coordinates alike (x first, rope-vit's order).
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
      w.value().copy_(torch::stack({torch::cat({f, zero}).expand({2, 8}), torch::cat({zero, f}).expand({2, 8})}));  // [x, y][H][8]
    } else {
      w.value().copy_(from[w.key()]);
    }
  }
  for (const int grid : {6, 11}) {
    const torch::Tensor x = random_patches(grid);
    EXPECT_TRUE(torch::allclose(mixed->forward(x, grid), axial->forward(x, grid), 1e-5, 1e-5)) << "grid " << grid;
  }
}

// RoPE-Mixed starts as rope-vit's init_random_2d_freqs: pair k < head_dim / 4 has magnitude
// 1 / 10^(4k / head_dim) at a random angle phi per head, pair k + head_dim / 4 the same magnitude
// at phi + pi / 2; each layer draws its own phi.
TEST(VisionModel, MixedFrequenciesStartAsRopeVitsInit) {
  torch::manual_seed(9);
  VisionTransformer mixed(tiny_vit(VisionScheme::kMixed));  // head width 16: 4 + 4 pairs
  std::vector<torch::Tensor> layers;
  for (const auto& w : mixed->named_parameters())
    if (w.key().find("mixed_freqs") != std::string::npos) layers.push_back(w.value().to(torch::kFloat64));
  ASSERT_EQ(layers.size(), 2u);
  for (const torch::Tensor& f : layers) {  // [2 (x, y), H, 8]
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        const double mag = std::pow(10.0, -4.0 * k / 16);
        const double x0 = f[0][h][k].item<double>(), y0 = f[1][h][k].item<double>();
        const double x1 = f[0][h][k + 4].item<double>(), y1 = f[1][h][k + 4].item<double>();
        EXPECT_NEAR(std::hypot(x0, y0), mag, 1e-6) << "head " << h << " pair " << k;
        EXPECT_NEAR(std::hypot(x1, y1), mag, 1e-6) << "head " << h << " pair " << k + 4;
        EXPECT_NEAR(x0 * x1 + y0 * y1, 0, 1e-6) << "phi + pi / 2";
        EXPECT_NEAR(x0 * y1 - y0 * x1, mag * mag, 1e-6) << "rotated by +pi / 2, not -pi / 2";
      }
    EXPECT_GT((f[0][0] - f[0][1]).abs().max().item<double>(), 1e-3) << "each head its own phi";
  }
  EXPECT_GT((layers[0] - layers[1]).abs().max().item<double>(), 1e-3) << "each layer its own phi";
}

// Axial and pixel RoPE against the core's scalar reference: axial_angles over (x, y) = (column,
// row) coordinates, integers for lang and linspace(-1, 1, g) for pixel, rotated by
// rope_apply_angles on interleaved pairs.
TEST(VisionModel, AxialAndPixelRotateAsTheCoresAngleTable) {
  for (const VisionScheme s : {VisionScheme::kAxial, VisionScheme::kPixel}) {
    VisionTransformer model(tiny_vit(s));
    AxialRopeParams p;
    p.axis_dim = 8;
    p.theta = 100;
    p.freqs_for = s == VisionScheme::kPixel ? AxialFrequencies::kPixel : AxialFrequencies::kLang;
    for (const int grid : {6, 9}) {
      std::vector<double> xy;
      for (int row = 0; row < grid; ++row)
        for (int col = 0; col < grid; ++col)
          for (const int v : {col, row}) xy.push_back(s == VisionScheme::kPixel ? -1.0 + 2.0 * v / (grid - 1) : v);
      const torch::Tensor x = torch::randn({1, 2, grid * grid, 16});  // [B, H, S, head_dim]
      const torch::Tensor got = model->rotate(x, 0, grid);
      torch::Tensor want = x.transpose(1, 2).contiguous();  // the reference's [B, S, H, D]
      rope_apply_angles(bshd(want.data_ptr<float>(), DType::kF32, {1, grid * grid, 2, 16}), axial_angles(p, xy), 8,
                        RopeLayout::kInterleaved);
      EXPECT_TRUE(torch::allclose(got, want.transpose(1, 2), 1e-5, 1e-5)) << to_string(s) << " grid " << grid;
    }
  }
}

// Keys's cubic convolution (a = -0.75, PyTorch's bicubic), one axis: out[i] at source coordinate
// (i + 0.5) n / m - 0.5 (align_corners false), indices clamped at the borders.
std::vector<double> bicubic_1d(const std::vector<double>& in, int m) {
  const int n = static_cast<int>(in.size());
  const auto w = [](double t) {
    const double a = -0.75;
    t = std::abs(t);
    return t <= 1 ? ((a + 2) * t - (a + 3)) * t * t + 1 : t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a : 0.0;
  };
  std::vector<double> out(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) {
    const double src = (i + 0.5) * n / m - 0.5;
    const int base = static_cast<int>(std::floor(src));
    for (int k = base - 1; k <= base + 2; ++k) out[static_cast<std::size_t>(i)] += w(src - k) * in[static_cast<std::size_t>(std::clamp(k, 0, n - 1))];
  }
  return out;
}

TEST(VisionModel, TheLearnedTableIsResampledBicubicWithoutAlignedCorners) {
  torch::manual_seed(4);
  VisionTransformer model(tiny_vit(VisionScheme::kLearned));  // a 6 x 6 table of 32 channels
  const torch::Tensor table = model->table_at(6).to(torch::kFloat64);  // [1, 36, 32]
  for (const int grid : {9, 13}) {
    const torch::Tensor got = model->table_at(grid).to(torch::kFloat64);
    for (const int ch : {0, 17}) {
      std::vector<std::vector<double>> rows;  // each source row resampled along x, then each column along y
      for (int r = 0; r < 6; ++r) {
        std::vector<double> line;
        for (int c = 0; c < 6; ++c) line.push_back(table[0][r * 6 + c][ch].item<double>());
        rows.push_back(bicubic_1d(line, grid));
      }
      for (int c = 0; c < grid; ++c) {
        std::vector<double> column;
        for (int r = 0; r < 6; ++r) column.push_back(rows[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]);
        const std::vector<double> want = bicubic_1d(column, grid);
        for (int r = 0; r < grid; ++r)
          EXPECT_NEAR(got[0][r * grid + c][ch].item<double>(), want[static_cast<std::size_t>(r)], 1e-5) << grid << " " << r << "," << c;
      }
    }
  }
  EXPECT_TRUE(torch::equal(model->table_at(6), model->table_at(6))) << "the training grid reads the table as it is";
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
  b = c;
  b.training.warmup = -1;
  expect(b, "--warmup must be in [0, 1000000], got -1");
  b.training.warmup = 7;  // past --steps: allowed, the rate never reaches its peak
  EXPECT_NO_THROW(validate_vision(b));
  b = c;
  b.training.batch = 0;
  expect(b, "--batch must be in [1, 1024], got 0");
  b = c;
  b.training.lr = std::nan("");
  expect(b, "--lr must be in (0, 1), got nan");
  b = c;
  b.test_images = 0;
  expect(b, "--test-images must be in [1, 4096], got 0");
  b = c;
  b.training.train_len = 32;
  b.training.batch = 1024;
  b.shape = {8, 1024, 8};
  expect(b, "images of 1024 patches needs about");
}

}  // namespace
}  // namespace posenc::lab
