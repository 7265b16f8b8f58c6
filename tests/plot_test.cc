// The pictures: PNGs decode to the expected size, SVGs are well-formed and hold their series,
// and the numbers behind each picture are the library's (not the pixels).
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/properties.h"
#include "posenc/sinusoidal.h"
#include "posenc_plot/explain.h"
#include "posenc_plot/figures.h"

namespace posenc::plot {
namespace {

// Every opening tag closed, in order (self-closing allowed): enough to catch broken output.
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool well_formed(const std::string& xml) {
  std::vector<std::string> stack;
  for (std::size_t i = xml.find('<'); i != std::string::npos; i = xml.find('<', i + 1)) {
    const std::size_t end = xml.find('>', i);
    if (end == std::string::npos) return false;
    const std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    const std::string name = tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" />", 1) - (tag[0] == '/' ? 1 : 0));
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != name) return false;
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(name);
    }
  }
  return stack.empty();
}

TEST(Plot, PngRoundTripAndViridis) {
  HeatmapSpec s;
  s.rows = 3;
  s.cols = 5;
  for (int i = 0; i < 15; ++i) s.values.push_back(i);
  s.values[7] = std::nan("");
  int w = 0, h = 0;
  std::vector<std::uint8_t> rgb;
  decode_png(heatmap_png(s, 4), &w, &h, &rgb);
  EXPECT_EQ(w, 20);
  EXPECT_EQ(h, 12);
  const auto first = viridis(0), last = viridis(1);
  EXPECT_EQ(rgb[0], first[0]);  // the minimum is viridis(0): dark purple
  EXPECT_EQ(rgb[(11 * 20 + 19) * 3 + 1], last[1]);  // the maximum is viridis(1): yellow
  const std::size_t nan_pixel = ((1 * 4) * 20 + 2 * 4) * 3;  // cell (1, 2)
  EXPECT_EQ(rgb[nan_pixel], 255);
  EXPECT_EQ(rgb[nan_pixel + 1], 255);
  EXPECT_GT(first[2], first[1]);  // viridis starts blue-purple...
  EXPECT_GT(last[0], last[2]);    // ...and ends yellow
  EXPECT_THROW(decode_png({1, 2, 3}, &w, &h, &rgb), Error);
}

TEST(Plot, HeatmapNumbersAreTheLibrarys) {
  HeatmapRequest r;
  r.scheme = "sinusoidal";
  r.dim = 16;
  r.first = 10;
  r.count = 5;
  const HeatmapSpec s = heatmap_data(r);
  const auto table = sinusoidal_table({16, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, 10000.0}, {10, 11, 12, 13, 14});
  ASSERT_EQ(s.values.size(), table.size());
  for (std::size_t i = 0; i < table.size(); ++i) EXPECT_EQ(s.values[i], table[i]);
  r.scheme = "alibi";
  r.heads = 8;
  r.head = 1;
  const HeatmapSpec a = heatmap_data(r);
  EXPECT_DOUBLE_EQ(a.values[4 * 5 + 1], -alibi_slopes(8)[1] * 3);
  EXPECT_TRUE(std::isnan(a.values[0 * 5 + 1])) << "future keys are masked";
  r.scheme = "t5";
  const HeatmapSpec t = heatmap_data(r);
  EXPECT_EQ(t.values[0 * 5 + 1], t5_bucket(1, r.t5));
  EXPECT_NE(heatmap_svg(a, 4).find("data:image/png;base64,"), std::string::npos);
  EXPECT_TRUE(well_formed(heatmap_svg(t, 4)));
  r.scheme = "unknown";
  EXPECT_THROW(heatmap_data(r), Error);
}

// Token names (an attention map's): one label per cell, escaped, the scale made room for them;
// a name count that is not the row or column count is an Error naming both.
TEST(Plot, HeatmapCellsCarryTheirNames) {
  HeatmapSpec s;
  s.rows = s.cols = 3;
  s.values = {1, 0, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5};
  EXPECT_EQ(heatmap_scale(s), 8);
  s.row_names = {"7", "<sep>", "1"};
  s.col_names = s.row_names;
  EXPECT_EQ(heatmap_scale(s), 24);
  const std::string svg = heatmap_svg(s, heatmap_scale(s));
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count_of(svg, ">&lt;sep&gt;</text>"), 2) << svg;  // once per axis
  EXPECT_EQ(count_of(svg, "<line x1"), 6);  // a tick per name, none of the five numeric ones
  s.col_names.pop_back();
  try {
    heatmap_svg(s, 24);
    FAIL() << "two names for three columns";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 column names for 3 columns"), std::string::npos) << e.what();
  }
}

TEST(Plot, WavelengthsMarkTheBands) {
  const ModelRope m = load_hf_config(testing::reference_dir() + "/real-configs/Llama-3.1-8B-Instruct.json");
  const WavelengthData w = wavelength_data(m.select().params, "llama3");
  ASSERT_EQ(w.index.size(), 64u);
  EXPECT_EQ(w.original_context, 8192);
  ASSERT_EQ(w.bands.size(), 1u);
  EXPECT_EQ(w.bands[0].from, 29);  // hf-reference.md: 29..34 smoothed
  EXPECT_EQ(w.bands[0].to, 34);
  EXPECT_NEAR(w.scaled[63] / w.base[63], 8.0, 1e-4);
  const std::string svg = wavelength_svg(w);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_NE(svg.find("data-name=\"after scaling\""), std::string::npos);
  EXPECT_NE(svg.find("training context 8192"), std::string::npos);
}

TEST(Plot, DecayCurvesAreTheLibrarys) {
  DecayRequest r;
  r.scheme = "rope";
  r.dim = 64;
  const auto rope = decay_data(r);
  RopeParams p;
  p.head_dim = 64;
  const auto inv = compute_schedule(p).inv_freq;
  ASSERT_EQ(rope.size(), 1u);
  EXPECT_DOUBLE_EQ(rope[0].y[0], rope_decay_bound(inv, rope[0].x[0]));
  EXPECT_GT(rope[0].y.front(), rope[0].y.back());
  r.scheme = "alibi";
  const auto alibi = decay_data(r);
  EXPECT_DOUBLE_EQ(alibi[0].y[0], -alibi_slopes(8)[0] * alibi[0].x[0]);
  r.scheme = "sinusoidal";
  EXPECT_NEAR(decay_data(r)[0].y[0], 0, 1.0);
  for (const char* scheme : {"rope", "alibi", "t5", "sinusoidal"}) {
    r.scheme = scheme;
    EXPECT_TRUE(well_formed(decay_svg(r))) << scheme;
  }
}

// Axes stay finite and bounded whatever the data: a constant series (the tick step fell below
// the values' precision and the loop never advanced), infinities, NaN, 600 decades, nothing.
TEST(Plot, ChartAxesAreBoundedWhateverTheData) {
  const double inf = INFINITY, nan = std::nan("");
  struct Case {
    const char* name;
    std::vector<double> x, y;
    bool log_x, log_y;
  };
  const std::vector<Case> cases = {
      {"constant", {1, 2, 3}, {1.0, 1.0 + 2e-16, 1.0}, false, false},
      {"huge constant", {1, 2}, {1e20, 1e20}, false, false},
      {"infinities", {1, 2, 3}, {inf, -inf, 1}, false, false},
      {"nan only", {1, 2}, {nan, nan}, false, true},
      {"600 decades", {1, 2, 3}, {1e-300, 1, 1e300}, true, true},
      {"subnormal", {1, 2}, {4.9e-324, 1e-320}, false, true},
      {"nothing", {}, {}, true, false},
      {"inf x", {inf, 1, 2}, {1, 2, 3}, true, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ChartOptions o;
    o.log_x = c.log_x;
    o.log_y = c.log_y;
    o.hlines.push_back({inf, "inf line"});
    o.vlines.push_back({nan, "nan line"});
    const std::string svg = svg_line_chart({{"s", c.x, c.y}}, o);
    EXPECT_TRUE(well_formed(svg));
    EXPECT_LT(svg.size(), 20000u);
    EXPECT_EQ(svg.find("nan"), std::string::npos) << "a NaN coordinate";
    EXPECT_EQ(svg.find("inf"), std::string::npos) << "an infinite coordinate";
  }
  const std::string empty = svg_line_chart({{"s", {1, 2}, {nan, nan}}}, {});
  EXPECT_NE(empty.find("no finite values to draw"), std::string::npos);
}

TEST(Explain, Llama31InNumbersAndWords) {
  const ModelRope m = load_hf_config(testing::reference_dir() + "/real-configs/Llama-3.1-8B-Instruct.json");
  const ExplainReport r = explain(m, "", 32768);
  EXPECT_EQ(r.rotary_dim, 128);
  EXPECT_EQ(r.training_context, 8192);
  EXPECT_EQ(r.full_turn + r.never_turn, 64);
  EXPECT_EQ(r.unchanged, 29);
  EXPECT_EQ(r.interpolated_fully, 29);
  EXPECT_EQ(r.blended, 6);
  EXPECT_EQ(r.out_of_range_at_context, 0) << "x8 covers a 4x context";
  const ModelRope plain = load_hf_config(testing::reference_dir() + "/real-configs/Llama-2-7b__neuron_training.json");
  const ExplainReport p = explain(plain, "", 8192);
  EXPECT_GT(p.out_of_range_at_context, 0) << "plain RoPE at 4x its context";
  EXPECT_NE(explain_text(p).find("expect degradation"), std::string::npos);
  EXPECT_NE(explain_json(r).find("\"frequencies_blended\": 6"), std::string::npos);
}

// spec-107: --context is a length, in the range of freqs' --seq-len ([1, 2^31]: positions up to
// 2^31-1); 2^31 was refused as past 2^31-1.
TEST(Explain, ContextTakesTheSequenceLengthRange) {
  const ModelRope m = load_hf_config(testing::reference_dir() + "/real-configs/Llama-3.1-8B-Instruct.json");
  EXPECT_EQ(explain(m, "", std::int64_t{1} << 31).context, std::int64_t{1} << 31);
  for (std::int64_t bad : {std::int64_t{0}, (std::int64_t{1} << 31) + 1}) {
    try {
      explain(m, "", bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "--context must be in [1, 2^31] (positions 0 .. 2^31-1), got " + std::to_string(bad));
    }
  }
}

}  // namespace
}  // namespace posenc::plot
