// The backward pass of fused attention under a position remap (Self-Extend, ReRoPE, leaky ReRoPE,
// DCA): the core's double reference and the tiled kernel on every Highway target against the
// analytic gradients of attention that rotates each (query, key) pair by the papers' remapped
// distance explicitly (attention_remap_support.h: no factorisation into query and key
// positions), for every mask, both layouts, a partial rotary dim with an attention factor,
// prefill over several tiles, a chunk of queries after a cache and decode; the same bits for any
// thread count.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/rope_schedule.h"

#include "attention_backward_support.h"
#include "attention_remap_support.h"
#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

// max |ref - g| over max |ref| (dense ref in g's [B, tokens, heads, D] order).
double relative_to(const std::vector<double>& ref, const RopeTensor& g) {
  double scale = 1e-30;
  for (double x : ref) scale = std::max(scale, std::abs(x));
  return worst_vs(ref, g) / scale;
}

TEST(AttentionRemapBackward, ReferenceAndTiledEqualTheExplicitGradients) {
  std::mt19937 rng(31);
  const int B = 2, Hq = 4, Hk = 2, D = 40;
  const RopeSchedule sched = yarn_partial_schedule(D);
  double worst_reference = 0, worst_tiled = 0;
  int cases = 0, runs = 0;
  // two query tiles and three key tiles; a chunk of queries after a cache; decode
  for (const auto& [S, T] : {std::pair{150, 150}, std::pair{33, 200}, std::pair{1, 150}})
    for (const PositionRemap& remap : kRemaps)
      for (MaskCase mask : kMasks) {
        SCOPED_TRACE("S " + std::to_string(S) + " T " + std::to_string(T) + " " + to_string(remap.kind) + " " + name(mask));
        BiasInputs setup;
        AttentionParams p = params_for_case(AttentionPositions::kRope, mask, setup, sched, Hq, B, S, T, rng);
        p.rope = rope_apply_params(sched, cases % 2 ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit);
        p.remap = remap;
        Problem pr(B, S, T, Hq, Hk, D, rng);
        AttentionOptions options;
        options.lse = pr.lse.data();
        attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
        const ExplicitAttention want = explicit_attention(pr.q.view, pr.k.view, pr.v.view, p, &pr.dout.view);
        Gradients ref(pr, 0);
        attention_backward_reference(pr.inputs(), ref.view(false), p);
        const double errors[] = {relative_to(want.dq, ref.dq.view), relative_to(want.dk, ref.dk.view), relative_to(want.dv, ref.dv.view)};
        for (double e : errors) worst_reference = std::max(worst_reference, e);
        EXPECT_LE(errors[0], 1e-5) << "reference dq";
        EXPECT_LE(errors[1], 1e-5) << "reference dk";
        EXPECT_LE(errors[2], 1e-5) << "reference dv";
        on_every_target([&] {
          Gradients fast(pr, 0);
          attention_backward(pr.inputs(), fast.view(false), p, {2});
          const double tiled[] = {relative_to(want.dq, fast.dq.view), relative_to(want.dk, fast.dk.view), relative_to(want.dv, fast.dv.view)};
          for (double e : tiled) worst_tiled = std::max(worst_tiled, e);
          EXPECT_LE(tiled[0], 2e-5) << "tiled dq";
          EXPECT_LE(tiled[1], 2e-5) << "tiled dk";
          EXPECT_LE(tiled[2], 2e-5) << "tiled dv";
          ++runs;
        });
        ++cases;
      }
  EXPECT_EQ(cases, 3 * kRemapCount * 6);
  std::printf("attention remap backward: %d cases, %d tiled runs; worst relative error against the explicit gradients: "
              "reference %.2g, tiled %.2g\n", cases, runs, worst_reference, worst_tiled);
}

TEST(AttentionRemapBackward, SameBitsForAnyThreadCount) {
  std::mt19937 rng(32);
  const int B = 1, S = 200, T = 230, Hq = 4, Hk = 2, D = 32;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (const PositionRemap& remap : kRemaps) {
    SCOPED_TRACE(to_string(remap.kind));
    BiasInputs setup;
    AttentionParams p = params_for_case(AttentionPositions::kRope, MaskCase::kCausal, setup, sched, Hq, B, S, T, rng);
    p.remap = remap;
    Problem pr(B, S, T, Hq, Hk, D, rng);
    AttentionOptions options;
    options.lse = pr.lse.data();
    attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, options);
    Gradients one(pr, 0), many(pr, 0);
    attention_backward(pr.inputs(), one.view(false), p, {1});
    attention_backward(pr.inputs(), many.view(false), p, {7});
    EXPECT_EQ(one.dq.bytes, many.dq.bytes);
    EXPECT_EQ(one.dk.bytes, many.dk.bytes);
    EXPECT_EQ(one.dv.bytes, many.dv.bytes);
  }
}

}  // namespace
}  // namespace posenc
