// The distance and gate biases as functions of their parameters (kerple.h, sandwich.h,
// forget_gate.h, fire.h, distance_bias.h): each float32 table within 1e-6 (relative) of its double
// reference, the papers' claims (b(0) = 0, monotone decay, power Kerple with r2 = 1 and FoX with
// a constant gate are ALiBi), and a clear error for every parameter outside its range.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/distance_bias.h"
#include "posenc/error.h"
#include "posenc/fire.h"
#include "posenc/forget_gate.h"
#include "posenc/kerple.h"
#include "posenc/sandwich.h"

#include "expect_error.h"

namespace posenc {
namespace {

// |a - ref| <= 1e-6 |ref| (and exact at ref = 0).
void expect_relative(float a, double ref, const std::string& where) {
  EXPECT_LE(std::abs(a - ref), 1e-6 * std::abs(ref)) << where << ": " << a << " vs " << ref;
}

const std::vector<std::int64_t> kDistances = {0, 1, 2, 3, 7, 31, 100, 511, 4095};

TEST(Kerple, TablesEqualTheDoubleReferenceAndDecayFromZero) {
  for (const KerpleKind kind : {KerpleKind::kLog, KerpleKind::kPower}) {
    const KerpleParams p{kind, {0.5, 2.0, 1e-3, 7.5}, {0.01, 1.0, 1.9, 2.0}};
    const std::vector<float> table = kerple_table(p, 4096);
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(table[h * 4096], 0.0f);
      for (const std::int64_t d : kDistances)
        expect_relative(table[h * 4096 + d], kerple_bias_reference(p, h, d), std::string(to_string(kind)) + " head " + std::to_string(h) + " d " + std::to_string(d));
      for (std::int64_t d = 1; d < 4096; ++d) ASSERT_LT(table[h * 4096 + d], table[h * 4096 + d - 1]) << "head " << h << " d " << d;
      EXPECT_EQ(kerple_bias_reference(p, h, -37), kerple_bias_reference(p, h, 37));  // only |Delta|
    }
  }
}

TEST(Kerple, PowerWithExponentOneIsAlibi) {
  const std::vector<double> slopes = alibi_slopes(8);
  const KerpleParams p{KerpleKind::kPower, slopes, std::vector<double>(8, 1.0)};
  const std::vector<float> table = kerple_table(p, 300);
  for (int h = 0; h < 8; ++h) {
    std::vector<float> row(300, 0.0f);
    alibi_add_bias_row(slopes[h], 299, 0, 300, AlibiMode::kCausal, row.data());  // key 299 - d at distance d
    for (int d = 0; d < 300; ++d) EXPECT_NEAR(table[h * 300 + d], row[299 - d], 2e-7 * (1 + d * slopes[h])) << h << " " << d;
  }
}

TEST(Kerple, RefusesParametersOutsideTheirRanges) {
  expect_error([] { validate(KerpleParams{KerpleKind::kLog, {1.0}, {}}); }, "one value per head");
  expect_error([] { validate(KerpleParams{KerpleKind::kLog, {}, {}}); }, "one value per head");
  expect_error([] { validate(KerpleParams{KerpleKind::kLog, {1.0, 0.0}, {1.0, 1.0}}); }, "r1 of head 1 is 0");
  expect_error([] { validate(KerpleParams{KerpleKind::kLog, {-2.0}, {1.0}}); }, "r1 of head 0 is -2");
  expect_error([] { validate(KerpleParams{KerpleKind::kLog, {1.0}, {-0.5}}); }, "r2 of head 0 is -0.5");
  expect_error([] { validate(KerpleParams{KerpleKind::kLog, {std::nan("")}, {1.0}}); }, "r1 of head 0 is nan");
  expect_error([] { validate(KerpleParams{KerpleKind::kPower, {1.0}, {2.5}}); }, "power variant expects 0 < r2 <= 2");
  expect_error([] { kerple_table(KerpleParams{KerpleKind::kPower, {1.0}, {2.0}}, 0); }, "table length 0");
  validate(KerpleParams{KerpleKind::kLog, {1.0}, {50.0}});  // the log variant has no upper bound
}

TEST(Sandwich, TableEqualsTheDoubleReferenceIsZeroAtZeroAndDecays) {
  const SandwichParams p{8, 128};
  const std::vector<float> table = sandwich_table(p, 4096);
  for (int h = 0; h < 8; ++h) {
    EXPECT_EQ(table[h * 4096], 0.0f);
    EXPECT_EQ(sandwich_bias_reference(p, h, 0), 0.0);
    for (const std::int64_t d : kDistances) {
      if (d > 0) expect_relative(table[h * 4096 + d], sandwich_bias_reference(p, h, d), "head " + std::to_string(h) + " d " + std::to_string(d));
    }
    EXPECT_EQ(sandwich_bias_reference(p, h, -5), sandwich_bias_reference(p, h, 5));
    // Head h is head 0 scaled by 1 / (h + 1) (H / (8 h), h = 1 .. H).
    EXPECT_NEAR(table[h * 4096 + 100] * (h + 1), table[100], 1e-6 * std::abs(table[100]));
  }
  // Below 0 at every other distance, but NOT monotone: the sum of cosines ripples. At d' = 128
  // it decreases for Delta <= 13 and first rises at 14 (the claim "decays monotonically" holds
  // only on average; the same in the double reference).
  for (std::int64_t d = 1; d < 4096; ++d) ASSERT_LT(table[d], 0.0f) << d;
  for (std::int64_t d = 1; d <= 13; ++d) ASSERT_LT(table[d], table[d - 1]) << d;
  EXPECT_GT(table[14], table[13]);
  EXPECT_GT(sandwich_bias_reference(p, 0, 14), sandwich_bias_reference(p, 0, 13));
}

TEST(Sandwich, OneFrequencyIsACosineByHand) {
  // d' = 2: the one frequency is 10000^(-1), so b_h(Delta) = (cos(Delta / 10000) - 1) * H / (8 h).
  const SandwichParams p{4, 2};
  const std::vector<float> table = sandwich_table(p, 2000);
  for (int h = 0; h < 4; ++h)
    for (const int d : {1, 10, 1999}) expect_relative(table[h * 2000 + d], (std::cos(d / 10000.0) - 1.0) * 4.0 / (8.0 * (h + 1)), "d' 2");
}

TEST(Sandwich, RefusesBadShapes) {
  expect_error([] { validate(SandwichParams{0, 128}); }, "heads 0 must be >= 1");
  expect_error([] { validate(SandwichParams{8, 127}); }, "dim d' 127 must be even");
  expect_error([] { validate(SandwichParams{8, 0}); }, "dim d' 0");
  expect_error([] { sandwich_bias_reference(SandwichParams{8, 16}, 8, 1); }, "head 8 must be in [0, 8)");
  expect_error([] { sandwich_table(SandwichParams{8, 16}, -1); }, "table length -1");
}

TEST(ForgetGate, CumulativeEqualsTheDoubleSumsAndItsDifferencesTheBias) {
  const ForgetGateShape s{2, 3, 300};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(3.0f, 2.0f);  // gates mostly near 1, as FoX initialises them
  std::vector<float> z(2 * 3 * 300), c(z.size());
  for (float& x : z) x = normal(rng);
  z[5] = -80.0f;  // a closed gate: log sigmoid(-80) = -80 without overflow
  z[6] = 80.0f;
  forget_gate_cumulative(z.data(), s, c.data());
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h) {
      const float* row = c.data() + (b * 3 + h) * 300;
      double sum = 0;
      for (int t = 0; t < 300; ++t) {
        sum += std::log(1.0 / (1.0 + std::exp(-static_cast<double>(z[(b * 3 + h) * 300 + t]))));
        expect_relative(row[t], sum, "c " + std::to_string(t));
        if (t > 0) {
          ASSERT_LE(row[t], row[t - 1]);  // log f < 0: c decreases, the bias is <= 0
        }
      }
      for (const auto& [i, j] : {std::pair{299, 0}, std::pair{150, 149}, std::pair{7, 7}, std::pair{200, 3}}) {
        const double ref = forget_gate_bias_reference(z.data(), s, b, h, i, j);
        // c is float32: the difference's error is ulp(|c|)-sized (forget_gate.h), not relative.
        EXPECT_NEAR(static_cast<double>(row[i]) - row[j], ref, 2e-7 * (std::abs(row[i]) + std::abs(row[j])) + 1e-12) << i << " " << j;
      }
    }
  EXPECT_NEAR(c[5] - c[4], -80.0, 1e-4);
}

TEST(ForgetGate, AConstantGateIsAlibiWithSlopeMinusLogGamma) {
  const float gamma = 0.97f;
  const float logit = std::log(gamma / (1.0f - gamma));
  const ForgetGateShape s{1, 1, 1000};
  std::vector<float> z(1000, logit), c(1000);
  forget_gate_cumulative(z.data(), s, c.data());
  const double slope = -std::log(1.0 / (1.0 + std::exp(-static_cast<double>(logit))));
  std::vector<float> alibi(1000, 0.0f);
  alibi_add_bias_row(slope, 999, 0, 1000, AlibiMode::kCausal, alibi.data());
  for (int j = 0; j < 1000; j += 37) EXPECT_NEAR(static_cast<double>(c[999]) - c[j], alibi[j], 2e-7 * std::abs(c[999]) * 2 + 1e-6) << j;
}

TEST(ForgetGate, BackwardEqualsFiniteDifferencesInDouble) {
  const ForgetGateShape s{1, 2, 40};
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> z(80), dc(80), dz(80);
  for (float& x : z) x = normal(rng);
  for (float& x : dc) x = normal(rng);
  forget_gate_cumulative_backward(z.data(), dc.data(), s, dz.data());
  // loss = sum_t dc_t c_t with c in double; central differences in double.
  const auto loss = [&](int at, double step) {
    double total = 0;
    for (int row = 0; row < 2; ++row) {
      double sum = 0;
      for (int t = 0; t < 40; ++t) {
        const double x = z[row * 40 + t] + (row * 40 + t == at ? step : 0.0);
        sum += -std::log1p(std::exp(-x));
        total += dc[row * 40 + t] * sum;
      }
    }
    return total;
  };
  for (int at = 0; at < 80; ++at) {
    const double numeric = (loss(at, 1e-6) - loss(at, -1e-6)) / 2e-6;
    EXPECT_NEAR(dz[at], numeric, 1e-6 * (1 + std::abs(numeric))) << at;
  }
}

TEST(ForgetGate, RefusesNonFiniteLogitsAndBadIndices) {
  std::vector<float> z(4, 1.0f), c(4);
  z[2] = std::numeric_limits<float>::infinity();
  expect_error([&] { forget_gate_cumulative(z.data(), ForgetGateShape{1, 1, 4}, c.data()); }, "logit 2 is inf");
  expect_error([&] { forget_gate_cumulative(z.data(), ForgetGateShape{1, -1, 4}, c.data()); }, "must not be negative");
  expect_error([&] { forget_gate_bias_reference(z.data(), ForgetGateShape{1, 1, 4}, 0, 0, 1, 2); }, "with j <= i");
}

TEST(DistanceTable, LayoutAndRefusals) {
  std::vector<float> values(2 * 7, 0.0f);
  const DistanceTable absolute{values.data(), 7, DistanceSide::kAbsolute}, signed_table{values.data(), 4, DistanceSide::kSigned};
  EXPECT_EQ(absolute.width(), 7);
  EXPECT_EQ(absolute.column(-6), 6);
  EXPECT_EQ(signed_table.width(), 7);
  EXPECT_EQ(signed_table.column(-3), 0);
  EXPECT_EQ(signed_table.column(0), 3);
  EXPECT_EQ(signed_table.column(3), 6);
  validate(absolute, 2, "table");
  values[9] = std::nanf("");
  expect_error([&] { validate(absolute, 2, "table"); }, "table value [1][2] is nan");
  expect_error([&] { validate(DistanceTable{nullptr, 7, DistanceSide::kAbsolute}, 2, "table"); }, "table has no values");
  expect_error([&] { validate(DistanceTable{values.data(), 0, DistanceSide::kAbsolute}, 2, "table"); }, "length 0 must be in [1, 2^31]");
}

// FIRE below its threshold L is a table over |i - j| (the normaliser is psi(L) for every such
// query): fire_table's entries are fire_bias at any query below L, keys before and after it;
// past L the bias moves (the normaliser grows), and fire_table_covers is strict at L.
TEST(Fire, BelowItsThresholdItIsATableOverTheDistance) {
  FireParams p;
  p.heads = 2, p.width = 3, p.c = 0.3, p.threshold = -10.0;  // L = |threshold|
  p.w1 = {0.5, -1.25, 2.0}, p.b1 = {0.1, 0.7, -0.4};
  p.w2 = {1.0, -0.5, 0.25, -2.0, 0.75, 1.5}, p.b2 = {0.2, -0.3};
  const std::vector<float> table = fire_table(p, 16);
  ASSERT_EQ(table.size(), 32u);
  for (std::int64_t i : {0, 3, 9})
    for (std::int64_t j = i - 15; j <= i + 15; ++j) {
      const std::vector<double> want = fire_bias(p, i, j);
      for (int h = 0; h < 2; ++h)
        expect_relative(table[static_cast<std::size_t>(h * 16 + std::llabs(i - j))], want[h],
                        "i " + std::to_string(i) + " j " + std::to_string(j) + " head " + std::to_string(h));
    }
  EXPECT_GT(std::abs(fire_bias(p, 15, 12)[0] - table[3]), 1e-3) << "past L the normaliser grows";
  EXPECT_TRUE(fire_table_covers(p, 9));
  EXPECT_FALSE(fire_table_covers(p, 10));
  expect_error([&] { fire_table(p, 0); }, "table length 0 must be >= 1");
  p.b2.pop_back();
  expect_error([&] { fire_table(p, 4); }, "b2 [2]");
}

}  // namespace
}  // namespace posenc
