// Remapped RoPE distances in fused attention (Self-Extend, ReRoPE, leaky ReRoPE, DCA): the tiled kernel
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
#include "posenc/error.h"

#include "attention_remap_support.h"
#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

TEST(AttentionRemap, EqualsTheDistanceMatrixReferenceForEveryMaskDtypeAndTarget) {
  std::mt19937 rng(21);
  const int B = 2, Hq = 4, Hk = 2, D = 40;
  const RopeSchedule sched = yarn_partial_schedule(D);
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
          const std::vector<double> expected = explicit_attention(q.view, k.view, v.view, p).out;
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
  EXPECT_EQ(cases, 3 * kRemapCount * 5 * 2);
  EXPECT_LE(worst_reference, 2e-6);
}

TEST(AttentionRemap, PlainLimitsGivePlainRopesBits) {
  // Self-Extend G = 1, ReRoPE with w beyond every distance, leaky k = 1, DCA with a chunk beyond
  // every position: plain RoPE, bit for bit.
  std::mt19937 rng(22);
  const int B = 1, S = 200, T = 200, Hq = 2, Hk = 1, D = 64;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (const PositionRemap& remap : {remap_of(PositionRemapKind::kSelfExtend, 24, 1), remap_of(PositionRemapKind::kReRope, 1000),
                                     remap_of(PositionRemapKind::kLeakyReRope, 24, 1, 1.0), dual_chunk(100000, 8)})
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
    EXPECT_LE(worst_vs(explicit_attention(q.view, k.view, v.view, p).out, out.view), 1e-5);
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
  expect_message(dual_chunk(8, 0), "remap dual-chunk: local_size = 0 must be in [1, 2^31-1]", good);
  expect_message(dual_chunk(8, 8), "remap dual-chunk: chunk_size = 8 must be > local_size = 8", good);
  expect_message(dual_chunk(std::int64_t{1} << 31, 8), "chunk_size = 2147483648 must be > local_size = 8", good);
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
}

TEST(AttentionRemap, DualChunkDistancesAreVllms) {
  // chunk_size 48, local_size 16: c = 32. Query 100 (chunk 3, 100 mod 32 = 4), query 120 (mod 24).
  const PositionRemap r = dual_chunk(48, 16);
  EXPECT_EQ(remapped_distance(r, 100, 97), 3);        // intra-chunk: 4 - 1
  EXPECT_EQ(remapped_distance(r, 100, 70), 36 - 6);   // successive: min(4 + 32, 48) - 70 mod 32
  EXPECT_EQ(remapped_distance(r, 120, 70), 48 - 6);   // successive, clamped: min(24 + 32, 48) - 6
  EXPECT_EQ(remapped_distance(r, 100, 10), 48 - 10);  // inter-chunk: min(2 * 32 - 1, 48) - 10
  EXPECT_EQ(remapped_distance(r, 100, 130), -30);     // a later chunk (bidirectional): plain
  EXPECT_EQ(remapped_distance(dual_chunk(40, 30), 35, 3), 19 - 3);  // c = 10: inter query 2c - 1
}

TEST(AttentionRemap, RemappedDistanceIsThePapersFormula) {
  for (const PositionRemap& r : kRemaps)
    for (std::int64_t i : {0, 5, 40, 99, 1000})
      for (std::int64_t j : {0, 3, 39, 99, 400})
        EXPECT_DOUBLE_EQ(remapped_distance(r, i, j), paper_distance(r, i, j)) << to_string(r.kind) << " " << i << " " << j;
}

}  // namespace
}  // namespace posenc
