// N-D axial RoPE and pixel frequencies (axial_rope.h): one axis is 1-D RoPE bit for bit; more axes
// are rotary-embedding-torch's per-axis construction (get_axial_freqs); integer lang coordinates
// on the SIMD kernels (every target) equal the angle-table reference bit for bit; the refusals.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "posenc/axial_rope.h"
#include "posenc/error.h"
#include "posenc/rope_kernels.h"
#include "expect_error.h"
#include "rope_kernels_test_support.h"

namespace posenc {
namespace {

using namespace rope_kernels_test;

AxialRopeParams axial(int axes, int axis_dim, AxialFrequencies freqs_for = AxialFrequencies::kLang) {
  AxialRopeParams p;
  p.axes = axes;
  p.axis_dim = axis_dim;
  p.freqs_for = freqs_for;
  return p;
}

TEST(AxialRope, OneAxisIsOneDimensionalRopeBitForBit) {
  std::mt19937 rng(1);
  const int tokens = 6, heads = 2, head_dim = 72;  // 64 rotated channels, 8 passed through
  const std::vector<std::int64_t> positions = {0, 1, 5, 100, 4000, 131071};
  const std::vector<double> coordinates(positions.begin(), positions.end());
  const std::vector<double> angles = axial_angles(axial(1, 64), coordinates);
  RopeParams rp;
  rp.head_dim = 64;
  const RopeSchedule s = compute_schedule(rp);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
      for (int direction : {1, -1}) {
        Buffer x = random_buffer(dtype, std::size_t{tokens} * heads * head_dim, rng), want = x;
        RopeApplyParams p = rope_apply_params(s, layout);
        p.direction = direction;
        rope_apply_reference(bshd(want.data(), dtype, {1, tokens, heads, head_dim}), PositionIds::explicit_ids(positions.data()), p);
        rope_apply_angles(bshd(x.data(), dtype, {1, tokens, heads, head_dim}), angles, 32, layout, direction);
        EXPECT_EQ(x.bytes, want.bytes) << to_string(dtype) << " " << to_string(layout) << " " << direction;
      }
}

// get_axial_freqs(3, 4) written out in long double: axis 0 (rows) then axis 1 (columns), each
// its own block of F frequencies, coordinates arange (lang) or linspace(-1, 1) (pixel).
TEST(AxialRope, TwoAxesAreThePerAxisConstruction) {
  const int rows = 3, cols = 4, axis_dim = 8, F = 4;
  const long double pi = 3.141592653589793238462643383279502884L;
  for (AxialFrequencies freqs_for : {AxialFrequencies::kLang, AxialFrequencies::kPixel}) {
    const AxialRopeParams p = axial(2, axis_dim, freqs_for);
    const auto angles = axial_angles(p, axial_grid_coordinates(p, {rows, cols}));
    ASSERT_EQ(angles.size(), std::size_t{rows * cols * 2 * F});
    const auto freq = [&](int i) {
      return freqs_for == AxialFrequencies::kLang ? std::pow(10000.0L, -2.0L * i / axis_dim)
                                                  : (1 + (10 / 2.0L - 1) * i / (F - 1)) * pi;
    };
    const auto coordinate = [&](int index, int n) {
      return freqs_for == AxialFrequencies::kLang ? static_cast<long double>(index) : -1 + 2.0L * index / (n - 1);
    };
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        for (int i = 0; i < F; ++i) {
          const std::size_t row = static_cast<std::size_t>((r * cols + c) * 2 * F);
          const long double want_r = coordinate(r, rows) * freq(i), want_c = coordinate(c, cols) * freq(i);
          EXPECT_NEAR(angles[row + i], static_cast<double>(want_r), 1e-6 * (1 + std::fabs(static_cast<double>(want_r))))
              << to_string(freqs_for) << " " << r << "," << c << " pair " << i;
          EXPECT_NEAR(angles[row + F + i], static_cast<double>(want_c), 1e-6 * (1 + std::fabs(static_cast<double>(want_c))))
              << to_string(freqs_for) << " " << r << "," << c << " pair " << F + i;
        }
  }
}

TEST(AxialRope, PixelFrequenciesAreLinspaceTimesPi) {
  const auto f = axial_axis_frequencies(axial(2, 12, AxialFrequencies::kPixel));  // linspace(1, 5, 6) * pi
  ASSERT_EQ(f.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(f[static_cast<std::size_t>(i)], static_cast<float>((1 + 0.8 * i) * M_PI)) << i;
  EXPECT_FLOAT_EQ(axial_axis_frequencies(axial(1, 2, AxialFrequencies::kPixel))[0], static_cast<float>(M_PI)) << "one: start";
  EXPECT_EQ(axial_grid_coordinates(axial(1, 2, AxialFrequencies::kPixel), {1}), std::vector<double>{-1.0});
  EXPECT_EQ(axial_grid_coordinates(axial(1, 2, AxialFrequencies::kPixel), {5}), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
}

TEST_F(RopeKernels, IntegerAxialCoordinatesOnEveryTargetEqualTheAngleTable) {
  std::mt19937 rng(2);
  const int tokens = 12, heads = 3;
  for (int axes : {2, 3}) {
    const AxialRopeParams p = axial(axes, 16);
    const int head_dim = axes * 16 + 4;
    const std::vector<double> coordinates = axial_grid_coordinates(p, axes == 2 ? std::vector<int>{3, 4} : std::vector<int>{2, 3, 2});
    std::vector<std::int64_t> ids(static_cast<std::size_t>(axes * tokens));  // [axis][token]
    for (int t = 0; t < tokens; ++t)
      for (int a = 0; a < axes; ++a)
        ids[static_cast<std::size_t>(a * tokens + t)] = static_cast<std::int64_t>(coordinates[static_cast<std::size_t>(t * axes + a)]);
    const AxialKernelFrequencies kf = axial_kernel_frequencies(p);
    const auto angles = axial_angles(p, coordinates);
    for (const auto target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (DType dtype : {DType::kF32, DType::kBF16})
        for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
          Buffer x = random_buffer(dtype, std::size_t{tokens} * heads * head_dim, rng), want = x;
          rope_apply_angles(bshd(want.data(), dtype, {1, tokens, heads, head_dim}), angles, axes * 8, layout);
          const RopeApplyParams rp = rope_apply_params(kf.inv_freq, 1.0, layout, kf.axis_of_freq);
          rope_rotate(bshd(x.data(), dtype, {1, tokens, heads, head_dim}), nullptr,
                      PositionIds::explicit_ids(ids.data(), axes, tokens), rp);
          EXPECT_EQ(x.bytes, want.bytes) << hwy::TargetName(target) << " axes " << axes << " " << to_string(dtype) << " "
                                         << to_string(layout);
        }
    }
  }
}

TEST(AxialRope, RefusesWhatItCannotBuild) {
  expect_error([] { axial_axis_frequencies(axial(0, 8)); }, "axial RoPE needs axes >= 1, got 0");
  expect_error([] { axial_axis_frequencies(axial(2, 7)); }, "axis_dim must be even and in [2, 65536], got 7");
  AxialRopeParams bad = axial(2, 8);
  bad.max_freq = 0;
  expect_error([&] { axial_axis_frequencies(bad); }, "max_freq must be finite > 0, got 0");
  expect_error([] { axial_kernel_frequencies(axial(2, 8, AxialFrequencies::kPixel)); }, "needs freqs_for lang, got pixel");
  expect_error([] { axial_kernel_frequencies(axial(4, 8)); }, "at most 3 position axes, got 4");
  expect_error([] { axial_angles(axial(2, 8), {1, 2, 3}); }, "[tokens, axes = 2], got 3 values");
  expect_error([] { axial_angles(axial(1, 8), {NAN}); }, "must be finite");
  expect_error([] { axial_grid_coordinates(axial(2, 8), {3}); }, "one size per axis (2), got 1");
  std::vector<float> x(16, 1.0f);
  expect_error([&] { rope_apply_angles(bshd(x.data(), {1, 2, 1, 8}), std::vector<double>(5, 0.0), 4, RopeLayout::kHalfSplit); },
               "angle table has 5 values");
  expect_error([&] { rope_apply_angles(bshd(x.data(), {1, 2, 1, 8}), std::vector<double>(8, 3e9), 4, RopeLayout::kHalfSplit); },
               "beyond 2^31 radians");
}

}  // namespace
}  // namespace posenc
