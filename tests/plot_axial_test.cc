// `posenc plot axial` (plot/src/axial_heatmap.cc): the 2-D picture of axial RoPE. Its cells against
// the core's 1-D RoPE (a row term and a column term, each RoPE's cos at that axis's distance), its
// symmetry about the query for lang frequencies, and the refusals; the CLI writes the PNG and SVG.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc_plot/axial_heatmap.h"

namespace posenc::plot {
namespace {

TEST(PlotAxial, EachCellIsTheMeanOfARowAndAColumnRopeTerm) {
  AxialHeatmapRequest r;
  r.rope.axis_dim = 16;
  r.rows = 9;
  r.cols = 7;
  r.query_row = 2;
  r.query_col = 5;
  const HeatmapSpec s = axial_heatmap(r);
  ASSERT_EQ(s.rows, 9);
  ASSERT_EQ(s.cols, 7);
  // lang: each axis's frequencies are RoPE's default schedule for axis_dim channels (float32).
  RopeParams p;
  p.head_dim = 16;
  const std::vector<float> w = compute_schedule(p).inv_freq;
  const auto term = [&](int distance) {
    double sum = 0;
    for (float f : w) sum += std::cos(static_cast<double>(distance) * static_cast<double>(f));
    return sum / static_cast<double>(w.size());
  };
  for (int y = 0; y < 9; ++y)
    for (int x = 0; x < 7; ++x)
      EXPECT_NEAR(s.values[static_cast<std::size_t>(y * 7 + x)], 0.5 * (term(y - 2) + term(x - 5)), 1e-12) << y << " " << x;
  EXPECT_DOUBLE_EQ(s.values[2 * 7 + 5], 1.0);  // the query's own cell: every cos is 1
  EXPECT_EQ(s.value_min, -1.0);
  EXPECT_EQ(s.value_max, 1.0);
}

TEST(PlotAxial, LangMapsAreSymmetricAboutTheQueryAndPixelMapsDiffer) {
  AxialHeatmapRequest r;
  r.rope.axis_dim = 32;
  r.rows = r.cols = 17;  // centre (8, 8) by default
  const HeatmapSpec lang = axial_heatmap(r);
  for (int dy = -8; dy <= 8; ++dy)
    for (int dx = -8; dx <= 8; ++dx)
      EXPECT_NEAR(lang.values[static_cast<std::size_t>((8 + dy) * 17 + 8 + dx)], lang.values[static_cast<std::size_t>((8 - dy) * 17 + 8 - dx)], 1e-12);
  r.rope.freqs_for = AxialFrequencies::kPixel;
  const HeatmapSpec pixel = axial_heatmap(r);
  EXPECT_DOUBLE_EQ(pixel.values[8 * 17 + 8], 1.0);
  double differ = 0;
  for (std::size_t i = 0; i < lang.values.size(); ++i) differ = std::max(differ, std::fabs(lang.values[i] - pixel.values[i]));
  EXPECT_GT(differ, 0.1);
  EXPECT_NE(pixel.title.find("pixel"), std::string::npos);
}

TEST(PlotAxial, BadInputIsAnErrorNamingIt) {
  const auto message = [](AxialHeatmapRequest r) {
    try {
      axial_heatmap(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  AxialHeatmapRequest r;
  r.rope.axis_dim = 8;
  AxialHeatmapRequest bad = r;
  bad.rows = 0;
  EXPECT_NE(message(bad).find("grid rows must be in [1, 512], got 0"), std::string::npos);
  bad = r;
  bad.cols = 513;
  EXPECT_NE(message(bad).find("grid columns must be in [1, 512], got 513"), std::string::npos);
  bad = r;
  bad.query_row = 16;
  EXPECT_NE(message(bad).find("query cell (16, 8) is outside the 16 x 16 grid"), std::string::npos);
  bad = r;
  bad.query_col = -3;  // -1 is the centre; other negatives are no cell
  EXPECT_NE(message(bad).find("query cell (8, -3) is outside the 16 x 16 grid"), std::string::npos);
  bad = r;
  bad.rope.axes = 3;
  EXPECT_NE(message(bad).find("draws 2 axes"), std::string::npos);
  bad = r;
  bad.rope.axis_dim = 7;
  EXPECT_NE(message(bad).find("axis_dim"), std::string::npos);
}

}  // namespace
}  // namespace posenc::plot
