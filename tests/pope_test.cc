// The core's PoPE (posenc/pope.h): rows of known values, the closed form and the dependence on
// m - n only, and the refusals. The libtorch module is checked against it in
// torch_rotary_schemes_test.cc; `posenc check` measures pope.closed_form and pope.relative live.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "posenc/error.h"
#include "posenc/pope.h"

namespace posenc {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

TEST(Pope, RowsAreSoftplusMagnitudesAtPhasesOfThePosition) {
  const PopeParams p{3, 100.0};
  const std::vector<double> w = pope_frequencies(p);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_DOUBLE_EQ(w[0], 1.0);
  EXPECT_NEAR(w[1], 1.0 / std::cbrt(100.0), 1e-15);  // 100^(-1/3)
  EXPECT_NEAR(w[2], 1.0 / std::pow(100.0, 2.0 / 3.0), 1e-15);
  const double x[3] = {0.0, 2.0, -30.0}, delta[3] = {-1.0, 0.5, -9.0};  // 0.5 and -9 clamp to 0 and -2 pi
  double out[6];
  pope_row(p, x, 0, nullptr, out);  // position 0, a query: phase 0
  EXPECT_DOUBLE_EQ(out[0], std::log(2.0));
  EXPECT_NEAR(out[1], std::log1p(std::exp(2.0)), 1e-15);
  EXPECT_NEAR(out[2], std::exp(-30.0), 1e-25);  // softplus of a very negative input: e^x, not 0
  EXPECT_EQ(out[3], 0.0);
  pope_row(p, x, 7, delta, out);  // a key at 7: phase 7 w_j + clamp(delta_j)
  const double phases[3] = {std::fmod(7 * w[0], kTwoPi) - 1.0, std::fmod(7 * w[1], kTwoPi), std::fmod(7 * w[2], kTwoPi) - kTwoPi};
  const double softplus[3] = {std::log(2.0), std::log1p(std::exp(2.0)), std::log1p(std::exp(-30.0))};
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(out[j], softplus[j] * std::cos(phases[j]), 1e-15) << j;
    EXPECT_NEAR(out[3 + j], softplus[j] * std::sin(phases[j]), 1e-15) << j;
  }
}

TEST(Pope, ScoresAreTheClosedFormAndDependOnTheDistanceOnly) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> phase(-8.0, 1.0);
  for (int dim : {1, 5, 64}) {
    const PopeParams p{dim, 10000.0};
    std::vector<double> q(static_cast<std::size_t>(dim)), k(q.size()), delta(q.size());
    for (std::size_t j = 0; j < q.size(); ++j) q[j] = normal(rng), k[j] = normal(rng), delta[j] = phase(rng);
    const auto row = [&](const std::vector<double>& x, std::int64_t position, const double* d) {
      std::vector<double> r(static_cast<std::size_t>(2 * dim));
      pope_row(p, x.data(), position, d, r.data());
      return r;
    };
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {12, 3}, {3, 12}, {1000000, 999000}}) {
      const double score = dot(row(q, m, nullptr), row(k, n, delta.data()));
      EXPECT_NEAR(score, pope_score(p, q.data(), m, k.data(), n, delta.data()), 1e-9 * (1 + std::fabs(score))) << dim << " " << m << " " << n;
      EXPECT_NEAR(score, dot(row(q, m + 5000, nullptr), row(k, n + 5000, delta.data())), 1e-9 * (1 + std::fabs(score)));
    }
    // Without the key's phase bias the score at distance 0 is sum softplus(q) softplus(k): every cos is 1.
    double aligned = 0;
    for (int j = 0; j < dim; ++j) aligned += std::log1p(std::exp(q[static_cast<std::size_t>(j)])) * std::log1p(std::exp(k[static_cast<std::size_t>(j)]));
    EXPECT_NEAR(dot(row(q, 77, nullptr), row(k, 77, nullptr)), aligned, 1e-12 * (1 + aligned)) << dim;
  }
}

TEST(Pope, BadInputIsAnErrorNamingIt) {
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  double x[2] = {0.5, 1.0}, out[4];
  EXPECT_NE(message([&] { pope_frequencies({0, 10000.0}); }).find("PoPE dim must be in [1, 65536], got 0"), std::string::npos);
  EXPECT_NE(message([&] { pope_frequencies({2, -1.0}); }).find("PoPE base must be a finite number > 0, got -1"), std::string::npos);
  EXPECT_NE(message([&] { pope_frequencies({2, NAN}); }).find("PoPE base"), std::string::npos);
  EXPECT_NE(message([&] { pope_row({2, 10.0}, x, -1, nullptr, out); }).find("PoPE position must be in [0, 2^31-1], got -1"),
            std::string::npos);
  EXPECT_NE(message([&] { pope_row({2, 10.0}, x, std::int64_t{1} << 31, nullptr, out); }).find("got 2147483648"), std::string::npos);
  x[1] = INFINITY;
  EXPECT_NE(message([&] { pope_row({2, 10.0}, x, 0, nullptr, out); }).find("PoPE input channel 1 is not finite"), std::string::npos);
  x[1] = 1.0;
  const double delta[2] = {0.0, NAN};
  EXPECT_NE(message([&] { pope_row({2, 10.0}, x, 0, delta, out); }).find("PoPE delta channel 1 is not finite"), std::string::npos);
}

}  // namespace
}  // namespace posenc
