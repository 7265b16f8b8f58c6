#include "bias_properties.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/fire.h"
#include "posenc/kerple.h"
#include "posenc/sandwich.h"

namespace posenc {
namespace {

constexpr int kHeads = 8;
constexpr std::int64_t kLength = 4096;  // distances the decay checks walk

// Steps b(Delta) >= b(Delta - 1) over a [heads][length] table, plus |b(0)| != 0 rows: 0 when every
// row starts at 0 and strictly decreases.
double rising_steps(const std::vector<float>& table, std::int64_t length) {
  double count = 0;
  for (std::size_t row = 0; row < table.size() / static_cast<std::size_t>(length); ++row) {
    const float* b = table.data() + row * static_cast<std::size_t>(length);
    count += b[0] != 0.0f;
    for (std::int64_t d = 1; d < length; ++d) count += b[d] >= b[d - 1];
  }
  return count;
}

// Random q, k, v of [1, tokens, kHeads, dim] and the largest |out(a) - out(b)| of two attention
// calls (the same inputs, two parameter sets).
struct KernelPair {
  KernelPair(int tokens, int dim, std::mt19937_64& rng)
      : tokens(tokens), dim(dim), q(static_cast<std::size_t>(tokens) * kHeads * dim), k(q.size()), v(q.size()), a(q.size()), b(q.size()) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto* x : {&q, &k, &v})
      for (float& e : *x) e = normal(rng);
  }
  double largest_difference(const AttentionParams& first, const AttentionParams& second) {
    const RopeShape shape{1, tokens, kHeads, dim};
    attention(bshd(q.data(), shape), bshd(k.data(), shape), bshd(v.data(), shape), bshd(a.data(), shape), first);
    attention(bshd(q.data(), shape), bshd(k.data(), shape), bshd(v.data(), shape), bshd(b.data(), shape), second);
    double worst = 0;
    for (std::size_t x = 0; x < a.size(); ++x) worst = std::max(worst, std::fabs(static_cast<double>(a[x]) - b[x]));
    return worst;
  }
  int tokens, dim;
  std::vector<float> q, k, v, a, b;
};

// The fused kernel with a distance table, positions 0.. against positions shift..: a bias of
// Delta alone gives the same output, bit for bit.
double shift_difference(const std::vector<float>& table, int dim, std::mt19937_64& rng) {
  KernelPair pair(200, std::min(dim, 128), rng);  // the claim does not depend on the head dim: keep `check` fast
  AttentionParams at0;
  at0.positions = AttentionPositions::kDistanceTable;
  at0.distance_table = {table.data(), kLength, DistanceSide::kAbsolute};
  at0.mask.causal = false;  // every pair, both signs of Delta
  AttentionParams shifted = at0;
  shifted.q_positions = shifted.k_positions = PositionIds::implicit(100000);
  return pair.largest_difference(at0, shifted);
}

}  // namespace

void append_bias_property_checks(const CheckOptions& o, std::mt19937_64& rng, std::vector<PropertyCheck>& out) {
  const std::vector<double> slopes = alibi_slopes(kHeads);
  const std::vector<float> log_table = kerple_table(KerpleParams{KerpleKind::kLog, std::vector<double>(kHeads, 1.0), slopes}, kLength);
  std::vector<double> exponents;
  for (int h = 0; h < kHeads; ++h) exponents.push_back(0.25 * (h + 1));  // 0.25 .. 2
  const std::vector<float> power_table = kerple_table(KerpleParams{KerpleKind::kPower, slopes, exponents}, kLength);
  out.push_back({"kerple.log.decay", "Kerple log (Chi et al. 2022): b(0) = 0, strictly decreasing in |Delta| to 4095 (count of other steps)",
                 rising_steps(log_table, kLength), 0});
  out.push_back({"kerple.power.decay", "Kerple power, r2 0.25..2: b(0) = 0, strictly decreasing in |Delta| to 4095 (count of other steps)",
                 rising_steps(power_table, kLength), 0});
  out.push_back({"kerple.shift", "fused attention with Kerple's table: positions + 100000 give the same output (a bias of Delta only)",
                 shift_difference(log_table, o.dim, rng), 0});

  const SandwichParams sandwich{kHeads, o.dim};
  const std::vector<float> sandwich_values = sandwich_table(sandwich, kLength);
  double at_zero = 0, peak = 0;
  for (int h = 0; h < kHeads; ++h) {
    const float* b = sandwich_values.data() + h * kLength;
    at_zero = std::max(at_zero, std::fabs(static_cast<double>(b[0])));
    for (std::int64_t d = 1; d < kLength; ++d) peak += b[d] >= b[0];
  }
  out.push_back({"sandwich.zero", "Sandwich (Chi et al. 2023): b(0) = 0 for every head (|b(0)|)", at_zero, 0});
  // Not "decays monotonically": the sum of cosines ripples (at d' = 128 it first rises at
  // |Delta| = 14); what holds is that no other distance reaches b(0).
  out.push_back({"sandwich.peak", "Sandwich: b(Delta) < b(0) for 0 < |Delta| < 4096 (count of others); not monotone: it ripples",
                 peak, 0});
  out.push_back({"sandwich.shift", "fused attention with Sandwich's table: positions + 100000 give the same output",
                 shift_difference(sandwich_values, o.dim, rng), 0});

  // FoX with gate gamma_h = exp(-slope_h): c_t = -(t + 1) slope_h, exact in float32 for ALiBi's
  // power-of-two slopes, so the kernel's scores are ALiBi's.
  KernelPair pair(300, std::min(o.dim, 128), rng);
  std::vector<float> c(static_cast<std::size_t>(kHeads) * 300);
  for (int h = 0; h < kHeads; ++h)
    for (int t = 0; t < 300; ++t) c[static_cast<std::size_t>(h) * 300 + t] = static_cast<float>(-(t + 1) * slopes[h]);
  AttentionParams alibi, fox;
  alibi.positions = AttentionPositions::kAlibi;
  alibi.alibi_slopes = slopes.data();
  fox.positions = AttentionPositions::kForgetGate;
  fox.gate_cumulative = c.data();
  out.push_back({"fox.alibi", "FoX (Lin et al. 2025) with a constant gate gamma: fused attention equals ALiBi's with slope -log gamma",
                 pair.largest_difference(fox, alibi), 0});

  // FIRE with random MLP weights, c 0.1, L 512: below L its normaliser is constant, so the bias
  // reads i - j alone; for causal pairs its input psi(i - j) / psi(max(L, i)) stays in [0, 1] at
  // any length (i - j <= i <= max(L, i)), the property its progressive interpolation rests on.
  FireParams fire;
  fire.heads = kHeads, fire.width = 32;
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto* v : {&fire.w1, &fire.b1}) v->resize(32);
  fire.w2.resize(32 * kHeads), fire.b2.resize(kHeads);
  for (auto* v : {&fire.w1, &fire.b1, &fire.w2, &fire.b2})
    for (double& x : *v) x = normal(rng);
  double shifted = 0, outside = 0;
  for (std::int64_t i = 0; i <= 400; i += 7)
    for (std::int64_t j = 0; j <= i; j += 3) {
      const std::vector<double> a = fire_bias(fire, i, j), b = fire_bias(fire, i + 111, j + 111);
      for (int h = 0; h < kHeads; ++h) shifted = std::max(shifted, std::fabs(a[h] - b[h]));
    }
  for (std::int64_t i = 1; i <= (std::int64_t{1} << 31) - 1; i = i * 3 + 1)
    for (std::int64_t j : {std::int64_t{0}, i / 2, i - 1, i}) {
      const double x = fire_input(fire, i, j);
      outside += x < 0 || x > 1;
    }
  out.push_back({"fire.shift", "FIRE (Li et al. 2023) below its threshold L = 512: b(i, j) = b(i + 111, j + 111), a bias of i - j alone",
                 shifted, 0});
  out.push_back({"fire.unit", "FIRE: causal inputs psi(i - j) / psi(max(L, i)) lie in [0, 1] for queries to 2^31 (count outside)",
                 outside, 0});
}

}  // namespace posenc
