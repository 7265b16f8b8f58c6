// Remapped RoPE distances in fused attention (Self-Extend, ReRoPE, leaky ReRoPE): the tiled kernel
// and the core's reference against a double reference that builds the remapped distance matrix
// explicitly from the papers' formulas and rotates by it (q.R(d)k, no factorisation into query
// and key positions), for every mask, dtype and SIMD target; the remaps' plain-RoPE limits bit
// for bit; gapped ids per batch row; decode equal to the matching prefill row; threads that do
// not change bits; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/error.h"

#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

// The remapped distance of (query position i, key position j), from the papers (not the core's
// factorised far positions): Self-Extend (Jin et al. 2024), ReRoPE and leaky ReRoPE (Su 2023).
double paper_distance(const PositionRemap& r, std::int64_t i, std::int64_t j) {
  const std::int64_t d = i - j;
  if (r.kind == PositionRemapKind::kNone || d < r.window) return static_cast<double>(d);
  switch (r.kind) {
    case PositionRemapKind::kSelfExtend: return static_cast<double>(i / r.group - j / r.group + (r.window - r.window / r.group));
    case PositionRemapKind::kReRope: return static_cast<double>(r.window);
    case PositionRemapKind::kLeakyReRope: return static_cast<double>(r.window) + static_cast<double>(d - r.window) / r.leak;
    case PositionRemapKind::kNone: break;
  }
  return static_cast<double>(d);
}

// softmax(scale * q.R(d_ij) k + mask) v in double, [B, S, Hq, D], with d_ij = paper_distance of
// the positions: per rotation pair (a, b) of frequency w, m^2 ((qa ka + qb kb) cos(d w) +
// (qa kb - qb ka) sin(d w)) (m the attention factor), the channels past the rotary dim plain.
std::vector<double> distance_matrix_reference(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const AttentionParams& p) {
  const int B = q.batch, S = q.tokens, T = k.tokens, H = q.heads, D = q.head_dim, group = q.heads / k.heads;
  const int half = p.rope.num_freqs;
  const bool interleaved = p.rope.layout != RopeLayout::kHalfSplit;
  const std::int64_t past = p.mask.past >= 0 ? p.mask.past : T - S;
  const double scale = p.scale > 0 ? p.scale : 1 / std::sqrt(static_cast<double>(D)), m2 = p.rope.attention_factor * p.rope.attention_factor;
  std::map<double, std::vector<double>> angles;  // distance -> cos[half], sin[half]
  const auto cos_sin = [&](double d) -> const std::vector<double>& {
    auto [it, fresh] = angles.try_emplace(d);
    if (fresh)
      for (int f = 0; f < 2 * half; ++f) {
        const double a = d * static_cast<double>(p.rope.inv_freq[f % half]);
        it->second.push_back(f < half ? std::cos(a) : std::sin(a));
      }
    return it->second;
  };
  std::vector<double> out(static_cast<std::size_t>(B) * S * H * D, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < S; ++i) {
        const std::int64_t pos = past + i, qpos = p.q_positions.at(0, b, i, S);
        std::vector<double> s(static_cast<std::size_t>(T), -std::numeric_limits<double>::infinity());
        double best = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < T; ++j) {
          bool ok = !(p.mask.causal && j > pos);
          ok = ok && !(p.mask.key_padding && !p.mask.key_padding[b * T + j]);
          ok = ok && !(p.mask.sliding_window > 0 && pos - j >= p.mask.sliding_window);
          ok = ok && !(p.mask.chunk > 0 && j / p.mask.chunk != pos / p.mask.chunk);
          if (!ok) continue;
          const std::vector<double>& cs = cos_sin(paper_distance(p.remap, qpos, p.k_positions.at(0, b, j, T)));
          double dot = 0;
          for (int f = 0; f < half; ++f) {
            const int ia = interleaved ? 2 * f : f, ib = interleaved ? 2 * f + 1 : f + half;
            const double qa = at(q, b, i, h, ia), qb = at(q, b, i, h, ib);
            const double ka = at(k, b, j, h / group, ia), kb = at(k, b, j, h / group, ib);
            dot += m2 * ((qa * ka + qb * kb) * cs[f] + (qa * kb - qb * ka) * cs[half + f]);
          }
          for (int c = 2 * half; c < D; ++c) dot += double{at(q, b, i, h, c)} * at(k, b, j, h / group, c);
          s[j] = dot * scale;
          best = std::max(best, s[j]);
        }
        double total = 0;
        for (int j = 0; j < T; ++j) total += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - best);
        for (int j = 0; j < T && total > 0; ++j)
          if (!std::isinf(s[j]))
            for (int c = 0; c < D; ++c)
              out[((static_cast<std::size_t>(b) * S + i) * H + h) * D + c] += std::exp(s[j] - best) / total * at(v, b, j, h / group, c);
      }
  return out;
}

double worst_vs(const std::vector<double>& ref, const RopeTensor& o) {
  double worst = 0;
  for (int b = 0; b < o.batch; ++b)
    for (int i = 0; i < o.tokens; ++i)
      for (int h = 0; h < o.heads; ++h)
        for (int c = 0; c < o.head_dim; ++c)
          worst = std::max(worst, std::abs(ref[((static_cast<std::size_t>(b) * o.tokens + i) * o.heads + h) * o.head_dim + c] - at(o, b, i, h, c)));
  return worst;
}

PositionRemap remap_of(PositionRemapKind kind, std::int64_t window, std::int64_t group = 1, double leak = 0) {
  PositionRemap r;
  r.kind = kind;
  r.window = window;
  r.group = group;
  r.leak = leak;
  return r;
}

const PositionRemap kRemaps[] = {remap_of(PositionRemapKind::kSelfExtend, 24, 4), remap_of(PositionRemapKind::kSelfExtend, 19, 3),
                                 remap_of(PositionRemapKind::kReRope, 32), remap_of(PositionRemapKind::kLeakyReRope, 16, 1, 5.5)};

// RoPE attention inputs: plain schedule over D (interleaved pairs when asked), positions 7 + index.
AttentionParams rope_params(const RopeSchedule& sched, BiasInputs& setup, int Hq, int B, int S, int T, std::mt19937& rng,
                            RopeLayout layout = RopeLayout::kHalfSplit) {
  AttentionParams p = params_for(AttentionPositions::kRope, setup, Hq, B, T, rng);
  p.rope = rope_apply_params(sched, layout);
  p.q_positions.offset = 7 + T - S;
  p.k_positions.offset = 7;
  return p;
}

TEST(AttentionRemap, EqualsTheDistanceMatrixReferenceForEveryMaskDtypeAndTarget) {
  std::mt19937 rng(21);
  const int B = 2, Hq = 4, Hk = 2, D = 40;
  RopeParams rp = testing::yarn_params(4.0, 64);  // an attention factor, a partial rotary dim
  rp.head_dim = D;
  rp.partial_rotary_factor = 0.8;
  const RopeSchedule sched = compute_schedule(rp);
  double worst_tiled = 0, worst_reference = 0;
  int cases = 0, runs = 0;
  // prefill across two query tiles, decode after a cache, a chunk of queries after a cache
  for (const auto& [S, T] : {std::pair{200, 200}, std::pair{1, 300}, std::pair{33, 300}})
    for (const PositionRemap& remap : kRemaps)
      for (int mask = 0; mask < 5; ++mask)  // causal, bidirectional, padding, sliding window, chunked
        for (DType dtype : {DType::kF32, DType::kBF16}) {
          SCOPED_TRACE("S " + std::to_string(S) + " T " + std::to_string(T) + " " + to_string(remap.kind) + " w " +
                       std::to_string(remap.window) + " mask " + std::to_string(mask) + " " + to_string(dtype));
          BiasInputs setup;
          AttentionParams p = rope_params(sched, setup, Hq, B, S, T, rng, cases % 3 == 2 ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit);
          p.remap = remap;
          p.mask.causal = mask != 1;
          if (mask == 2) {
            for (int j = 0; j < 20; ++j) setup.padding[j] = 0;
            for (int j = 0; j < T; ++j) setup.padding[T + j] = j % 3 != 1;
            p.mask.key_padding = setup.padding.data();
          }
          if (mask == 3) p.mask.sliding_window = 70;  // wider than w: both branches inside it
          if (mask == 4) p.mask.chunk = 64;
          Tensor4 q = make(dtype, B, S, Hq, D, cases % 2, &rng), k = make(dtype, B, T, Hk, D, false, &rng),
                  v = make(dtype, B, T, Hk, D, true, &rng), ref = make(DType::kF32, B, S, Hq, D, false, nullptr);
          const std::vector<double> expected = distance_matrix_reference(q.view, k.view, v.view, p);
          attention_reference(q.view, k.view, v.view, ref.view, p);
          worst_reference = std::max(worst_reference, worst_vs(expected, ref.view));
          on_every_target([&] {
            Tensor4 out = make(DType::kF32, B, S, Hq, D, true, nullptr);
            AttentionOptions options;
            options.threads = 2;
            attention(q.view, k.view, v.view, out.view, p, options);
            worst_tiled = std::max(worst_tiled, worst_vs(expected, out.view));
            EXPECT_LE(worst_vs(expected, out.view), 1e-5);
            ++runs;
          });
          ++cases;
        }
  std::printf("attention remap: %d cases, %d tiled runs; worst |out - distance-matrix reference|: tiled %.2g, core reference %.2g\n",
              cases, runs, worst_tiled, worst_reference);
  EXPECT_EQ(cases, 3 * 4 * 5 * 2);
  EXPECT_LE(worst_reference, 2e-6);
}

TEST(AttentionRemap, PlainLimitsGivePlainRopesBits) {
  // Self-Extend G = 1, ReRoPE with w beyond every distance, leaky k = 1: plain RoPE, bit for bit.
  std::mt19937 rng(22);
  const int B = 1, S = 200, T = 200, Hq = 2, Hk = 1, D = 64;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (const PositionRemap& remap : {remap_of(PositionRemapKind::kSelfExtend, 24, 1), remap_of(PositionRemapKind::kReRope, 1000),
                                     remap_of(PositionRemapKind::kLeakyReRope, 24, 1, 1.0)})
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(to_string(remap.kind)) + " " + to_string(dtype));
      BiasInputs setup;
      AttentionParams p = rope_params(sched, setup, Hq, B, S, T, rng);
      Tensor4 q = make(dtype, B, S, Hq, D, false, &rng), k = make(dtype, B, T, Hk, D, false, &rng),
              v = make(dtype, B, T, Hk, D, false, &rng), plain = make(dtype, B, S, Hq, D, false, nullptr),
              remapped = make(dtype, B, S, Hq, D, false, nullptr);
      AttentionOptions f32_kernel;  // a remap runs on the f32 kernel (attention_bf16.h): plain RoPE there too
      f32_kernel.bf16_dot_products = false;
      attention(q.view, k.view, v.view, plain.view, p, f32_kernel);
      p.remap = remap;
      attention(q.view, k.view, v.view, remapped.view, p, f32_kernel);
      EXPECT_EQ(plain.bytes, remapped.bytes);
    }
}

// q's token t alone, as a decode step sees it.
RopeTensor token_of(const RopeTensor& x, int t) {
  RopeTensor one = x;
  one.data = static_cast<std::uint8_t*>(x.data) + t * x.token_stride * dtype_size(x.dtype);
  one.tokens = 1;
  return one;
}

TEST(AttentionRemap, DecodeEqualsThePrefillRowAndThreadsDoNotChangeBits) {
  std::mt19937 rng(23);
  const int B = 1, T = 300, Hq = 4, Hk = 2, D = 64;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (const PositionRemap& remap : kRemaps) {
    SCOPED_TRACE(std::string(to_string(remap.kind)) + " w " + std::to_string(remap.window));
    BiasInputs setup;
    AttentionParams p = rope_params(sched, setup, Hq, B, T, T, rng);
    p.remap = remap;
    Tensor4 q = make(DType::kF32, B, T, Hq, D, false, &rng), k = make(DType::kF32, B, T, Hk, D, false, &rng),
            v = make(DType::kF32, B, T, Hk, D, false, &rng), one = make(DType::kF32, B, T, Hq, D, false, nullptr),
            three = make(DType::kF32, B, T, Hq, D, false, nullptr);
    AttentionOptions options;
    options.threads = 1;
    attention(q.view, k.view, v.view, one.view, p, options);
    options.threads = 3;  // 12 tasks (4 heads x 3 query tiles): no key split, the same bits
    attention(q.view, k.view, v.view, three.view, p, options);
    EXPECT_EQ(one.bytes, three.bytes);
    for (const int i : {150, 299}) {  // the cache holds keys 0 .. i
      AttentionParams step = p;
      step.q_positions.offset = 7 + i;
      RopeTensor kc = k.view, vc = v.view;
      kc.tokens = vc.tokens = i + 1;
      for (const int threads : {1, 8}) {  // 8 threads on 4 tasks: the keys split in two, merged after
        Tensor4 out = make(DType::kF32, B, 1, Hq, D, false, nullptr);
        options.threads = threads;
        attention(token_of(q.view, i), kc, vc, out.view, step, options);
        double worst = 0;
        for (int h = 0; h < Hq; ++h)
          for (int c = 0; c < D; ++c) {
            const float a = at(out.view, 0, 0, h, c), b = at(one.view, 0, i, h, c);
            if (threads == 1) {
              ASSERT_EQ(a, b) << "row " << i << " head " << h << " channel " << c;
            }
            worst = std::max(worst, double{std::abs(a - b)});
          }
        EXPECT_LE(worst, 1e-6) << "row " << i << ", " << threads << " threads";
      }
    }
  }
}

TEST(AttentionRemap, ExplicitIdsPerBatchRow) {
  // Gapped position ids, different in each batch row (leaky ReRoPE's key rows per batch row).
  std::mt19937 rng(25);
  const int B = 2, S = 150, T = 150, Hq = 2, Hk = 1, D = 32;
  const RopeSchedule sched = testing::plain_schedule(D);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(B) * T);
  std::uniform_int_distribution<int> gap(1, 4);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) ids[static_cast<std::size_t>(b) * T + t] = (t ? ids[static_cast<std::size_t>(b) * T + t - 1] : 3 * b) + gap(rng);
  for (const PositionRemap& remap : kRemaps) {
    SCOPED_TRACE(std::string(to_string(remap.kind)) + " w " + std::to_string(remap.window));
    BiasInputs setup;
    AttentionParams p = rope_params(sched, setup, Hq, B, S, T, rng);
    p.q_positions = p.k_positions = PositionIds::explicit_ids(ids.data());
    p.remap = remap;
    Tensor4 q = make(DType::kF32, B, S, Hq, D, false, &rng), k = make(DType::kF32, B, T, Hk, D, false, &rng),
            v = make(DType::kF32, B, T, Hk, D, false, &rng), out = make(DType::kF32, B, S, Hq, D, false, nullptr);
    AttentionOptions options;
    options.threads = 2;
    attention(q.view, k.view, v.view, out.view, p, options);
    EXPECT_LE(worst_vs(distance_matrix_reference(q.view, k.view, v.view, p), out.view), 1e-5);
  }
}

TEST(AttentionRemap, BadInputIsAnErrorNamingIt) {
  std::mt19937 rng(24);
  const int D = 16;
  const RopeSchedule sched = testing::plain_schedule(D);
  Tensor4 q = make(DType::kF32, 1, 4, 2, D, false, &rng), k = make(DType::kF32, 1, 4, 2, D, false, &rng),
          out = make(DType::kF32, 1, 4, 2, D, false, nullptr);
  BiasInputs setup;
  const AttentionParams good = rope_params(sched, setup, 2, 1, 4, 4, rng);
  const auto expect_message = [&](const PositionRemap& r, const std::string& fragment, AttentionParams p) {
    p.remap = r;
    try {
      attention(q.view, k.view, k.view, out.view, p);
      ADD_FAILURE() << "no error for " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_message(remap_of(static_cast<PositionRemapKind>(9), 4), "unknown remap kind 9; expected none, self-extend", good);
  expect_message(remap_of(PositionRemapKind::kReRope, -1), "window w = -1 must be in [0, 2^31-1]", good);
  expect_message(remap_of(PositionRemapKind::kSelfExtend, 4, 0), "group G = 0 must be in [1, 2^31-1]", good);
  expect_message(remap_of(PositionRemapKind::kLeakyReRope, 4, 1, 0.0), "leak k = 0 must be > 0", good);
  expect_message(remap_of(PositionRemapKind::kLeakyReRope, 4, 1, -2.0), "leak k = -2 must be > 0", good);
  expect_message(remap_of(PositionRemapKind::kLeakyReRope, 4, 1, std::nan("")), "must be > 0 and finite", good);
  expect_message(remap_of(PositionRemapKind::kLeakyReRope, 4, 1, 1e-9), "far query position", good);
  expect_message(remap_of(PositionRemapKind::kReRope, std::int64_t{1} << 31), "window w = 2147483648", good);
  AttentionParams alibi = good;
  alibi.positions = AttentionPositions::kAlibi;
  expect_message(remap_of(PositionRemapKind::kReRope, 4), "positions are 'alibi', expected rope", alibi);
  const std::vector<std::uint8_t> axes(static_cast<std::size_t>(good.rope.num_freqs), 0);
  AttentionParams mrope = good;
  mrope.rope.axis_of_freq = axes.data();
  expect_message(remap_of(PositionRemapKind::kSelfExtend, 4, 2), "one position axis", mrope);
  // No backward pass: refused by name.
  AttentionParams remapped = good;
  remapped.remap = remap_of(PositionRemapKind::kReRope, 2);
  std::vector<float> lse(8);
  Tensor4 g = make(DType::kF32, 1, 4, 2, D, false, nullptr), gk = make(DType::kF32, 1, 4, 2, D, false, nullptr),
          gv = make(DType::kF32, 1, 4, 2, D, false, nullptr), dout = make(DType::kF32, 1, 4, 2, D, false, &rng);
  try {
    attention_backward_reference({q.view, k.view, k.view, out.view, dout.view, lse.data()}, {g.view, gk.view, gv.view}, remapped);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("remap rerope is for inference"), std::string::npos) << e.what();
  }
}

TEST(AttentionRemap, RemappedDistanceIsThePapersFormula) {
  for (const PositionRemap& r : kRemaps)
    for (std::int64_t i : {0, 5, 40, 99, 1000})
      for (std::int64_t j : {0, 3, 39, 99, 400})
        EXPECT_DOUBLE_EQ(remapped_distance(r, i, j), paper_distance(r, i, j)) << to_string(r.kind) << " " << i << " " << j;
}

}  // namespace
}  // namespace posenc
