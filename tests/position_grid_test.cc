// Issue 26: learned position grids resized to the image (position_grid.h), as torch's
// F.interpolate(align_corners=False) computes them for the towers' HF code. The values pinned here
// are torch 1.13's own results in float64 (printed by F.interpolate); the Python tests compare
// with F.interpolate itself over many shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "posenc/error.h"
#include "posenc/position_grid.h"

namespace posenc {
namespace {

PositionGrid row(std::vector<float> values) {
  return PositionGrid{1, static_cast<int>(values.size()), 1, std::move(values)};
}

void expect_values(const PositionGrid& g, const std::vector<double>& want) {
  ASSERT_EQ(g.values.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g.values[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i]))) << i;
}

TEST(PositionGrid, TorchsValuesAlongOneAxis) {
  // bilinear antialias 4 -> 2: triangle of half-width 2 at centres 1 and 3, weights 3/7, 3/7, 1/7.
  expect_values(resize_position_grid(row({0, 1, 2, 3}), 1, 2, GridResize::kBilinearAntialias),
                {0.7142857142857142, 2.2857142857142856});
  // bicubic 2 -> 3: A = -0.75 taps at x = -1/6, 1/2, 7/6, clamped to the border (overshoot below 0).
  expect_values(resize_position_grid(row({0, 1}), 1, 3, GridResize::kBicubic), {-0.08680555555555536, 0.5, 1.0868055555555558});
  expect_values(resize_position_grid(row({0, 1, 4, 9, 16}), 1, 8, GridResize::kBicubic),
                {-0.09283447265625, 0.18756103515625, 1.176513671875, 2.619384765625, 5.441650390625, 8.471435546875,
                 13.39508056640625, 16.64984130859375});
}

TEST(PositionGrid, SameSizeIsTheTableAndAConstantStaysConstant) {
  PositionGrid g{3, 4, 2, {}};
  for (int i = 0; i < 24; ++i) g.values.push_back(std::sin(0.7f * i));
  for (GridResize mode : {GridResize::kBicubic, GridResize::kBilinearAntialias}) {
    EXPECT_EQ(resize_position_grid(g, 3, 4, mode).values, g.values);
    const PositionGrid flat = resize_position_grid(PositionGrid{3, 4, 1, std::vector<float>(12, 0.25f)}, 7, 2, mode);
    for (float v : flat.values) EXPECT_NEAR(v, 0.25f, 1e-7);  // the weights sum to 1
  }
}

// The two axes are separable: a grid r * 10 + c resized gives the row resize times 10 plus the
// column resize. (With torch's A = -0.75 bicubic does not reproduce a linear ramp; A = -0.5 would.)
TEST(PositionGrid, AxesAreSeparable) {
  PositionGrid g{6, 5, 1, {}};
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 5; ++c) g.values.push_back(static_cast<float>(r * 10 + c));
  for (GridResize mode : {GridResize::kBicubic, GridResize::kBilinearAntialias}) {
    const PositionGrid out = resize_position_grid(g, 9, 3, mode);
    const PositionGrid rows = resize_position_grid(row({0, 10, 20, 30, 40, 50}), 1, 9, mode);
    const PositionGrid cols = resize_position_grid(row({0, 1, 2, 3, 4}), 1, 3, mode);
    for (int r = 0; r < 9; ++r)
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(out.values[r * 3 + c], rows.values[r] + cols.values[c], 2e-5) << r << "," << c;
  }
}

TEST(PositionGrid, BadInputNamesTheValue) {
  auto message = [](const PositionGrid& g, int rows, int cols) {
    try {
      resize_position_grid(g, rows, cols, GridResize::kBicubic);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const PositionGrid ok{2, 2, 1, {0, 1, 2, 3}};
  EXPECT_NE(message(ok, 0, 2).find("rows asked for must be in [1, 65536], got 0"), std::string::npos);
  EXPECT_NE(message(PositionGrid{2, 2, 1, {0, 1, 2}}, 2, 2).find("needs 4 values, got 3"), std::string::npos);
  EXPECT_NE(message(PositionGrid{2, 2, 1, {0, 1, std::numeric_limits<float>::infinity(), 3}}, 3, 3).find("value 2 is inf"),
            std::string::npos);
  EXPECT_NE(message(PositionGrid{2, 2, 1024, std::vector<float>(4096)}, 65536, 65536).find("2^28"), std::string::npos);
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// Idefics3's bucketised rows, against ids torch 1.13 printed for HF v5's
// Idefics3VisionEmbeddings.forward (CPU): a 26-row table (364 / 14), 13 patches, in each dtype.
TEST(PositionGridBucket, TorchsIdsInEveryPixelDtype) {
  EXPECT_EQ(bucket_rows(26, 13, DType::kF32), (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24}));
  EXPECT_EQ(bucket_rows(26, 13, DType::kBF16), (std::vector<int>{0, 2, 4, 5, 8, 10, 11, 14, 16, 17, 20, 22, 23}));
  EXPECT_EQ(bucket_rows(26, 13, DType::kF16), (std::vector<int>{0, 1, 3, 5, 7, 9, 11, 14, 15, 18, 19, 22, 23}));
  std::vector<int> every(26);
  for (int i = 0; i < 26; ++i) every[i] = i;
  EXPECT_EQ(bucket_rows(26, 26, DType::kF32), every);  // a full float32 image reads every row once
  EXPECT_EQ(bucket_rows(26, 26, DType::kBF16)[3], 2);  // bfloat16 reads row 2 twice
  EXPECT_THROW(bucket_rows(0, 3, DType::kF32), Error);
  EXPECT_THROW(bucket_rows(26, 70000, DType::kF32), Error);
}

// The bucket resize copies table rows: no interpolation.
TEST(PositionGridBucket, ResizeGathersTheBucketedRows) {
  PositionGrid g{26, 26, 1, std::vector<float>(26 * 26)};
  for (int i = 0; i < 26 * 26; ++i) g.values[i] = static_cast<float>(i);
  const PositionGrid out = resize_position_grid(g, 13, 2, GridResize::kBucketBf16);
  const std::vector<int> rows = bucket_rows(26, 13, DType::kBF16), cols = bucket_rows(26, 2, DType::kBF16);
  for (int r = 0; r < 13; ++r)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(out.values[r * 2 + c], static_cast<float>(rows[r] * 26 + cols[c]));
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// GLM-4V's grid_sample: bicubic's source index rounded through float32, so equal to bicubic to
// float rounding, and at the table's own size the table itself.
TEST(PositionGridSample, EqualsBicubicToRoundingAndKeepsTheTableAtItsSize) {
  PositionGrid g{24, 24, 3, std::vector<float>(24 * 24 * 3)};
  for (std::size_t i = 0; i < g.values.size(); ++i) g.values[i] = std::sin(0.37 * static_cast<double>(i));
  for (const auto& [h, w] : {std::pair{36, 52}, std::pair{10, 8}, std::pair{24, 24}}) {
    const PositionGrid a = resize_position_grid(g, h, w, GridResize::kGridSampleBicubic);
    const PositionGrid b = resize_position_grid(g, h, w, GridResize::kBicubic);
    for (std::size_t i = 0; i < a.values.size(); ++i) EXPECT_NEAR(a.values[i], b.values[i], 1e-5);
    if (h == 24)
      for (std::size_t i = 0; i < a.values.size(); ++i) EXPECT_NEAR(a.values[i], g.values[i], 1e-5);
  }
}

}  // namespace
}  // namespace posenc
