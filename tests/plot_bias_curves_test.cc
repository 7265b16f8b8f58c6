// `plot decay` for the learned distance biases (issue 24): the curves are the core's tables at
// posenc's initialisation (and the formulas worked by hand), the heads drawn are capped and
// named, a user's table is drawn as given and refused, naming the value, when it cannot be.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "posenc/error.h"
#include "posenc/kerple.h"
#include "posenc/sandwich.h"
#include "posenc_plot/bias_curves.h"

namespace posenc::plot {
namespace {

// The y of `s` at distance d (which the chart samples), NaN when d is not sampled.
double at(const Series& s, std::int64_t d) {
  for (std::size_t i = 0; i < s.x.size(); ++i)
    if (s.x[i] == static_cast<double>(d)) return s.y[i];
  return std::nan("");
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

DecayRequest request(const std::string& scheme, int heads, std::int64_t max_distance) {
  DecayRequest r;
  r.scheme = scheme;
  r.heads = heads;
  r.max_distance = max_distance;
  return r;
}

TEST(PlotBias, KerpleCurvesAreTheCoresTableAndTheFormula) {
  DecayRequest r = request("kerple", 8, 1024);
  const auto log_curves = decay_data(r);
  ASSERT_EQ(log_curves.size(), 8u);
  const std::vector<float> table = kerple_table(kerple_init(8, KerpleKind::kLog), 1025);
  for (int h : {0, 3, 7})
    for (std::int64_t d : {0, 2, 10, 100, 1024})
      EXPECT_EQ(at(log_curves[static_cast<std::size_t>(h)], d), static_cast<double>(table[static_cast<std::size_t>(h) * 1025 + d])) << h << " " << d;
  // By hand: log Kerple at init is -log(1 + m_h d), ALiBi's slopes m_h = 2^-(h+1) for 8 heads.
  EXPECT_NEAR(at(log_curves[0], 10), -std::log(6.0), 1e-6);              // m = 1/2
  EXPECT_NEAR(at(log_curves[7], 1024), -std::log(1.0 + 4.0), 1e-6);      // m = 1/256
  EXPECT_EQ(at(log_curves[0], 0), 0.0);
  r.kind = "power";  // -m_h d: ALiBi at initialisation
  const auto power = decay_data(r);
  EXPECT_EQ(at(power[0], 10), -5.0);
  EXPECT_EQ(at(power[2], 100), -12.5);
  r.kind = "cubic";
  try {
    decay_data(r);
    FAIL() << "an unknown kind was drawn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'cubic'"), std::string::npos) << e.what();
  }
}

TEST(PlotBias, SandwichCurvesAreTheCoresTableAndTheFormula) {
  DecayRequest r = request("sandwich", 8, 300);
  r.dim = 4;  // d' = 4: k = 1, 2 give cos(d / 100) and cos(d / 10000)
  const auto curves = decay_data(r);
  ASSERT_EQ(curves.size(), 8u);
  EXPECT_NEAR(at(curves[1], 100), (std::cos(1.0) + std::cos(0.01) - 2.0) / 2.0, 1e-6);  // head 1: x 8 / (8 * 2)
  EXPECT_NEAR(at(curves[0], 250), std::cos(2.5) + std::cos(0.025) - 2.0, 1e-6);
  r.dim = 64;
  const auto wide = decay_data(r);
  const std::vector<float> table = sandwich_table({8, 64}, 301);
  for (int h : {0, 5})
    for (std::int64_t d : {0, 1, 37, 300})
      EXPECT_EQ(at(wide[static_cast<std::size_t>(h)], d), static_cast<double>(table[static_cast<std::size_t>(h) * 301 + d]));
}

TEST(PlotBias, HeadsAndDistancesDrawnAreCappedAndNamed) {
  EXPECT_EQ(drawn_heads(32), (std::vector<int>{0, 4, 9, 13, 18, 22, 27, 31}));
  EXPECT_EQ(drawn_heads(3), (std::vector<int>{0, 1, 2}));
  for (int heads = 9; heads <= 200; ++heads) {
    const auto d = drawn_heads(heads);
    EXPECT_EQ(std::set<int>(d.begin(), d.end()).size(), 8u) << heads;
    EXPECT_EQ(d.back(), heads - 1);
  }
  EXPECT_EQ(bias_distances(100).size(), 101u);
  const auto far = bias_distances(1 << 20);
  EXPECT_EQ(far.size(), static_cast<std::size_t>(kMaxBiasPoints));
  EXPECT_EQ(far.front(), 0);
  EXPECT_EQ(far.back(), 1 << 20);
  const DecayRequest many = request("kerple", 32, 64);
  const std::string svg = decay_svg(many);
  EXPECT_EQ(count_of(svg, "class=\"series\""), 8);
  EXPECT_NE(svg.find("8 of 32 heads drawn"), std::string::npos);
  EXPECT_NE(svg.find("data-name=\"head 31 "), std::string::npos);
  EXPECT_EQ(count_of(decay_svg(request("sandwich", 5, 64)), "class=\"series\""), 5);
  EXPECT_THROW(decay_data(request("kerple", 65536, 1 << 20)), Error);  // 2^36 values
}

TEST(PlotBias, AUsersTableIsDrawnAsGivenOrRefusedNamingTheValue) {
  DecayRequest r = request("table", 8, 2);
  r.table = UserTable{2, 3, {0, -1, -2, 0, -0.5, -4}};
  r.table_name = "dpb.csv";
  const auto curves = decay_data(r);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[1].y, (std::vector<double>{0, -0.5, -4}));
  EXPECT_EQ(count_of(decay_svg(r), "class=\"series\""), 2);
  const auto refused = [](DecayRequest q, const std::string& part) {
    try {
      decay_data(q);
      ADD_FAILURE() << "drawn: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  r.max_distance = 5;
  refused(r, "--max-distance 5 is past the table's last distance 2");
  r.max_distance = 2;
  r.table->values[5] = std::nan("");
  refused(r, "head 1, distance 2");
  r.table = UserTable{2, 1, {0, 0}};
  refused(r, "1 column");
  r.table = UserTable{2000, 2, std::vector<double>(4000)};
  refused(r, "2000 rows");
}

}  // namespace
}  // namespace posenc::plot

namespace posenc::plot {
namespace {

// `plot decay --scheme xpos` (issue 25): q = k = 1 scored per channel, xPos's
// sum_i zeta_i^(d/512) cos(d w_i) / (d_h/2) with zeta_i = (2i/d_h + 0.4)/1.4, RoPE's without the
// zeta, worked here in double from the paper's formula.
TEST(PlotDecay, XPosIsRopesScoreTimesItsDecay) {
  DecayRequest r;
  r.scheme = "xpos";
  r.dim = 64;
  r.max_distance = 4096;
  const auto curves = decay_data(r);
  ASSERT_EQ(curves.size(), 2u);
  const int half = r.dim / 2;
  for (std::size_t k = 0; k < curves[0].x.size(); ++k) {
    const double d = curves[0].x[k];
    double plain = 0, scaled = 0;
    for (int i = 0; i < half; ++i) {
      const double w = static_cast<double>(static_cast<float>(std::pow(10000.0, -2.0 * i / r.dim)));  // float32 inv_freq
      const double zeta = (2.0 * i / r.dim + 0.4) / 1.4;
      plain += std::cos(d * w);
      scaled += std::pow(zeta, d / 512) * std::cos(d * w);
    }
    EXPECT_NEAR(curves[0].y[k], plain / half, 1e-9) << "RoPE at d = " << d;
    EXPECT_NEAR(curves[1].y[k], scaled / half, 1e-6) << "xPos at d = " << d;
  }
  EXPECT_NE(decay_svg(r).find("xPos (B = 512"), std::string::npos);
}

}  // namespace
}  // namespace posenc::plot
