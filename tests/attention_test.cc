// Fused attention: the reference against a materialised softmax(q k^T * scale + bias + mask) v
// built from the core's own bias functions, and the tiled kernel against the reference for
// every position scheme, mask, dtype, memory order, GQA and cache offset, with the log-sum-exp
// per query row that the backward pass reads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/half.h"
#include "posenc/rope_schedule.h"

#include "attention_packed.h"
#include "attention_plan.h"
#include "attention_test_support.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using namespace attention_test;

// The libtorch way: the whole [S, T] score matrix per head, bias from alibi_add_bias_row /
// t5_compute_bias, masks written out, softmax, then the weighted sum. NoPE and biases only.
std::vector<double> materialised(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const AttentionParams& p,
                                 const std::vector<float>& t5_table) {
  const int B = q.batch, S = q.tokens, T = k.tokens, H = q.heads, D = q.head_dim, group = q.heads / k.heads;
  const std::int64_t past = p.mask.past >= 0 ? p.mask.past : T - S;
  const double scale = p.scale > 0 ? p.scale : 1 / std::sqrt(static_cast<double>(D));
  std::vector<double> out(static_cast<std::size_t>(B) * S * H * D, 0.0);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      std::vector<float> t5;
      if (p.positions == AttentionPositions::kT5) t5 = t5_compute_bias(t5_table, H, S, T, past, p.t5);  // positions = indices
      for (int i = 0; i < S; ++i) {
        std::vector<float> bias(T, 0.0f);
        if (p.positions == AttentionPositions::kAlibi) alibi_add_bias_row(p.alibi_slopes[h], past + i, 0, T, p.alibi_mode, bias.data());
        if (p.positions == AttentionPositions::kT5)
          for (int j = 0; j < T; ++j) bias[j] = t5[(static_cast<std::size_t>(h) * S + i) * T + j];
        std::vector<double> s(T, -std::numeric_limits<double>::infinity());
        double best = s[0];
        for (int j = 0; j < T; ++j) {
          const std::int64_t pos = past + i;
          bool ok = !(p.mask.causal && j > pos);
          ok = ok && !(p.mask.key_padding && !p.mask.key_padding[b * T + j]);
          ok = ok && !(p.mask.sliding_window > 0 && pos - j >= p.mask.sliding_window);
          ok = ok && !(p.mask.chunk > 0 && j / p.mask.chunk != pos / p.mask.chunk);
          if (!ok) continue;
          double dot = 0;
          for (int c = 0; c < D; ++c) dot += static_cast<double>(at(q, b, i, h, c)) * at(k, b, j, h / group, c);
          s[j] = dot * scale + bias[j];
          best = std::max(best, s[j]);
        }
        double total = 0;
        for (int j = 0; j < T; ++j) total += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - best);
        for (int j = 0; j < T && total > 0; ++j) {
          if (std::isinf(s[j])) continue;
          const double w = std::exp(s[j] - best) / total;
          for (int c = 0; c < D; ++c) out[((static_cast<std::size_t>(b) * S + i) * H + h) * D + c] += w * at(v, b, j, h / group, c);
        }
      }
    }
  }
  return out;
}

double max_abs(const std::vector<double>& a, const Tensor4& out) {
  const RopeTensor& o = out.view;
  double worst = 0;
  for (int b = 0; b < o.batch; ++b)
    for (int i = 0; i < o.tokens; ++i)
      for (int h = 0; h < o.heads; ++h)
        for (int c = 0; c < o.head_dim; ++c)
          worst = std::max(worst, std::abs(a[((static_cast<std::size_t>(b) * o.tokens + i) * o.heads + h) * o.head_dim + c] -
                                           at(o, b, i, h, c)));
  return worst;
}

TEST(Attention, ReferenceEqualsTheMaterialisedSoftmax) {
  std::mt19937 rng(1);
  const int B = 2, S = 5, T = 9, H = 4, Hk = 2, D = 8;
  for (auto positions : {AttentionPositions::kNone, AttentionPositions::kAlibi, AttentionPositions::kT5})
    for (int mask = 0; mask < 5; ++mask) {  // causal, bidirectional, padding, sliding window, chunked
      SCOPED_TRACE(std::to_string(static_cast<int>(positions)) + " mask " + std::to_string(mask));
      BiasInputs setup;
      AttentionParams p = params_for(positions, setup, H, B, T, rng);
      const bool causal = mask != 1;
      p.mask.causal = causal;
      if (mask == 2) {
        setup.padding[0] = setup.padding[1] = setup.padding[T + 4] = 0;
        p.mask.key_padding = setup.padding.data();
      }
      if (mask == 3) p.mask.sliding_window = 3;
      if (mask == 4) p.mask.chunk = 4;
      p.t5.bidirectional = !causal;
      p.alibi_mode = causal ? AlibiMode::kCausal : AlibiMode::kSymmetric;
      p.q_positions.offset = T - S;  // bias positions = key indices, as materialised() assumes
      Tensor4 q = make(DType::kF32, B, S, H, D, false, &rng), k = make(DType::kF32, B, T, Hk, D, true, &rng),
              v = make(DType::kF32, B, T, Hk, D, false, &rng), out = make(DType::kF32, B, S, H, D, false, nullptr);
      attention_reference(q.view, k.view, v.view, out.view, p);
      EXPECT_LE(max_abs(materialised(q.view, k.view, v.view, p, setup.t5_table), out), 1e-6);
    }
}

TEST(Attention, RopeRotatesQueriesAndKeysAsTheyLoad) {
  // kRope over q, k equals kNone over q, k rotated in place beforehand (rope_apply_reference).
  std::mt19937 rng(2);
  const int B = 1, S = 4, T = 7, H = 2, D = 16;
  RopeParams rp;
  rp.head_dim = D;
  rp.partial_rotary_factor = 0.5;
  const RopeSchedule s = compute_schedule(rp);
  Tensor4 q = make(DType::kF32, B, S, H, D, false, &rng), k = make(DType::kF32, B, T, H, D, false, &rng),
          v = make(DType::kF32, B, T, H, D, false, &rng), out = make(DType::kF32, B, S, H, D, false, nullptr),
          expected = make(DType::kF32, B, S, H, D, false, nullptr);
  AttentionParams p;
  p.positions = AttentionPositions::kRope;
  p.rope = rope_apply_params(s, RopeLayout::kInterleaved);
  p.q_positions.offset = 100 + T - S;
  p.k_positions.offset = 100;
  attention_reference(q.view, k.view, v.view, out.view, p);
  rope_apply_reference(q.view, p.q_positions, p.rope);
  rope_apply_reference(k.view, p.k_positions, p.rope);
  p.positions = AttentionPositions::kNone;
  attention_reference(q.view, k.view, v.view, expected.view, p);
  EXPECT_EQ(out.bytes, expected.bytes);
}

TEST(Attention, TiledEqualsTheReferenceForEverySchemeMaskAndDtype) {
  std::mt19937 rng(3);
  const int B = 2, Hq = 4, Hk = 2, D = 40;  // 40: a whole pair of vectors and a scalar tail on every target
  const RopeSchedule sched = testing::plain_schedule(D);
  int cases = 0;
  const std::size_t targets = on_every_target([&] {
  // S, T: prefill within one query tile, and spanning two (the second partial: 128-row
  // tiles) and several key tiles; decode (S = 1) after a long cache.
  for (const auto& [S, T] : {std::pair{70, 70}, std::pair{1, 150}, std::pair{33, 100}, std::pair{200, 200}})
    for (auto positions : {AttentionPositions::kNone, AttentionPositions::kRope, AttentionPositions::kAlibi, AttentionPositions::kT5})
      for (int mask = 0; mask < 5; ++mask)  // causal, bidirectional, padding, sliding window, chunked
        for (DType dtype : {DType::kF32, DType::kBF16}) {
          SCOPED_TRACE("S " + std::to_string(S) + " T " + std::to_string(T) + " positions " + std::to_string(static_cast<int>(positions)) +
                       " mask " + std::to_string(mask) + " " + to_string(dtype));
          BiasInputs setup;
          AttentionParams p = params_for(positions, setup, Hq, B, T, rng);
          p.rope = rope_apply_params(sched, RopeLayout::kHalfSplit);
          p.mask.causal = mask != 1;
          if (mask == 2) {
            for (int j = 0; j < 20; ++j) setup.padding[j] = 0;          // batch row 0: left padding
            for (int j = 0; j < T; ++j) setup.padding[T + j] = j % 3 != 1;  // row 1: holes
            p.mask.key_padding = setup.padding.data();
          }
          if (mask == 3) p.mask.sliding_window = 17;
          if (mask == 4) p.mask.chunk = 40;
          p.q_positions.offset = 7 + T - S;
          p.k_positions.offset = 7;
          Tensor4 q = make(dtype, B, S, Hq, D, cases % 2, &rng), k = make(dtype, B, T, Hk, D, false, &rng),
                  v = make(dtype, B, T, Hk, D, true, &rng);
          EXPECT_LE(tiled_vs_reference(q, k, v, p, 2, true), 2e-5);
          ++cases;
        }
  });
  EXPECT_EQ(cases, static_cast<int>(targets) * 4 * 4 * 5 * 2);
  std::printf("attention: %d cases on %zu targets match the reference\n", cases, targets);
}

TEST(Attention, AQueryThatSeesNoKeyGetsZerosNotNaN) {
  std::mt19937 rng(4);
  const int S = 3, T = 3, H = 1, D = 4;
  Tensor4 q = make(DType::kF32, 1, S, H, D, false, &rng), k = make(DType::kF32, 1, T, H, D, false, &rng),
          v = make(DType::kF32, 1, T, H, D, false, &rng), out = make(DType::kF32, 1, S, H, D, false, nullptr),
          ref = make(DType::kF32, 1, S, H, D, false, nullptr);
  std::fill(out.bytes.begin(), out.bytes.end(), 0xFF);  // NaN everywhere: each must be overwritten
  std::fill(ref.bytes.begin(), ref.bytes.end(), 0xFF);
  const std::vector<std::uint8_t> none(T, 0);
  AttentionParams p;
  p.mask.key_padding = none.data();
  std::vector<float> lse(S, kUnwritten), ref_lse(S, kUnwritten);
  AttentionOptions options;
  options.lse = lse.data();
  attention(q.view, k.view, v.view, out.view, p, options);
  options.lse = ref_lse.data();
  attention_reference(q.view, k.view, v.view, ref.view, p, options);
  for (int i = 0; i < S; ++i) {
    EXPECT_EQ(lse[i], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(ref_lse[i], -std::numeric_limits<float>::infinity());
  }
  for (int i = 0; i < S * D; ++i) {
    float a, b;
    std::memcpy(&a, &out.bytes[4 * i], 4);
    std::memcpy(&b, &ref.bytes[4 * i], 4);
    EXPECT_EQ(a, 0.0f);
    EXPECT_EQ(b, 0.0f);
  }
}

TEST(Attention, BadInputIsAnErrorNamingIt) {
  std::mt19937 rng(5);
  Tensor4 q = make(DType::kF32, 1, 4, 3, 8, false, &rng), k = make(DType::kF32, 1, 4, 2, 8, false, &rng),
          out = make(DType::kF32, 1, 4, 3, 8, false, nullptr);
  AttentionParams p;
  const auto expect_message = [&](const RopeTensor& kk, const AttentionParams& pp, const std::string& fragment) {
    try {
      attention(q.view, kk, kk, out.view, pp);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_message(k.view, p, "multiple of kv heads 2");
  Tensor4 k1 = make(DType::kF32, 1, 4, 1, 8, false, &rng);
  p.positions = AttentionPositions::kAlibi;
  expect_message(k1.view, p, "one slope per query head");
  p.positions = AttentionPositions::kNone;
  p.mask.sliding_window = -1;
  expect_message(k1.view, p, "sliding_window");
  p.mask.sliding_window = 0;
  Tensor4 short_k = make(DType::kF32, 1, 2, 1, 8, false, &rng);
  expect_message(short_k.view, p, "must be >= S");
  // The rotary variants the tiles apply (attention_rope_variants_test.cc) keep rope's own checks.
  p.positions = AttentionPositions::kRope;
  const RopeSchedule sched = testing::plain_schedule(8);
  p.rope = rope_apply_params(sched);
  p.rope.channel_offset = 2;  // 4 pairs from channel 2 need 10 channels
  expect_message(k1.view, p, "channel_offset 2 must be in [0, head_dim 8");
  p.positions = AttentionPositions::kNone;
  AttentionOptions o;
  o.threads = 100000;
  EXPECT_THROW(attention(q.view, k1.view, k1.view, out.view, p, o), Error);
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

using namespace attention_test;

TEST(Attention, DecodeSplitsTheKeysAcrossThreads) {
  // One query, one head, a long cache and more threads than (batch x heads): the keys are split
  // and the partial softmaxes merged. Causal, windowed and padded, with ALiBi and RoPE.
  std::mt19937 rng(7);
  const int T = 1000, D = 32;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (auto positions : {AttentionPositions::kNone, AttentionPositions::kAlibi, AttentionPositions::kRope})
    for (int mask = 0; mask < 3; ++mask) {
      BiasInputs setup;
      AttentionParams p = params_for(positions, setup, 1, 1, T, rng);
      p.rope = rope_apply_params(sched);
      if (mask == 1) p.mask.sliding_window = 300;
      if (mask == 2) {
        for (int j = 0; j < 700; ++j) setup.padding[j] = 0;  // only the last 300 keys are real
        p.mask.key_padding = setup.padding.data();
      }
      Tensor4 q = make(DType::kF32, 1, 1, 1, D, false, &rng), k = make(DType::kF32, 1, T, 1, D, false, &rng),
              v = make(DType::kF32, 1, T, 1, D, false, &rng);
      // 5 threads: 5 splits of the keys
      EXPECT_LE(tiled_vs_reference(q, k, v, p, 5), 2e-5) << static_cast<int>(positions) << " mask " << mask;
    }
}

TEST(Attention, SplitKeysWithSeveralQueriesHeadsAndBiases) {
  // More threads than tasks with S > 1, GQA and every position scheme: the split and the merge.
  std::mt19937 rng(8);
  const int B = 1, S = 33, T = 1000, Hq = 4, Hk = 2, D = 40;
  const RopeSchedule sched = testing::plain_schedule(D);
  for (auto positions : {AttentionPositions::kNone, AttentionPositions::kRope, AttentionPositions::kAlibi, AttentionPositions::kT5}) {
    BiasInputs setup;
    AttentionParams p = params_for(positions, setup, Hq, B, T, rng);
    p.rope = rope_apply_params(sched);
    p.mask.sliding_window = 700;
    p.q_positions.offset = T - S;
    Tensor4 q = make(DType::kF32, B, S, Hq, D, false, &rng), k = make(DType::kF32, B, T, Hk, D, false, &rng),
            v = make(DType::kF32, B, T, Hk, D, false, &rng);
    // 16 threads on 8 tasks: each split in two
    EXPECT_LE(tiled_vs_reference(q, k, v, p, 16), 2e-5) << static_cast<int>(positions);
  }
}

TEST(Attention, ExplicitScatteredPositionIds) {
  // Packed sequences and gaps: T5's per-element bucket path, ALiBi and RoPE on explicit ids.
  std::mt19937 rng(6);
  const int B = 2, S = 40, T = 90, H = 2, D = 16;
  std::vector<std::int64_t> qids(static_cast<std::size_t>(B) * S), kids(static_cast<std::size_t>(B) * T);
  std::uniform_int_distribution<std::int64_t> any(0, 100000);
  for (auto& x : qids) x = any(rng);
  for (auto& x : kids) x = any(rng);
  const RopeSchedule sched = testing::plain_schedule(D);
  for (auto positions : {AttentionPositions::kAlibi, AttentionPositions::kT5, AttentionPositions::kRope}) {
    BiasInputs setup;
    AttentionParams p = params_for(positions, setup, H, B, T, rng);
    p.rope = rope_apply_params(sched);  // RoPE with per-row ids: rotated row by row
    p.mask.causal = false;
    p.alibi_mode = AlibiMode::kSymmetric;
    p.t5.bidirectional = true;
    p.q_positions = {qids.data(), 1, 0};
    p.k_positions = {kids.data(), 1, 0};
    Tensor4 q = make(DType::kF32, B, S, H, D, false, &rng), k = make(DType::kF32, B, T, H, D, false, &rng),
            v = make(DType::kF32, B, T, H, D, false, &rng);
    EXPECT_LE(tiled_vs_reference(q, k, v, p, 1), 2e-5) << static_cast<int>(positions);
  }
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// The keys and values packed once per call when a key tile is read twice (attention_packed.h):
// more than one query tile (S > 128) or GQA. attention_extra_bytes counts them; one query tile
// of one head per kv head packs nothing.
TEST(Attention, ExtraBytesCountThePackedKeysWhenATileIsReadTwice) {
  std::mt19937 rng(9);
  const int D = 40, T = 150;  // 3 key tiles of 64
  const std::int64_t tiles = std::int64_t{sizeof(float)} * attention_detail::tile_floats(D, 0);
  const std::int64_t packed = 2 * std::int64_t{2} * 3 * 64 * D * static_cast<std::int64_t>(sizeof(float));  // B 2, Hk 1
  for (const auto& [S, Hq, packs] : {std::tuple{100, 1, false}, std::tuple{200, 1, true}, std::tuple{100, 2, true}}) {
    SCOPED_TRACE("S " + std::to_string(S) + " Hq " + std::to_string(Hq));
    Tensor4 q = make(DType::kF32, 2, S, Hq, D, false, &rng), k = make(DType::kF32, 2, T, 1, D, false, &rng);
    EXPECT_EQ(attention_extra_bytes(q.view, k.view, AttentionParams{}, {1, nullptr}), tiles + (packs ? packed : 0));
  }
}

// The forward packs its (batch row, kv head) groups a batch at a time within its limit: several
// batches give the reference's values, and a group over the limit is not packed (S = 32768, 8
// heads, D = 64 keeps its few hundred KiB).
TEST(Attention, PackedGroupsInBatchesWithinTheLimit) {
  std::mt19937 rng(10);
  const int B = 2, S = 200, T = 200, Hq = 4, Hk = 2, D = 40;
  const RopeSchedule sched = testing::plain_schedule(D);
  AttentionParams p;
  p.positions = AttentionPositions::kRope;
  p.rope = rope_apply_params(sched, RopeLayout::kHalfSplit);
  Tensor4 q = make(DType::kF32, B, S, Hq, D, false, &rng), k = make(DType::kF32, B, T, Hk, D, false, &rng),
          v = make(DType::kF32, B, T, Hk, D, false, &rng);
  const std::int64_t group = 4 * 64 * D * 2 * static_cast<std::int64_t>(sizeof(float));  // 4 key tiles, kt and v rows
  for (const std::int64_t limit : {group, 3 * group, std::int64_t{1} << 30}) {  // 4 batches, 2 (3 + 1), 1
    SCOPED_TRACE(limit);
    attention_detail::set_forward_pack_limit_for_test(limit);
    EXPECT_EQ(attention_detail::forward_groups_per_batch(q.view, k.view), std::min<std::int64_t>(limit / group, 4));
    EXPECT_LE(tiled_vs_reference(q, k, v, p, 2), 2e-5);
  }
  attention_detail::set_forward_pack_limit_for_test(group - 1);
  EXPECT_EQ(attention_detail::forward_groups_per_batch(q.view, k.view), 0) << "a group over the limit: not packed";
  EXPECT_LE(tiled_vs_reference(q, k, v, p, 2), 2e-5);
  attention_detail::set_forward_pack_limit_for_test(attention_detail::kForwardPackBytes);
  const RopeTensor long_q = strided(nullptr, DType::kF32, {1, 32768, 8, 64}, {0, 512, 64});
  EXPECT_LT(attention_extra_bytes(long_q, long_q, AttentionParams{}, {1, nullptr}), std::int64_t{1} << 20);
}

}  // namespace
}  // namespace posenc
