#include "posenc/properties.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bias_properties.h"
#include "posenc/alibi.h"
#include "posenc/axial_rope.h"
#include "posenc/error.h"
#include "posenc/mrope.h"
#include "posenc/pope.h"
#include "posenc/rope_apply.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc/transformer_xl.h"

namespace posenc {
namespace {

std::vector<float> random_vector(std::mt19937_64& rng, std::size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

double dot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// One head of one token rotated to `position` (half-split, accurate angles).
std::vector<float> rotated(const std::vector<float>& x, std::int64_t position, const RopeSchedule& s, int direction = 1) {
  std::vector<float> out = x;
  RopeApplyParams p = rope_apply_params(s);
  p.direction = direction;
  rope_apply_reference(bshd(out.data(), {1, 1, 1, static_cast<int>(out.size())}), {&position, 1, 0}, p);
  return out;
}

RopeSchedule default_schedule(int dim) {
  RopeParams p;
  p.head_dim = dim;
  return compute_schedule(p);
}

// Two independent 64-bit hashes of a row's bytes (FNV-1a with two offset bases): a false match
// between two different rows needs both to collide, ~2^-128 per pair.
std::pair<std::uint64_t, std::uint64_t> row_hash(const float* row, int dim) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(row);
  std::uint64_t a = 14695981039346656037ull, b = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i < sizeof(float) * static_cast<std::size_t>(dim); ++i) {
    a = (a ^ bytes[i]) * 1099511628211ull;
    b = (b ^ bytes[i]) * 0x100000001b3ull + (b >> 29);
  }
  return {a, b};
}

PropertyCheck sinusoidal_bounded_and_unique(const CheckOptions& o, PropertyCheck* unique) {
  const SinusoidalParams p{o.dim, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, 10000.0};
  PropertyCheck bounded{"sinusoidal.bounded", "every value of PE(p) lies in [-1, 1], p < " + std::to_string(o.positions), 0, 0};
  // Streamed in chunks; only a 16-byte fingerprint per row is kept (positions x dim floats
  // would be 320 GB at the limits), then sorted to count repeats.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> rows;
  rows.reserve(static_cast<std::size_t>(o.positions));
  const std::int64_t chunk = 4096;
  for (std::int64_t start = 0; start < o.positions; start += chunk) {
    const std::int64_t n = std::min(chunk, o.positions - start);
    const auto table = sinusoidal_table_by_rotation(p, start, n);
    for (float v : table) bounded.measured = std::max(bounded.measured, std::fabs(static_cast<double>(v)) - 1.0);
    for (std::int64_t r = 0; r < n; ++r) rows.push_back(row_hash(table.data() + r * o.dim, o.dim));
  }
  std::sort(rows.begin(), rows.end());
  const auto duplicates = static_cast<std::int64_t>(rows.size()) -
                          static_cast<std::int64_t>(std::unique(rows.begin(), rows.end()) - rows.begin());
  bounded.measured = std::max(bounded.measured, 0.0);
  *unique = {"sinusoidal.unique", "no two positions < " + std::to_string(o.positions) + " share a float32 row (count of repeats)",
             static_cast<double>(duplicates), 0};
  return bounded;
}

PropertyCheck sinusoidal_rotation_identity(const CheckOptions& o) {
  // PE(p+k) = R(k) PE(p): each (sin, cos) pair of frequency w turns by the angle k w.
  const SinusoidalParams p{o.dim, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, 10000.0};
  const auto w = sinusoidal_frequencies(p);
  double worst = 0;
  for (std::int64_t pos : {0, 7, 1000, 65000}) {
    for (std::int64_t k : {1, 13, 500, 30000}) {
      const auto a = sinusoidal_table(p, {pos, pos + k});
      for (std::size_t j = 0; j < w.size(); ++j) {
        const double s = a[2 * j], c = a[2 * j + 1];
        const double rs = s * std::cos(k * w[j]) + c * std::sin(k * w[j]);
        const double rc = c * std::cos(k * w[j]) - s * std::sin(k * w[j]);
        worst = std::max({worst, std::fabs(rs - a[o.dim + 2 * j]), std::fabs(rc - a[o.dim + 2 * j + 1])});
      }
    }
  }
  return {"sinusoidal.rotation", "PE(p+k) = R(k) PE(p), a linear map that depends only on k", worst, 1e-6};
}

PropertyCheck sinusoidal_by_rotation(const CheckOptions& o) {
  const SinusoidalParams p{o.dim, SinusoidalLayout::kHalves, SinusoidalFreqs::kVaswani, 10000.0};
  const std::int64_t start = 1000000, n = 5000;
  std::vector<std::int64_t> positions(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) positions[static_cast<std::size_t>(i)] = start + i;
  const auto direct = sinusoidal_table(p, positions);
  const auto rolled = sinusoidal_table_by_rotation(p, start, n);
  double worst = 0;
  for (std::size_t i = 0; i < direct.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(direct[i]) - rolled[i]));
  return {"sinusoidal.generated", "the table generated by rotation matches direct evaluation", worst, 1e-6};
}

PropertyCheck rope_relative(const CheckOptions& o, std::mt19937_64& rng) {
  const RopeSchedule s = default_schedule(o.dim);
  double worst = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const auto q = random_vector(rng, static_cast<std::size_t>(o.dim)), k = random_vector(rng, static_cast<std::size_t>(o.dim));
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{5, 2}, {100, 0}, {37, 4000}, {9000, 8999}}) {
      const double base = dot(rotated(q, m, s).data(), rotated(k, n, s).data(), o.dim);
      const double shifted = dot(rotated(q, m + 1000, s).data(), rotated(k, n + 1000, s).data(), o.dim);
      worst = std::max(worst, std::fabs(base - shifted));
    }
  }
  return {"rope.relative", "<RoPE(q, m), RoPE(k, n)> depends only on m - n (both shifted by 1000)", worst, 1e-4};
}

// Clipped RoPE (Li et al. 2026): clipping n = 0 frequencies is the identity, bit for bit: the
// rotations of a schedule with clip_low 0 equal those by RoFormer's 1/10000^(2i/d), written out
// here (the formula, not the schedule's code), at several positions (allowed difference: 0).
PropertyCheck rope_clip_identity(const CheckOptions& o, std::mt19937_64& rng) {
  RopeParams clipped;
  clipped.head_dim = o.dim;
  clipped.clip_low = 0;
  clipped.clip_hard = true;  // n = 0 clips nothing, hard or soft
  const RopeSchedule none_clipped = compute_schedule(clipped);
  RopeSchedule roformer = none_clipped;
  for (int i = 0; i < o.dim / 2; ++i)
    roformer.inv_freq[static_cast<std::size_t>(i)] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / o.dim));
  const auto q = random_vector(rng, static_cast<std::size_t>(o.dim));
  double worst = 0;
  for (std::int64_t pos : {0, 1, 4095, 131071}) {
    const auto a = rotated(q, pos, roformer), b = rotated(q, pos, none_clipped);
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return {"rope.clip_identity", "clipped RoPE with clip_low 0 rotates exactly as RoFormer's 1/10000^(2i/d)", worst, 0};
}

// xPos (Sun et al. 2022, rope_xpos.h): <xPos_q(q, m), xPos_k(k, n)> depends only on m - n
// (both shifted by 1000, and the centre moved: it cancels).
PropertyCheck xpos_relative(const CheckOptions& o, std::mt19937_64& rng) {
  const RopeSchedule s = default_schedule(o.dim);
  const auto scaled = [&](const std::vector<float>& x, std::int64_t position, XPosRole role, double center) {
    std::vector<float> out = x;
    RopeApplyParams p = rope_apply_params(s);
    p.xpos.scale_base = 512;
    p.xpos.center = center;
    p.xpos.first = role;
    rope_apply_reference(bshd(out.data(), {1, 1, 1, static_cast<int>(out.size())}), {&position, 1, 0}, p);
    return out;
  };
  double worst = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const auto q = random_vector(rng, static_cast<std::size_t>(o.dim)), k = random_vector(rng, static_cast<std::size_t>(o.dim));
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{5, 2}, {100, 0}, {37, 4000}, {9000, 8999}}) {
      const double base = dot(scaled(q, m, XPosRole::kQuery, 2048).data(), scaled(k, n, XPosRole::kKey, 2048).data(), o.dim);
      const double shifted =
          dot(scaled(q, m + 1000, XPosRole::kQuery, 0).data(), scaled(k, n + 1000, XPosRole::kKey, 0).data(), o.dim);
      worst = std::max(worst, std::fabs(base - shifted) / (1 + std::fabs(base)));
    }
  }
  return {"xpos.relative", "<xPos(q, m), xPos(k, n)> depends only on m - n (shifted by 1000, centre moved), relative", worst, 1e-4};
}

// PoPE (pope.h): a query's row at m against a key's at n, dotted as real vectors, equals the closed
// form sum_j softplus(q_j) softplus(k_j) cos((m - n) w_j - delta_j), and is the same at m + 1000,
// n + 1000 (a function of m - n only). Random q, k, and delta partly outside [-2 pi, 0] (clamped).
void pope_claims(const CheckOptions& o, std::mt19937_64& rng, std::vector<PropertyCheck>& out) {
  const PopeParams p{o.dim, 10000.0};
  std::uniform_real_distribution<double> phase(-8.0, 1.0);
  const auto row = [&](const std::vector<float>& x, std::int64_t position, const double* delta) {
    const std::vector<double> xd(x.begin(), x.end());
    std::vector<double> r(static_cast<std::size_t>(2 * o.dim));
    pope_row(p, xd.data(), position, delta, r.data());
    return r;
  };
  const auto dot2 = [](const std::vector<double>& a, const std::vector<double>& b) {
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
    return sum;
  };
  double closed = 0, shifted = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const auto q = random_vector(rng, static_cast<std::size_t>(o.dim)), k = random_vector(rng, static_cast<std::size_t>(o.dim));
    std::vector<double> delta(static_cast<std::size_t>(o.dim));
    for (double& d : delta) d = phase(rng);
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{5, 2}, {100, 0}, {37, 4000}, {9000, 8999}}) {
      const double score = dot2(row(q, m, nullptr), row(k, n, delta.data()));
      const std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end());
      const double form = pope_score(p, qd.data(), m, kd.data(), n, delta.data());
      closed = std::max(closed, std::fabs(score - form) / (1 + std::fabs(form)));
      const double later = dot2(row(q, m + 1000, nullptr), row(k, n + 1000, delta.data()));
      shifted = std::max(shifted, std::fabs(score - later) / (1 + std::fabs(score)));
    }
  }
  out.push_back({"pope.closed_form", "PoPE's rows dotted equal sum_j softplus(q_j) softplus(k_j) cos((m - n) w_j - delta_j), relative",
                 closed, 1e-9});
  out.push_back({"pope.relative", "<PoPE_q(q, m), PoPE_k(k, n)> depends only on m - n (shifted by 1000), relative", shifted, 1e-9});
}

// Axial RoPE (axial_rope.h) with one axis is 1-D RoPE: the angle table of integer coordinates
// rotates as rope_apply_reference at those positions, bit for bit.
PropertyCheck axial_one_axis(const CheckOptions& o, std::mt19937_64& rng) {
  AxialRopeParams axial;
  axial.axes = 1;
  axial.axis_dim = o.dim;
  const std::vector<std::int64_t> positions = {0, 1, 4095, 131071};
  const auto angles = axial_angles(axial, std::vector<double>(positions.begin(), positions.end()));
  const int tokens = static_cast<int>(positions.size());
  std::vector<float> x = random_vector(rng, static_cast<std::size_t>(tokens * o.dim)), want = x;
  rope_apply_reference(bshd(want.data(), {1, tokens, 1, o.dim}), PositionIds::explicit_ids(positions.data()),
                       rope_apply_params(default_schedule(o.dim)));
  rope_apply_angles(bshd(x.data(), {1, tokens, 1, o.dim}), angles, o.dim / 2, RopeLayout::kHalfSplit);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - want[i]));
  return {"axial.one_axis", "axial RoPE with one axis rotates exactly as 1-D RoPE", worst, 0};
}

PropertyCheck rope_inverse(const CheckOptions& o, std::mt19937_64& rng) {
  const RopeSchedule s = default_schedule(o.dim);
  double worst = 0;
  for (std::int64_t pos : {0, 1, 4095, 131071, 2147483647}) {
    const auto x = random_vector(rng, static_cast<std::size_t>(o.dim));
    const auto back = rotated(rotated(x, pos, s), pos, s, -1);
    for (int i = 0; i < o.dim; ++i) worst = std::max(worst, std::fabs(static_cast<double>(back[i]) - x[i]));
  }
  return {"rope.inverse", "rotating forward then with direction -1 returns the input", worst, 1e-5};
}

PropertyCheck rope_decay(const CheckOptions& o) {
  // Mean of the bound over each octave of distance [2^k, 2^(k+1)), k = 0..10: it must never
  // grow from one octave to the next. (It flattens beyond ~4096 and, with few frequencies,
  // d < 32, it does not decay monotonically: the claim needs many frequencies.)
  const RopeSchedule s = default_schedule(o.dim);
  double previous = 0, worst = 0;
  for (int k = 0; k <= 10; ++k) {
    const int from = 1 << k, to = 2 << k;
    double sum = 0;
    for (int r = from; r < to; ++r) sum += rope_decay_bound(s.inv_freq, r);
    const double mean = sum / (to - from);
    if (k > 0) worst = std::max(worst, mean / previous);
    previous = mean;
  }
  return {"rope.decay", "RoFormer's upper bound decays with distance: largest ratio of successive octave means, 1..2047",
          worst, 1.0};
}

PropertyCheck mrope_reduces_to_rope(const CheckOptions& o, std::mt19937_64& rng) {
  const int dim = 16 * std::max(1, o.dim / 16);
  const RopeSchedule s = default_schedule(dim);
  const int half = dim / 2;
  const auto axis = mrope_axis_map({half / 4, half / 4 + half % 4 / 2, half - half / 4 - (half / 4 + half % 4 / 2)}, false);
  const auto x = random_vector(rng, static_cast<std::size_t>(dim));
  const std::int64_t ids[3] = {777, 777, 777};
  auto m = x;
  RopeApplyParams p = rope_apply_params(s);
  p.axis_of_freq = axis.data();
  rope_apply_reference(bshd(m.data(), {1, 1, 1, dim}), {ids, 3, 1}, p);
  const auto one = rotated(x, 777, s);
  double worst = 0;
  for (int i = 0; i < dim; ++i) worst = std::max(worst, std::fabs(static_cast<double>(m[i]) - one[i]));
  return {"mrope.text", "M-RoPE with equal T, H, W ids is 1-D RoPE", worst, 0};
}

PropertyCheck alibi_translation(const CheckOptions&) {
  double worst = 0;
  for (double slope : alibi_slopes(12)) {
    for (std::int64_t shift : {1, 100, 100000}) {
      for (auto mode : {AlibiMode::kCausal, AlibiMode::kSymmetric}) {
        std::vector<float> a(64, 0.0f), b(64, 0.0f);
        alibi_add_bias_row(slope, 40, 0, 64, mode, a.data());
        alibi_add_bias_row(slope, 40 + shift, shift, 64, mode, b.data());
        for (int j = 0; j < 64; ++j) worst = std::max(worst, std::fabs(static_cast<double>(a[j]) - b[j]));
      }
    }
  }
  return {"alibi.translation", "ALiBi bias(i + s, j + s) = bias(i, j)", worst, 0};
}

PropertyCheck t5_translation(const CheckOptions&) {
  // A decode step at past = s reads the same biases as row s of a full pass.
  const T5BucketParams p{32, 128, false};
  const int heads = 3, len = 200;
  std::vector<float> table(32 * heads);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.25f - 7.0f;
  const auto full = t5_compute_bias(table, heads, len, len, 0, p);
  double worst = 0;
  for (int past : {1, 57, 199}) {
    const auto step = t5_compute_bias(table, heads, 1, len, past, p);
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < len; ++j)
        worst = std::max(worst, std::fabs(static_cast<double>(step[static_cast<std::size_t>(h) * len + j]) -
                                          full[(static_cast<std::size_t>(h) * len + past) * len + j]));
  }
  return {"t5.translation", "T5 bias depends only on key - query (decode step = row of the full pass)", worst, 0};
}

PropertyCheck xl_rel_shift_agrees(const CheckOptions& o, std::mt19937_64& rng) {
  const int d = std::max(o.dim / 4, 2), qlen = 5, mlen = 3, klen = qlen + mlen;
  const auto q = random_vector(rng, static_cast<std::size_t>(qlen * d)), k = random_vector(rng, static_cast<std::size_t>(klen * d));
  const auto r = random_vector(rng, static_cast<std::size_t>(klen * d)), u = random_vector(rng, static_cast<std::size_t>(d)),
             v = random_vector(rng, static_cast<std::size_t>(d));
  const auto scores = xl_scores({q.data(), k.data(), r.data(), u.data(), v.data(), qlen, mlen, d});
  // HF's way: BD_raw[i][m] = (q_i + v) . r_m for every m, then rel_shift.
  std::vector<float> bd_raw(static_cast<std::size_t>(qlen * klen));
  for (int i = 0; i < qlen; ++i)
    for (int m = 0; m < klen; ++m) {
      double s = 0;
      for (int c = 0; c < d; ++c) s += (static_cast<double>(q[i * d + c]) + v[c]) * r[m * d + c];
      bd_raw[static_cast<std::size_t>(i * klen + m)] = static_cast<float>(s);
    }
  const auto bd = xl_rel_shift(bd_raw, qlen, klen);
  double worst = 0;
  for (int i = 0; i < qlen; ++i)
    for (int j = 0; j <= i + mlen; ++j) {
      const double ac = dot(q.data() + i * d, k.data() + j * d, d) + dot(u.data(), k.data() + j * d, d);
      const double hf = (ac + bd[static_cast<std::size_t>(i * klen + j)]) / std::sqrt(static_cast<double>(d));
      worst = std::max(worst, std::fabs(hf - scores[static_cast<std::size_t>(i * klen + j)]));
    }
  return {"xl.rel_shift", "Transformer-XL scores by distance equal HF's rel_shift assembly", worst, 1e-5};
}

}  // namespace

double rope_decay_bound(const std::vector<float>& inv_freq, double distance) {
  std::complex<double> partial(0, 0);
  double sum = 0;
  for (float w : inv_freq) {
    partial += std::polar(1.0, distance * w);
    sum += std::abs(partial);
  }
  return sum / static_cast<double>(inv_freq.size());
}

std::vector<PropertyCheck> run_property_checks(const CheckOptions& o) {
  if (o.dim < 4 || o.dim % 2 != 0 || o.dim > 8192)
    throw Error("check dim must be even and in [4, 8192], got " + std::to_string(o.dim));
  if (o.positions < 2 || o.positions > 10000000)
    throw Error("check positions must be in [2, 10^7], got " + std::to_string(o.positions));
  if (o.positions * o.dim > kMaxCheckValues)
    throw Error("check positions x dim = " + std::to_string(o.positions) + " x " + std::to_string(o.dim) + " = " +
                std::to_string(o.positions * o.dim) + " values is more than the limit of " + std::to_string(kMaxCheckValues) +
                " (2^28: a few seconds); lower --positions or --dim");
  std::mt19937_64 rng(o.seed);
  std::vector<PropertyCheck> out;
  PropertyCheck unique;
  out.push_back(sinusoidal_bounded_and_unique(o, &unique));
  out.push_back(unique);
  out.push_back(sinusoidal_rotation_identity(o));
  out.push_back(sinusoidal_by_rotation(o));
  out.push_back(rope_relative(o, rng));
  out.push_back(rope_inverse(o, rng));
  out.push_back(rope_clip_identity(o, rng));
  out.push_back(xpos_relative(o, rng));
  pope_claims(o, rng, out);
  out.push_back(axial_one_axis(o, rng));
  out.push_back(rope_decay(o));
  out.push_back(mrope_reduces_to_rope(o, rng));
  out.push_back(alibi_translation(o));
  out.push_back(t5_translation(o));
  out.push_back(xl_rel_shift_agrees(o, rng));
  append_bias_property_checks(o, rng, out);
  return out;
}

}  // namespace posenc
