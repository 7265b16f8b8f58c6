// Fused attention with the rotary variants (issue 25): xPos, RoPE at a channel offset and RoPE on
// a subset of heads. Each is defined by what rope_apply_reference does to q and k on their own
// (xPos: q takes the query scale, k the key scale; the subset: query heads h < n, kv heads
// hk < n / group), then attention without positions: the fused forward on every target, the
// reference, the decode step, and the backward (the gradients w.r.t. the rotated q and k turned
// back by the rotation's transpose) must all equal that.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/error.h"
#include "posenc/rope_schedule.h"

#include "attention_backward_support.h"
#include "attention_test_support.h"

namespace posenc {
namespace {

using namespace attention_test;

struct Variant {
  const char* name;
  double xpos_scale_base = 0;
  int channel_offset = 0;
  int rotated_heads = 0;
};
constexpr Variant kVariants[] = {
    {"xpos", 64, 0, 0}, {"channel offset", 0, 4, 0}, {"head subset", 0, 0, 2}, {"all three", 48, 2, 2}};

// D = 16 channels, 4 rotated pairs (partial rotary 0.5), at channel_offset.
struct RotaryVariant {
  explicit RotaryVariant(const Variant& v, RopeLayout layout) {
    RopeParams rp;
    rp.head_dim = 16;
    rp.partial_rotary_factor = 0.5;
    sched = compute_schedule(rp);
    rope = rope_apply_params(sched, layout);
    rope.xpos.scale_base = v.xpos_scale_base;
    rope.xpos.center = 37.5;  // any centre: it cancels in q.k
    rope.channel_offset = v.channel_offset;
    rope.rotated_heads = v.rotated_heads;
  }
  RopeSchedule sched;
  RopeApplyParams rope;
};

// x (f32 view) copied, then rotated as rope_rotate would rotate it in the given role.
Tensor4 rotated_copy(const Tensor4& x, RopeApplyParams rope, const PositionIds& ids, bool key, int group, int direction = 1) {
  const RopeTensor& v = x.view;
  Tensor4 y = make(DType::kF32, v.batch, v.tokens, v.heads, v.head_dim, false, nullptr);
  for (int b = 0; b < v.batch; ++b)
    for (int t = 0; t < v.tokens; ++t)
      for (int h = 0; h < v.heads; ++h)
        for (int c = 0; c < v.head_dim; ++c)
          static_cast<float*>(y.view.data)[b * y.view.batch_stride + t * y.view.token_stride + h * y.view.head_stride + c] = at(v, b, t, h, c);
  rope.xpos.first = key ? XPosRole::kKey : XPosRole::kQuery;
  if (key && rope.rotated_heads > 0) rope.rotated_heads /= group;
  rope.direction = direction;
  rope_apply_reference(y.view, ids, rope);
  return y;
}

AttentionParams with_rope(const RopeApplyParams& rope, bool causal, std::int64_t past) {
  AttentionParams p;
  p.positions = AttentionPositions::kRope;
  p.rope = rope;
  p.mask.causal = causal;
  p.mask.past = past;
  p.q_positions = PositionIds::implicit(past >= 0 ? past + 5 : 5);
  p.k_positions = PositionIds::implicit(5);
  return p;
}

TEST(AttentionRopeVariants, ForwardEqualsRotatingFirstThenAttendingWithoutPositions) {
  std::mt19937 rng(25);
  const int B = 2, Hq = 4, Hk = 2, D = 16;
  for (const Variant& variant : kVariants)
    for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved})
      for (const auto& [S, T, past] : {std::tuple{130, 130, -1}, std::tuple{1, 200, 199}, std::tuple{40, 300, 100}}) {
        SCOPED_TRACE(std::string(variant.name) + ", " + pairing_name(layout) + ", S " + std::to_string(S) + ", T " + std::to_string(T));
        const RotaryVariant setup(variant, layout);
        const AttentionParams p = with_rope(setup.rope, true, past);
        const Tensor4 q = make(DType::kF32, B, S, Hq, D, false, &rng), k = make(DType::kF32, B, T, Hk, D, true, &rng),
                      v = make(DType::kF32, B, T, Hk, D, false, &rng);
        const Tensor4 qr = rotated_copy(q, setup.rope, p.q_positions, false, Hq / Hk);
        const Tensor4 kr = rotated_copy(k, setup.rope, p.k_positions, true, Hq / Hk);
        AttentionParams plain = p;
        plain.positions = AttentionPositions::kNone;
        Tensor4 expected = make(DType::kF32, B, S, Hq, D, false, nullptr), reference = make(DType::kF32, B, S, Hq, D, false, nullptr);
        attention_reference(qr.view, kr.view, v.view, expected.view, plain);
        attention_reference(q.view, k.view, v.view, reference.view, p);
        EXPECT_LT(max_diff(expected, reference), 2e-6);
        const std::size_t targets = on_every_target([&] {
          for (int threads : {1, 3}) {
            Tensor4 fused = make(DType::kF32, B, S, Hq, D, true, nullptr);
            AttentionOptions options;
            options.threads = threads;
            attention(q.view, k.view, v.view, fused.view, p, options);
            EXPECT_LT(max_diff(expected, fused), 2e-5) << threads << " threads";
          }
        });
        EXPECT_GE(targets, 1u);
      }
}

TEST(AttentionRopeVariants, BackwardIsTheRotationsTransposeOfThePlainBackward) {
  std::mt19937 rng(26);
  const int B = 2, S = 150, T = 150, Hq = 4, Hk = 2, D = 16;
  for (const Variant& variant : kVariants) {
    SCOPED_TRACE(variant.name);
    const RotaryVariant setup(variant, RopeLayout::kHalfSplit);
    const AttentionParams p = with_rope(setup.rope, true, -1);
    AttentionParams plain = p;
    plain.positions = AttentionPositions::kNone;
    Problem pr(B, S, T, Hq, Hk, D, rng);
    attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, [&] {
      AttentionOptions o;
      o.lse = pr.lse.data();
      return o;
    }());
    // The plain backward on the rotated tensors, then each gradient turned back.
    const Tensor4 qr = rotated_copy(pr.q, setup.rope, p.q_positions, false, Hq / Hk);
    const Tensor4 kr = rotated_copy(pr.k, setup.rope, p.k_positions, true, Hq / Hk);
    Gradients rotated(pr, 0);
    attention_backward_reference({qr.view, kr.view, pr.v.view, pr.out.view, pr.dout.view, pr.lse.data()}, rotated.view(false), plain);
    const Tensor4 dq = rotated_copy(rotated.dq, setup.rope, p.q_positions, false, Hq / Hk, -1);
    const Tensor4 dk = rotated_copy(rotated.dk, setup.rope, p.k_positions, true, Hq / Hk, -1);
    Gradients reference(pr, 0);
    attention_backward_reference(pr.inputs(), reference.view(false), p);
    EXPECT_LT(relative_error(reference.dq.view, dq.view), 1e-5);
    EXPECT_LT(relative_error(reference.dk.view, dk.view), 1e-5);
    EXPECT_LT(relative_error(reference.dv.view, rotated.dv.view), 1e-5);
    on_every_target([&] {
      Gradients fused(pr, 0);
      attention_backward(pr.inputs(), fused.view(false), p, {2});
      EXPECT_LT(relative_error(fused.dq.view, dq.view), 2e-5);
      EXPECT_LT(relative_error(fused.dk.view, dk.view), 2e-5);
      EXPECT_LT(relative_error(fused.dv.view, rotated.dv.view), 2e-5);
    });
  }
}

// Positions past what a call builds a table for (2 (S + T) + 4096) take the rows' own cos/sin
// (Plan::rotate without a table), forward and backward; bf16 q, k and v take the bf16 kernel
// (the CPU's bf16 dot products where it has them) with the same scales, within bf16's rounding.
TEST(AttentionRopeVariants, FarPositionsAndBf16InputsTakeTheSameScales) {
  std::mt19937 rng(29);
  const int B = 1, S = 40, T = 60, Hq = 4, Hk = 2, D = 16;
  RotaryVariant setup(kVariants[3], RopeLayout::kHalfSplit);
  setup.rope.xpos.center = 1000000;  // near the positions: validate_xpos bounds |m - c|
  AttentionParams p = with_rope(setup.rope, true, -1);
  p.q_positions = PositionIds::implicit(1000000 + T - S);
  p.k_positions = PositionIds::implicit(1000000);
  AttentionParams plain = p;
  plain.positions = AttentionPositions::kNone;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype == DType::kF32 ? "f32" : "bf16");
    const Tensor4 q = make(dtype, B, S, Hq, D, false, &rng), k = make(dtype, B, T, Hk, D, false, &rng),
                  v = make(dtype, B, T, Hk, D, false, &rng);
    const Tensor4 qr = rotated_copy(q, setup.rope, p.q_positions, false, Hq / Hk);
    const Tensor4 kr = rotated_copy(k, setup.rope, p.k_positions, true, Hq / Hk);
    Tensor4 expected = make(DType::kF32, B, S, Hq, D, false, nullptr);
    attention_reference(qr.view, kr.view, v.view, expected.view, plain);
    on_every_target([&] {
      Tensor4 fused = make(DType::kF32, B, S, Hq, D, false, nullptr);
      attention(q.view, k.view, v.view, fused.view, p, {});
      EXPECT_LT(max_diff(expected, fused), dtype == DType::kF32 ? 2e-5 : 3e-2);
    });
  }
  Problem pr(B, S, T, Hq, Hk, D, rng);
  AttentionOptions with_lse;
  with_lse.lse = pr.lse.data();
  attention(pr.q.view, pr.k.view, pr.v.view, pr.out.view, p, with_lse);
  const Tensor4 qr = rotated_copy(pr.q, setup.rope, p.q_positions, false, Hq / Hk);
  const Tensor4 kr = rotated_copy(pr.k, setup.rope, p.k_positions, true, Hq / Hk);
  Gradients rotated(pr, 0), fused(pr, 0);
  attention_backward_reference({qr.view, kr.view, pr.v.view, pr.out.view, pr.dout.view, pr.lse.data()}, rotated.view(false), plain);
  attention_backward(pr.inputs(), fused.view(false), p, {2});
  EXPECT_LT(relative_error(fused.dq.view, rotated_copy(rotated.dq, setup.rope, p.q_positions, false, Hq / Hk, -1).view), 2e-5);
  EXPECT_LT(relative_error(fused.dk.view, rotated_copy(rotated.dk, setup.rope, p.k_positions, true, Hq / Hk, -1).view), 2e-5);
}

TEST(AttentionRopeVariants, XPosScoresDependOnTheDistanceOnly) {
  // Shifting every query and key position by the same amount leaves xPos's scores (so the
  // output) unchanged, though each of q's and k's scales changes.
  std::mt19937 rng(27);
  const int B = 1, S = 70, H = 2, D = 16;
  const RotaryVariant setup(kVariants[0], RopeLayout::kHalfSplit);
  const Tensor4 q = make(DType::kF32, B, S, H, D, false, &rng), k = make(DType::kF32, B, S, H, D, false, &rng),
                v = make(DType::kF32, B, S, H, D, false, &rng);
  Tensor4 near = make(DType::kF32, B, S, H, D, false, nullptr), far = make(DType::kF32, B, S, H, D, false, nullptr);
  AttentionParams p = with_rope(setup.rope, true, -1);
  attention(q.view, k.view, v.view, near.view, p);
  p.q_positions.offset = p.k_positions.offset = 1000;
  attention(q.view, k.view, v.view, far.view, p);
  EXPECT_LT(max_diff(near, far), 2e-5);
  p.rope.xpos.scale_base = 0;  // plain RoPE at the same positions: a different output
  attention(q.view, k.view, v.view, far.view, p);
  EXPECT_GT(max_diff(near, far), 1e-3);
}

TEST(AttentionRopeVariants, WhatTheKernelCannotDoIsAnErrorNamingIt) {
  std::mt19937 rng(28);
  const Tensor4 q = make(DType::kF32, 1, 8, 4, 16, false, &rng), k = make(DType::kF32, 1, 8, 2, 16, false, &rng),
                v = make(DType::kF32, 1, 8, 2, 16, false, &rng);
  Tensor4 out = make(DType::kF32, 1, 8, 4, 16, false, nullptr);
  const RotaryVariant setup(kVariants[3], RopeLayout::kHalfSplit);
  const auto message = [&](const AttentionParams& p) {
    try {
      attention(q.view, k.view, v.view, out.view, p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  AttentionParams p = with_rope(setup.rope, true, -1);
  p.rope.rotated_heads = 3;  // query heads 0..2: kv head 1 would serve one rotated and one plain head
  EXPECT_NE(message(p).find("rotated_heads 3 must be a multiple of the 2 query heads"), std::string::npos) << message(p);
  p = with_rope(setup.rope, true, -1);
  p.remap.kind = PositionRemapKind::kReRope;
  p.remap.window = 4;
  EXPECT_NE(message(p).find("a distance remap takes plain RoPE (xpos scale_base 48"), std::string::npos) << message(p);
  p = with_rope(setup.rope, true, -1);
  p.q_positions.offset = 100000;  // zeta_0^(m - c)/B past e^80
  EXPECT_NE(message(p).find("xPos"), std::string::npos) << message(p);
}

}  // namespace
}  // namespace posenc
