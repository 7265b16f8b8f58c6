// Fused attention with a per-head distance table (Kerple, Sandwich, any learned distance
// function) and with FoX's cumulative forget gate (attention.h kDistanceTable, kForgetGate):
// the tiled forward within 2e-6 of the reference and the tiled backward within 1e-5, on every
// Highway target, for every mask, GQA, decode and split-K; the gradients of the table and of c
// against finite differences of the double forward; the same bits for any thread count; FoX with
// a constant gate against ALiBi's kernel; and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/error.h"
#include "posenc/kerple.h"

#include "attention_backward_support.h"
#include "attention_test_support.h"
#include "expect_error.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

// The three biases under test: Kerple's table over |Delta|, a random signed table, FoX's c.
enum class BiasCase { kKerple, kSigned, kGate };
constexpr BiasCase kBiases[] = {BiasCase::kKerple, BiasCase::kSigned, BiasCase::kGate};
const char* name(BiasCase c) { return c == BiasCase::kKerple ? "kerple table" : c == BiasCase::kSigned ? "signed table" : "forget gate"; }

// What the params point to, and the gradients of the table and of c beside q, k, v's.
struct BiasSetup {
  BiasInputs inputs;
  std::vector<float> values;  // the distance table, or c
};

// Mask and bias on [B, S] x [B, T] (positions offset as params_for_case sets them: every
// |Delta| <= T - 1, so a table of length T covers the call).
AttentionParams bias_params(BiasCase bias, MaskCase mask, BiasSetup& setup, int Hq, int B, int S, int T, std::mt19937& rng) {
  const RopeSchedule sched = testing::plain_schedule(8);
  AttentionParams p = params_for_case(AttentionPositions::kNone, mask, setup.inputs, sched, Hq, B, S, T, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (bias == BiasCase::kKerple) {
    KerpleParams kp{KerpleKind::kLog, {}, {}};
    for (int h = 0; h < Hq; ++h) {
      kp.r1.push_back(0.3 + 0.4 * h);
      kp.r2.push_back(0.05 * (h + 1));
    }
    setup.values = kerple_table(kp, T);
    p.positions = AttentionPositions::kDistanceTable;
    p.distance_table = {setup.values.data(), T, DistanceSide::kAbsolute};
  } else if (bias == BiasCase::kSigned) {
    setup.values.resize(static_cast<std::size_t>(Hq) * (2 * T - 1));
    for (float& x : setup.values) x = normal(rng);
    p.positions = AttentionPositions::kDistanceTable;
    p.distance_table = {setup.values.data(), T, DistanceSide::kSigned};
  } else {
    // c decreasing by random log gates in [-0.3, 0): c's size (|c| <= 0.3 T) keeps its float
    // rounding well below the tolerances.
    setup.values.resize(static_cast<std::size_t>(B) * Hq * T);
    std::uniform_real_distribution<float> gate(-0.3f, 0.0f);
    for (std::size_t row = 0; row < setup.values.size() / T; ++row) {
      double c = 0;
      for (int t = 0; t < T; ++t) setup.values[row * T + t] = static_cast<float>(c += gate(rng));
    }
    p.positions = AttentionPositions::kForgetGate;
    p.gate_cumulative = setup.values.data();
  }
  return p;
}

// The sizes the forward and backward walk: within one query tile, over two and several key
// tiles, a short prefill after a cache, decode; up to 512.
const std::pair<int, int> kSizes[] = {{70, 70}, {200, 200}, {33, 100}, {1, 150}, {130, 512}};

bool applies(BiasCase bias, MaskCase mask, int S, int T) {
  // FoX reads query i's c at key index past + i: the past mask's cache must hold the queries.
  return !(bias == BiasCase::kGate && mask == MaskCase::kPast && (T - S) / 2 + 1 + S > T);
}

// Calls f(S, T, Hk, bias, setup, params) for every size, kv head count (MHA, GQA), bias and mask
// the tiled tests walk, each with its trace.
template <class F>
void for_each_case(std::mt19937& rng, int B, int Hq, F&& f) {
  for (const auto& [S, T] : kSizes)
    for (int Hk : {Hq, Hq / 2})
      for (BiasCase bias : kBiases)
        for (MaskCase mask : kMasks) {
          if (!applies(bias, mask, S, T)) continue;
          SCOPED_TRACE("S " + std::to_string(S) + " T " + std::to_string(T) + " Hk " + std::to_string(Hk) + " " + name(bias) + ", " + name(mask));
          BiasSetup setup;
          const AttentionParams p = bias_params(bias, mask, setup, Hq, B, S, T, rng);
          f(S, T, Hk, bias, setup, p);
        }
}

TEST(AttentionBias, TiledForwardEqualsTheReferenceOnEveryTarget) {
  std::mt19937 rng(21);
  const int B = 2, Hq = 4, D = 40;
  double worst = 0;
  int cases = 0;
  const std::size_t targets = on_every_target([&] {
    for_each_case(rng, B, Hq, [&](int S, int T, int Hk, BiasCase, BiasSetup&, const AttentionParams& p) {
      Problem pr(B, S, T, Hq, Hk, D, rng);
      Tensor4 ref = make(DType::kF32, B, S, Hq, D, false, nullptr);
      std::vector<float> lse_ref(pr.lse.size());
      AttentionOptions options;
      options.lse = lse_ref.data();
      attention_reference(pr.q.view, pr.k.view, pr.v.view, ref.view, p, options);
      options.lse = pr.lse.data();
      options.threads = 2;
      attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
      const double e = relative_error(pr.out.view, ref.view);
      EXPECT_LE(e, 2e-6);
      for (std::size_t x = 0; x < lse_ref.size(); ++x) {
        if (std::isinf(lse_ref[x]))  // a row that sees no key
          ASSERT_EQ(pr.lse[x], lse_ref[x]) << x;
        else
          ASSERT_NEAR(pr.lse[x], lse_ref[x], 2e-6 * std::max(1.0f, std::abs(lse_ref[x]))) << x;
      }
      worst = std::max(worst, e);
      ++cases;
    });
  });
  std::printf("attention bias forward: %d cases on %zu targets (worst relative error %.1e)\n", cases, targets, worst);
}

TEST(AttentionBias, DecodeSplitAcrossThreadsEqualsTheReference) {
  // One query, one head, 8 threads: the forward splits the keys (FlashDecoding) and merges.
  std::mt19937 rng(22);
  for (BiasCase bias : kBiases) {
    SCOPED_TRACE(name(bias));
    BiasSetup setup;
    const AttentionParams p = bias_params(bias, MaskCase::kCausal, setup, 1, 1, 1, 1000, rng);
    Problem pr(1, 1, 1000, 1, 1, 32, rng);
    Tensor4 ref = make(DType::kF32, 1, 1, 1, 32, false, nullptr);
    attention_reference(pr.q.view, pr.k.view, pr.v.view, ref.view, p);
    AttentionOptions options;
    options.threads = 8;
    attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
    EXPECT_LE(relative_error(pr.out.view, ref.view), 2e-6);
  }
}

// The forward and its tiled backward for one case; grads of the table or c into *table.
struct BackwardRun {
  Gradients grads;
  std::vector<float> table;
};

AttentionGradients gradients_view(BackwardRun& run, BiasCase bias) {
  AttentionGradients g = run.grads.view(false);
  (bias == BiasCase::kGate ? g.gate_cumulative_grad : g.distance_table_grad) = run.table.data();
  return g;
}

TEST(AttentionBias, TiledBackwardEqualsTheReferenceOnEveryTarget) {
  std::mt19937 rng(23);
  const int B = 2, Hq = 4, D = 40;
  double worst = 0;
  int cases = 0;
  const std::size_t targets = on_every_target([&] {
    for_each_case(rng, B, Hq, [&](int S, int T, int Hk, BiasCase bias, BiasSetup& setup, const AttentionParams& p) {
      Problem pr(B, S, T, Hq, Hk, D, rng);
      AttentionOptions options;
      options.lse = pr.lse.data();
      attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
      const std::vector<float> start(setup.values.size(), 0.25f);  // added to, not overwritten
      BackwardRun ref{Gradients(pr, 0), start}, fast{Gradients(pr, 0), start};
      attention_backward_reference(pr.inputs(), gradients_view(ref, bias), p);
      attention_backward(pr.inputs(), gradients_view(fast, bias), p, {2});
      const double errors[] = {relative_error(fast.grads.dq.view, ref.grads.dq.view), relative_error(fast.grads.dk.view, ref.grads.dk.view),
                               relative_error(fast.grads.dv.view, ref.grads.dv.view)};
      EXPECT_LE(errors[0], 1e-5) << "dq";
      EXPECT_LE(errors[1], 1e-5) << "dk";
      EXPECT_LE(errors[2], 1e-5) << "dv";
      // The table's or c's gradient: sums of dS that may cancel to ~0, so the scale's floor is 1.
      double error = 0, scale = 1;
      for (std::size_t x = 0; x < start.size(); ++x) {
        error = std::max<double>(error, std::abs(fast.table[x] - ref.table[x]));
        scale = std::max<double>(scale, std::abs(ref.table[x] - 0.25f));
      }
      EXPECT_LE(error / scale, 1e-5) << (bias == BiasCase::kGate ? "dc" : "dtable");
      for (double e : errors) worst = std::max(worst, e);
      worst = std::max(worst, error / scale);
      ++cases;
    });
  });
  std::printf("attention bias backward: %d cases on %zu targets (worst relative error %.1e)\n", cases, targets, worst);
}

// Explicit position ids: batch row 0 increasing with gaps, row 1 two packed sequences (ids
// restart, so a tile's distances are not one band): the table's per-element paths, forward and
// backward, on every target.
TEST(AttentionBias, ExplicitPositionIdsReadTheTableByDistance) {
  std::mt19937 rng(28);
  const int B = 2, S = 150, T = 150, Hq = 2, Hk = 1, D = 16, length = 450;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(B) * T);
  std::int64_t at = 0;
  for (int t = 0; t < T; ++t) ids[static_cast<std::size_t>(t)] = at += 1 + static_cast<std::int64_t>(rng() % 3);
  for (int t = 0; t < T; ++t) ids[static_cast<std::size_t>(T + t)] = t < 70 ? t : t - 70;
  int cases = 0;
  on_every_target([&] {
    for (const DistanceSide side : {DistanceSide::kAbsolute, DistanceSide::kSigned})
      for (const bool causal : {true, false}) {
        SCOPED_TRACE(std::string(to_string(side)) + (causal ? ", causal" : ", bidirectional"));
        std::vector<float> values(static_cast<std::size_t>(Hq) * (side == DistanceSide::kSigned ? 2 * length - 1 : length));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& x : values) x = normal(rng);
        AttentionParams p;
        p.positions = AttentionPositions::kDistanceTable;
        p.distance_table = {values.data(), length, side};
        p.q_positions = p.k_positions = PositionIds::explicit_ids(ids.data());
        p.mask.causal = causal;
        Problem pr(B, S, T, Hq, Hk, D, rng);
        Tensor4 ref = make(DType::kF32, B, S, Hq, D, false, nullptr);
        attention_reference(pr.q.view, pr.k.view, pr.v.view, ref.view, p);
        AttentionOptions options;
        options.lse = pr.lse.data();
        attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
        EXPECT_LE(relative_error(pr.out.view, ref.view), 2e-6);
        BackwardRun slow{Gradients(pr, 0), std::vector<float>(values.size())}, fast{Gradients(pr, 0), slow.table};
        attention_backward_reference(pr.inputs(), gradients_view(slow, BiasCase::kSigned), p);
        attention_backward(pr.inputs(), gradients_view(fast, BiasCase::kSigned), p, {2});
        EXPECT_LE(relative_error(fast.grads.dq.view, slow.grads.dq.view), 1e-5);
        EXPECT_LE(relative_error(fast.grads.dk.view, slow.grads.dk.view), 1e-5);
        double error = 0, scale = 1;
        for (std::size_t x = 0; x < values.size(); ++x) {
          error = std::max<double>(error, std::abs(fast.table[x] - slow.table[x]));
          scale = std::max<double>(scale, std::abs(slow.table[x]));
        }
        EXPECT_LE(error / scale, 1e-5) << "dtable";
        ++cases;
      }
  });
  EXPECT_GT(cases, 0);
}

// The double reference's gradients of the table and of c against central differences of the
// double forward reference, every entry.
TEST(AttentionBias, ReferenceGradientsOfTableAndGateEqualFiniteDifferences) {
  std::mt19937 rng(24);
  const int B = 2, S = 9, T = 11, Hq = 2, Hk = 1, D = 4;
  for (BiasCase bias : kBiases)
    for (MaskCase mask : {MaskCase::kCausal, MaskCase::kBidirectional, MaskCase::kPadding, MaskCase::kPast}) {
      SCOPED_TRACE(std::string(name(bias)) + ", " + name(mask));
      BiasSetup setup;
      const AttentionParams p = bias_params(bias, mask, setup, Hq, B, S, T, rng);
      Problem pr(B, S, T, Hq, Hk, D, rng);
      BackwardRun run{Gradients(pr, 0), std::vector<float>(setup.values.size(), 0.0f)};
      AttentionOptions options;
      options.lse = pr.lse.data();
      attention_reference(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
      attention_backward_reference(pr.inputs(), gradients_view(run, bias), p);
      const std::function<double()> f = [&] { return loss(pr, p); };
      for (std::size_t x = 0; x < setup.values.size(); ++x) {
        const double numeric = numeric_derivative(&setup.values[x], f);
        EXPECT_NEAR(run.table[x], numeric, 5e-4 * std::max(1.0, std::abs(numeric))) << x;
      }
    }
}

TEST(AttentionBias, SameBitsForAnyThreadCount) {
  std::mt19937 rng(25);
  // S = 700: six query tiles per head, so the table's lanes each sum several.
  const int B = 2, S = 700, T = 730, Hq = 4, Hk = 2, D = 32;
  for (BiasCase bias : kBiases) {
    SCOPED_TRACE(name(bias));
    BiasSetup setup;
    const AttentionParams p = bias_params(bias, MaskCase::kPadding, setup, Hq, B, S, T, rng);
    Problem pr(B, S, T, Hq, Hk, D, rng);
    AttentionOptions options;
    options.lse = pr.lse.data();
    attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
    BackwardRun one{Gradients(pr, 0), std::vector<float>(setup.values.size())}, many{Gradients(pr, 0), one.table};
    attention_backward(pr.inputs(), gradients_view(one, bias), p, {1});
    attention_backward(pr.inputs(), gradients_view(many, bias), p, {7});
    EXPECT_EQ(one.grads.dq.bytes, many.grads.dq.bytes);
    EXPECT_EQ(one.grads.dk.bytes, many.grads.dk.bytes);
    EXPECT_EQ(one.table, many.table);
  }
}

// c_t = -(t + 1) slope_h with ALiBi's slopes 2^-(h+1) (8 heads): every c and every c_i - c_j is
// exact in float32, so FoX's scores are ALiBi's, bit for bit, and so are the outputs; a gate
// whose log is not a power of two agrees to c's rounding.
TEST(AttentionBias, AConstantForgetGateIsAlibisKernel) {
  std::mt19937 rng(26);
  const int B = 1, S = 300, T = 300, H = 8, D = 64;
  Problem pr(B, S, T, H, H, D, rng);
  Tensor4 alibi_out = make(DType::kF32, B, S, H, D, false, nullptr);
  BiasInputs setup;
  AttentionParams alibi = params_for(AttentionPositions::kAlibi, setup, H, B, T, rng);
  for (const double gamma : {0.0, 0.9}) {  // 0: the exact slopes; else slope -log 0.9 for every head
    std::vector<double> slopes = setup.slopes;
    if (gamma > 0) slopes.assign(H, -std::log(gamma));
    alibi.alibi_slopes = slopes.data();
    std::vector<float> c(static_cast<std::size_t>(B) * H * T);
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) c[static_cast<std::size_t>(h) * T + t] = static_cast<float>(-(t + 1) * slopes[h]);
    AttentionParams fox;
    fox.positions = AttentionPositions::kForgetGate;
    fox.gate_cumulative = c.data();
    attention(pr.q.view, pr.k.view, pr.v.view, alibi_out.view, alibi, {2});
    attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, fox, {2});
    if (gamma == 0) {
      EXPECT_EQ(relative_error(pr.out.view, alibi_out.view), 0.0);  // every element equal
    } else {
      // |c| <= 300 x 0.105 = 32: its rounding (ulp 4e-6) moves scores by that much.
      EXPECT_LE(relative_error(pr.out.view, alibi_out.view), 2e-5);
    }
  }
}

TEST(AttentionBias, RefusesWhatItWouldMisread) {
  std::mt19937 rng(27);
  const int B = 1, S = 20, T = 30, H = 2, D = 8;
  Problem pr(B, S, T, H, H, D, rng);
  const auto run = [&](const AttentionParams& p) { attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p); };
  BiasSetup setup;
  AttentionParams table = bias_params(BiasCase::kKerple, MaskCase::kCausal, setup, H, B, S, T, rng);
  run(table);
  table.distance_table.length = T - 1;  // positions 7+10 .. 7+29 against 7 .. 36: 29 apart
  expect_error([&] { run(table); }, "distance table length 29 covers |qpos - kpos| <= 28, but batch row 0 has positions 29 apart");
  table.distance_table.length = T;
  table.distance_table.values = nullptr;
  expect_error([&] { run(table); }, "distance table has no values");
  table.distance_table.values = setup.values.data();
  table.remap = {PositionRemapKind::kReRope, 4, 1, 0};
  expect_error([&] { run(table); }, "positions are 'distance-table', expected rope");
  table.remap = {};
  table.q_positions.axes = 2;
  expect_error([&] { run(table); }, "query positions for a bias have one axis");
  table.q_positions.axes = 1;

  BiasSetup gate_setup;
  AttentionParams gate = bias_params(BiasCase::kGate, MaskCase::kCausal, gate_setup, H, B, S, T, rng);
  run(gate);
  gate.mask.past = 11;
  expect_error([&] { run(gate); }, "past (11) + S (20) must be <= T (30)");
  gate.mask.past = -1;
  gate_setup.values[35] = NAN;
  expect_error([&] { run(gate); }, "forget-gate c [0][1][5] is nan");
  gate.gate_cumulative = nullptr;
  expect_error([&] { run(gate); }, "forget-gate needs c");

  // A gradient for the other scheme.
  std::vector<float> sink(1000);
  gate.gate_cumulative = gate_setup.values.data();
  gate_setup.values[35] = -1.0f;
  AttentionOptions options;
  options.lse = pr.lse.data();
  attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, table, options);
  Gradients g(pr, 0);
  AttentionGradients wrong = g.view(false);
  wrong.gate_cumulative_grad = sink.data();
  expect_error([&] { attention_backward(pr.inputs(), wrong, table); }, "gate_cumulative_grad is for forget-gate attention, positions are 'distance-table'");
  wrong = g.view(false);
  wrong.distance_table_grad = sink.data();
  expect_error([&] { attention_backward(pr.inputs(), wrong, gate); }, "distance_table_grad is for distance-table attention, positions are 'forget-gate'");
}

}  // namespace
}  // namespace posenc
