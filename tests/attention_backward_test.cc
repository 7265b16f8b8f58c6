// The attention backward pass: the double reference against finite differences of the forward
// reference (q, k, v and T5's table), and the tiled kernel against the reference on every
// Highway target for every position scheme x mask x GQA, with the T5 table's gradient, the
// same bits for any thread count, and zeros (never NaN) for a query that sees no key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/error.h"
#include "posenc/rope_schedule.h"

#include "attention_backward_support.h"
#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

// Every float of t against its gradient g (same shape), by finite differences.
void expect_matches_numeric(Tensor4& t, const Tensor4& g, const std::function<double()>& f, const char* what) {
  const RopeTensor& x = t.view;
  for (int b = 0; b < x.batch; ++b)
    for (int n = 0; n < x.tokens; ++n)
      for (int h = 0; h < x.heads; ++h)
        for (int c = 0; c < x.head_dim; ++c) {
          float* at_x = static_cast<float*>(x.data) + b * x.batch_stride + n * x.token_stride + h * x.head_stride + c;
          const double numeric = numeric_derivative(at_x, f);
          // The forward rounds out to float: |error| ~ 1e-7 x the stencil's 1.5 / e.
          EXPECT_NEAR(at(g.view, b, n, h, c), numeric, 5e-4 * std::max(1.0, std::abs(numeric)))
              << what << " [" << b << "," << n << "," << h << "," << c << "]";
        }
}

TEST(AttentionBackward, ReferenceEqualsFiniteDifferencesOfTheForward) {
  std::mt19937 rng(11);
  const int B = 2, S = 3, T = 5, Hq = 2, D = 8;
  RopeParams rp;
  rp.head_dim = D;
  rp.partial_rotary_factor = 0.5;  // channels 4..7 pass through RoPE unrotated
  const RopeSchedule sched = compute_schedule(rp);
  for (int Hk : {1, 2})
    for (auto positions : {AttentionPositions::kNone, AttentionPositions::kRope, AttentionPositions::kAlibi, AttentionPositions::kT5})
      for (MaskCase mask : kMasks) {
        SCOPED_TRACE(std::string(to_string(positions)) + ", " + name(mask) + ", Hk " + std::to_string(Hk));
        BiasInputs setup;
        const AttentionParams p = params_for_case(positions, mask, setup, sched, Hq, B, S, T, rng);
        Problem pr(B, S, T, Hq, Hk, D, rng);
        Gradients g(pr, positions == AttentionPositions::kT5 ? static_cast<int>(setup.t5_table.size()) : 0);
        for (float& x : g.table) x = 0;
        attention_backward_reference(pr.inputs(), g.view(positions == AttentionPositions::kT5), p);
        const auto f = [&] { return loss(pr, p); };
        expect_matches_numeric(pr.q, g.dq, f, "dq");
        expect_matches_numeric(pr.k, g.dk, f, "dk");
        expect_matches_numeric(pr.v, g.dv, f, "dv");
        for (std::size_t x = 0; x < g.table.size(); ++x) {
          const double numeric = numeric_derivative(&setup.t5_table[x], f);
          EXPECT_NEAR(g.table[x], numeric, 5e-4 * std::max(1.0, std::abs(numeric))) << "T5 table entry " << x;
        }
      }
}

TEST(AttentionBackward, TiledEqualsTheReferenceOnEveryTarget) {
  std::mt19937 rng(12);
  const int B = 2, Hq = 4, D = 40;  // 40: a whole pair of vectors and a scalar tail on every target
  const RopeSchedule sched = testing::plain_schedule(D);
  int cases = 0;
  double worst = 0;  // relative error of dq, dk, dv over every case
  const std::size_t targets = on_every_target([&] {
    // prefill within one query tile and over two (128-row tiles, the second partial) and several
    // key tiles; a short prefill after a cache; decode.
    for (const auto& [S, T] : {std::pair{70, 70}, std::pair{200, 200}, std::pair{33, 100}, std::pair{1, 150}})
      for (int Hk : {4, 2})
        for (auto positions : {AttentionPositions::kNone, AttentionPositions::kRope, AttentionPositions::kAlibi, AttentionPositions::kT5})
          for (MaskCase mask : kMasks) {
            SCOPED_TRACE("S " + std::to_string(S) + " T " + std::to_string(T) + " Hk " + std::to_string(Hk) + " " +
                         to_string(positions) + ", " + name(mask));
            BiasInputs setup;
            const AttentionParams p = params_for_case(positions, mask, setup, sched, Hq, B, S, T, rng);
            Problem pr(B, S, T, Hq, Hk, D, rng);
            AttentionOptions options;
            options.lse = pr.lse.data();
            attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
            const bool t5 = positions == AttentionPositions::kT5;
            Gradients ref(pr, t5 ? static_cast<int>(setup.t5_table.size()) : 0), fast(pr, static_cast<int>(ref.table.size()));
            attention_backward_reference(pr.inputs(), ref.view(t5), p);
            attention_backward(pr.inputs(), fast.view(t5), p, {2});
            const double errors[] = {relative_error(fast.dq.view, ref.dq.view), relative_error(fast.dk.view, ref.dk.view),
                                     relative_error(fast.dv.view, ref.dv.view)};
            EXPECT_LE(errors[0], 1e-5) << "dq";
            EXPECT_LE(errors[1], 1e-5) << "dk";
            EXPECT_LE(errors[2], 1e-5) << "dv";
            for (double e : errors) worst = std::max(worst, e);
            // A bucket's sum may cancel to ~0 (each row's dS sums to 0: softmax ignores a
            // constant, e.g. when every key a query sees is in one bucket), so the scale has a floor of 1.
            double table_error = 0, table_scale = 1;
            for (std::size_t x = 0; x < ref.table.size(); ++x) {
              table_error = std::max<double>(table_error, std::abs(fast.table[x] - ref.table[x]));
              table_scale = std::max<double>(table_scale, std::abs(ref.table[x] - 0.5f));
            }
            EXPECT_LE(table_error / table_scale, 1e-5) << "T5 table";
            ++cases;
          }
  });
  EXPECT_EQ(cases, static_cast<int>(targets) * 4 * 2 * 4 * 6);
  std::printf("attention backward: %d cases on %zu targets match the reference (worst relative error %.1e)\n", cases, targets,
              worst);
}

TEST(AttentionBackward, SameBitsForAnyThreadCount) {
  std::mt19937 rng(13);
  // S = 200: two query tiles per head, so T5's per-task table gradients are summed across tiles.
  const int B = 2, S = 200, T = 230, Hq = 4, Hk = 2, D = 32;
  const RopeSchedule sched = testing::plain_schedule(D);
  BiasInputs setup;
  const AttentionParams p = params_for_case(AttentionPositions::kT5, MaskCase::kPadding, setup, sched, Hq, B, S, T, rng);
  Problem pr(B, S, T, Hq, Hk, D, rng);
  AttentionOptions options;
  options.lse = pr.lse.data();
  attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
  Gradients one(pr, static_cast<int>(setup.t5_table.size())), many(pr, static_cast<int>(setup.t5_table.size()));
  attention_backward(pr.inputs(), one.view(true), p, {1});
  attention_backward(pr.inputs(), many.view(true), p, {7});
  EXPECT_EQ(one.dq.bytes, many.dq.bytes);
  EXPECT_EQ(one.dk.bytes, many.dk.bytes);
  EXPECT_EQ(one.dv.bytes, many.dv.bytes);
  EXPECT_EQ(one.table, many.table);
}

TEST(AttentionBackward, AQueryThatSeesNoKeyGetsZeroGradientsNotNaN) {
  // Batch row 1 pads every key: its out is 0 and its lse -inf; every gradient it touches is 0.
  std::mt19937 rng(14);
  const int B = 2, S = 5, T = 9, Hq = 2, Hk = 1, D = 8;
  for (auto positions : {AttentionPositions::kNone, AttentionPositions::kT5}) {
    BiasInputs setup;
    AttentionParams p = params_for(positions, setup, Hq, B, T, rng);
    for (int j = 0; j < T; ++j) setup.padding[T + j] = 0;
    p.mask.key_padding = setup.padding.data();
    Problem pr(B, S, T, Hq, Hk, D, rng);
    AttentionOptions options;
    options.lse = pr.lse.data();
    attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
    const bool t5 = positions == AttentionPositions::kT5;
    for (bool tiled : {false, true}) {
      Gradients g(pr, t5 ? static_cast<int>(setup.t5_table.size()) : 0);
      if (tiled) attention_backward(pr.inputs(), g.view(t5), p);
      else attention_backward_reference(pr.inputs(), g.view(t5), p);
      for (int c = 0; c < D; ++c) {
        for (int i = 0; i < S; ++i)
          for (int h = 0; h < Hq; ++h) EXPECT_EQ(at(g.dq.view, 1, i, h, c), 0.0f) << "dq, tiled " << tiled;
        for (int j = 0; j < T; ++j) {
          EXPECT_EQ(at(g.dk.view, 1, j, 0, c), 0.0f) << "dk, tiled " << tiled;
          EXPECT_EQ(at(g.dv.view, 1, j, 0, c), 0.0f) << "dv, tiled " << tiled;
          EXPECT_FALSE(std::isnan(at(g.dk.view, 0, j, 0, c))) << "tiled " << tiled;
        }
      }
      for (float x : g.table) EXPECT_FALSE(std::isnan(x));
    }
  }
}

TEST(AttentionBackward, BadInputIsAnErrorNamingIt) {
  std::mt19937 rng(15);
  Problem pr(1, 4, 4, 2, 1, 8, rng);
  Gradients g(pr, 0);
  AttentionParams p;
  const auto expect_message = [&](const AttentionBackwardInputs& in, const AttentionGradients& grads, const AttentionParams& pp,
                                  const std::string& fragment) {
    for (bool tiled : {false, true}) {
      try {
        if (tiled) attention_backward(in, grads, pp);
        else attention_backward_reference(in, grads, pp);
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      }
    }
  };
  Tensor4 q16 = make(DType::kBF16, 1, 4, 2, 8, false, &rng);
  AttentionBackwardInputs in = pr.inputs();
  in.q = q16.view;
  expect_message(in, g.view(false), p, "q is bf16; the backward pass takes float32 only");
  in = pr.inputs();
  in.lse = nullptr;
  expect_message(in, g.view(false), p, "lse");
  AttentionGradients wrong = g.view(false);
  wrong.dk = g.dq.view;
  expect_message(pr.inputs(), wrong, p, "dk 1x4x2x8 must have k's shape 1x4x1x8");
  std::vector<float> table(16);
  wrong = g.view(false);
  wrong.t5_table_grad = table.data();
  expect_message(pr.inputs(), wrong, p, "positions are 'none'");
}

}  // namespace
}  // namespace posenc
