// bf16 attention on AVX512-BF16 (posenc/attention_bf16.h): the output of every query row
// against attention_reference (double) on the same bf16 inputs, element by element within the
// header's bound, computed here from the reference's own scores and weights; which calls take
// the path; and the fallback (the f32 kernel, bit for bit) where the CPU lacks the instruction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention_bf16.h"
#include "attention_plan.h"
#include "attention_test_support.h"
#include "posenc/attention.h"
#include "posenc/attention_bf16.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

constexpr double kU = 1.0 / 512;  // bf16's unit roundoff: 8 significant bits, round to nearest

// Restores the CPU check however a test ends.
struct Bf16Disabled {
  Bf16Disabled() { allow_attention_bf16_for_test(false); }
  ~Bf16Disabled() { allow_attention_bf16_for_test(true); }
};

struct Outcome {
  double worst_ratio = 0;  // max over elements of |out - ref| / bound
  double worst_error = 0;
  int elements = 0, empty_rows = 0;
};

// attention() on the bf16 path against attention_reference, each element within the bound of
// attention_bf16.h (with its terms from the reference's scores s_j, a_j and weights pi_j), each
// row's log-sum-exp within Delta + u / (1 - u) + e_f; rows that see no key exactly 0 and -inf.
Outcome bf16_vs_reference(const Tensor4& q, const Tensor4& k, const Tensor4& v, const AttentionParams& p, DType out_dtype,
                          int threads) {
  const int B = q.view.batch, S = q.view.tokens, H = q.view.heads, D = q.view.head_dim, T = k.view.tokens;
  Tensor4 ref = make(DType::kF32, B, S, H, D, false, nullptr), fast = make(out_dtype, B, S, H, D, true, nullptr);
  std::vector<float> ref_lse(static_cast<std::size_t>(B) * H * S), fast_lse(ref_lse.size());
  AttentionOptions options;
  options.lse = ref_lse.data();
  attention_reference(q.view, k.view, v.view, ref.view, p, options);
  options.threads = threads;
  options.lse = fast_lse.data();
  EXPECT_TRUE(attention_runs_bf16(q.view, k.view, v.view, p, options));
  attention(q.view, k.view, v.view, fast.view, p, options);

  const attention_detail::Plan plan = attention_detail::make_plan(q.view, k.view, v.view, ref.view, p, nullptr);
  const double eps_s = (1 + kU) * (1 + kU) * (1 + (D + 1) * 0x1p-24) - 1;
  const double e_f = (T + 2.0 * T / 64 + 16) * 0x1p-24;
  std::vector<float> qr(D), kr(D), tmp(D);
  std::vector<double> s(T), a(T);
  Outcome o;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < S; ++i) {
        plan.load_query(b, i, h, qr.data(), tmp.data());
        double best = -std::numeric_limits<double>::infinity(), delta = 0;
        for (int j = 0; j < T; ++j) {
          s[j] = -std::numeric_limits<double>::infinity();
          if (!plan.visible(b, plan.past + i, j)) continue;
          plan.load_key(b, j, h / plan.group, kr.data(), tmp.data());
          double dot = 0, mag = 0;
          for (int c = 0; c < D; ++c) {
            dot += double{qr[c]} * kr[c];
            mag += std::abs(double{qr[c]} * kr[c]);
          }
          s[j] = dot * plan.scale + plan.bias(b, h, i, j);
          a[j] = mag * plan.scale;
          delta = std::max(delta, eps_s * a[j] + 0x1p-22 * std::abs(s[j]));
          best = std::max(best, s[j]);
        }
        const std::size_t row_lse = (static_cast<std::size_t>(b) * H + h) * S + i;
        if (best == -std::numeric_limits<double>::infinity()) {  // sees no key
          ++o.empty_rows;
          EXPECT_EQ(fast_lse[row_lse], -std::numeric_limits<float>::infinity()) << "b " << b << " h " << h << " i " << i;
          for (int c = 0; c < D; ++c) EXPECT_EQ(at(fast.view, b, i, h, c), 0.0f);
          continue;
        }
        double total = 0;
        for (int j = 0; j < T; ++j) total += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - best);
        const double factor = std::exp(2 * delta) * (1 + kU) / (1 - kU) * (1 + e_f) - 1;
        EXPECT_NEAR(fast_lse[row_lse], ref_lse[row_lse], delta + kU / (1 - kU) + e_f + 0x1p-22 * std::abs(ref_lse[row_lse]))
            << "b " << b << " h " << h << " i " << i;
        for (int c = 0; c < D; ++c) {
          double weighted = 0;  // sum_j pi_j |v_jc|
          for (int j = 0; j < T; ++j)
            if (!std::isinf(s[j])) weighted += std::exp(s[j] - best) / total * std::abs(at(v.view, b, j, h / plan.group, c));
          const double want = at(ref.view, b, i, h, c), got = at(fast.view, b, i, h, c);
          const double bound = factor * weighted + 0x1p-23 * std::abs(want) + (out_dtype == DType::kBF16 ? kU * std::abs(got) : 0.0);
          const double error = std::abs(got - want);
          EXPECT_LE(error, bound) << "b " << b << " h " << h << " i " << i << " c " << c;
          o.worst_ratio = std::max(o.worst_ratio, error / bound);
          o.worst_error = std::max(o.worst_error, error);
          ++o.elements;
        }
      }
  return o;
}

struct Case {
  const char* name;
  int S, T, Hq, Hk, D;
  AttentionPositions positions;
  bool causal;
  RopeLayout layout;
  bool padded;  // batch row 1's first 20 keys padding: its first 20 queries (causal) see no key
  DType out;
  int window;  // sliding window, 0: none
};

TEST(AttentionBf16, WithinTheBoundOfBf16RoundingAgainstTheDoubleReference) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the path is never taken (the fallback test covers it)";
  const std::vector<Case> cases = {
      {"alibi causal GQA, 2 query tiles and 5 key tiles, each last one partial", 300, 300, 4, 2, 64, AttentionPositions::kAlibi, true, RopeLayout::kHalfSplit, false, DType::kF32, 0},
      {"alibi symmetric, S < T, T not a tile multiple", 33, 100, 4, 2, 64, AttentionPositions::kAlibi, false, RopeLayout::kHalfSplit, false, DType::kF32, 0},
      {"rope half-split causal D 128, sliding window 70", 200, 200, 4, 1, 128, AttentionPositions::kRope, true, RopeLayout::kHalfSplit, false, DType::kF32, 70},
      {"rope interleaved D 40 (a partial vector of sums), bf16 out", 70, 70, 2, 2, 40, AttentionPositions::kRope, false, RopeLayout::kInterleaved, false, DType::kBF16, 0},
      {"no positions, odd D 33, rows that see no key", 90, 90, 2, 1, 33, AttentionPositions::kNone, true, RopeLayout::kHalfSplit, true, DType::kF32, 0},
      {"t5 causal, padding", 130, 130, 2, 2, 64, AttentionPositions::kT5, true, RopeLayout::kHalfSplit, true, DType::kF32, 0},
  };
  std::mt19937 rng(29);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int B = 2;
    BiasInputs setup;
    AttentionParams p = params_for(c.positions, setup, c.Hq, B, c.T, rng);
    p.mask.causal = c.causal;
    p.alibi_mode = c.causal ? AlibiMode::kCausal : AlibiMode::kSymmetric;
    p.t5.bidirectional = !c.causal;
    const RopeSchedule sched = testing::plain_schedule(c.D % 2 == 0 ? c.D : c.D - 1);
    p.rope = rope_apply_params(sched, c.layout);
    p.q_positions.offset = 5 + c.T - c.S;
    p.k_positions.offset = 5;
    p.mask.sliding_window = c.window;
    if (c.padded) {
      for (int j = 0; j < 20; ++j) setup.padding[static_cast<std::size_t>(c.T) + j] = 0;
      p.mask.key_padding = setup.padding.data();
    }
    Tensor4 q = make(DType::kBF16, B, c.S, c.Hq, c.D, false, &rng), k = make(DType::kBF16, B, c.T, c.Hk, c.D, true, &rng),
            v = make(DType::kBF16, B, c.T, c.Hk, c.D, false, &rng);
    const Outcome o = bf16_vs_reference(q, k, v, p, c.out, 2);
    EXPECT_EQ(o.empty_rows, c.padded && c.causal ? 20 * c.Hq : 0);
    // Not the reference's bits: the path rounds to bf16 (a test that would pass with the f32
    // kernel in its place checks nothing of the path).
    EXPECT_GT(o.worst_error, 1e-5);
    std::printf("bf16 attention, %s: %d elements, worst error %.3g, worst error / bound %.3f\n", c.name, o.elements, o.worst_error,
                o.worst_ratio);
  }
}

TEST(AttentionBf16, TakenOnlyForBf16InputsWithoutRemapAndWithATaskPerThread) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(1);
  const int S = attention_detail::kBf16QueryTile + 44;  // 2 query tiles
  Tensor4 q = make(DType::kBF16, 1, S, 2, 32, false, &rng), k = make(DType::kBF16, 1, S, 2, 32, false, &rng);
  Tensor4 k32 = make(DType::kF32, 1, S, 2, 32, false, &rng), k16 = make(DType::kF16, 1, S, 2, 32, false, &rng);
  AttentionParams p;
  AttentionOptions o;
  o.threads = 2;
  EXPECT_TRUE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  EXPECT_FALSE(attention_runs_bf16(q.view, k32.view, k.view, p, o));
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k16.view, p, o));
  o.bf16_dot_products = false;
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  o.bf16_dot_products = true;
  o.threads = 5;  // 2 heads x 2 query tiles: 4 tasks, the f32 kernel splits the keys
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  o.threads = 4;
  EXPECT_TRUE(attention_runs_bf16(q.view, k.view, k.view, p, o));
  p.positions = AttentionPositions::kRope;
  p.remap.kind = PositionRemapKind::kReRope;
  EXPECT_FALSE(attention_runs_bf16(q.view, k.view, k.view, p, o));
}

TEST(AttentionBf16, WithoutTheInstructionTheF32KernelRunsBitForBit) {
  // A CPU without AVX512-BF16 (forced): the same bits as bf16_dot_products = false, which is the
  // f32 kernel that attention_test.cc checks against the reference.
  std::mt19937 rng(2);
  const int B = 1, S = 100, T = 100, H = 4, D = 64;
  BiasInputs setup;
  AttentionParams p = params_for(AttentionPositions::kAlibi, setup, H, B, T, rng);
  Tensor4 q = make(DType::kBF16, B, S, H, D, false, &rng), k = make(DType::kBF16, B, T, H, D, false, &rng),
          v = make(DType::kBF16, B, T, H, D, false, &rng);
  Tensor4 forced = make(DType::kF32, B, S, H, D, false, nullptr), f32_kernel = make(DType::kF32, B, S, H, D, false, nullptr),
          native = make(DType::kF32, B, S, H, D, false, nullptr);
  AttentionOptions options;
  options.threads = 2;
  {
    const Bf16Disabled no_instruction;
    EXPECT_FALSE(attention_bf16_available());
    EXPECT_FALSE(attention_runs_bf16(q.view, k.view, v.view, p, options));
    attention(q.view, k.view, v.view, forced.view, p, options);
  }
  options.bf16_dot_products = false;
  attention(q.view, k.view, v.view, f32_kernel.view, p, options);
  EXPECT_EQ(forced.bytes, f32_kernel.bytes);
  if (!attention_bf16_available()) return;
  options.bf16_dot_products = true;  // and the path, where the CPU has it, is another computation
  attention(q.view, k.view, v.view, native.view, p, options);
  EXPECT_NE(native.bytes, f32_kernel.bytes);
}

TEST(AttentionBf16, KeysPackedAheadOrPerTaskGiveTheSameBits) {
  if (!attention_bf16_available()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(4);
  const int B = 2, S = 300, T = 300, Hq = 4, Hk = 2, D = 64;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (auto positions : {AttentionPositions::kAlibi, AttentionPositions::kRope}) {
    BiasInputs setup;
    AttentionParams p = params_for(positions, setup, Hq, B, T, rng);
    p.rope = rope_apply_params(sched);
    p.mask.sliding_window = 100;  // key ranges that start inside a tile
    Tensor4 q = make(DType::kBF16, B, S, Hq, D, false, &rng), k = make(DType::kBF16, B, T, Hk, D, true, &rng),
            v = make(DType::kBF16, B, T, Hk, D, false, &rng);
    Tensor4 ahead = make(DType::kF32, B, S, Hq, D, false, nullptr), per_task = make(DType::kF32, B, S, Hq, D, false, nullptr);
    AttentionOptions options;
    options.threads = 2;
    attention(q.view, k.view, v.view, ahead.view, p, options);
    attention_detail::set_bf16_pack_ahead_limit_for_test(0);
    attention(q.view, k.view, v.view, per_task.view, p, options);
    attention_detail::set_bf16_pack_ahead_limit_for_test(std::int64_t{256} << 20);
    EXPECT_EQ(ahead.bytes, per_task.bytes) << to_string(positions);
  }
}

TEST(AttentionBf16, ExtraBytesCoverItsTilesAndThePackedKeysAndValues) {
  std::mt19937 rng(3);
  for (int D : {1, 33, 64, 128, 256}) {
    Tensor4 q = make(DType::kBF16, 1, 10, 1, D, false, &rng);
    std::int64_t want = static_cast<std::int64_t>(sizeof(float)) * std::max<std::int64_t>(attention_detail::tile_floats(D, false), 0);
    if (attention_bf16_available())  // one tile of 64 keys, its channel pairs and its values in pairs of keys
      want = std::max<std::int64_t>(
          want, static_cast<std::int64_t>(sizeof(float) * attention_detail::bf16_tile_floats(D)) + 4 * ((D + 1) / 2 * 64 + 32 * ((D + 15) / 16 * 16)));
    EXPECT_EQ(attention_extra_bytes(q.view, q.view, AttentionParams{}, {1, nullptr}), want) << "D " << D;
  }
}

}  // namespace
}  // namespace posenc
