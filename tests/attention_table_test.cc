// Fused attention reads RoPE's cos/sin from a RopeTable (the table the RoPE kernels share) by
// position id. These tests pin the bits: the table's rows are exactly the per-token angles
// attention used to compute for itself (rope_cos_sin at each token's position on its
// frequency's axis), and attention's outputs and gradients are the same bits whether it reads a
// table passed in, a table it builds for the call, or cos/sin computed row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/error.h"
#include "posenc/rope_kernels.h"

#include "attention_test_support.h"

namespace posenc {
namespace {

using namespace attention_test;

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// The position ids the cases walk through, for B rows of `tokens` tokens (3 axes for M-RoPE).
enum class Ids { kImplicit, kSharedExplicit, kPerRow, kMrope };
const char* name(Ids ids) {
  static const char* names[] = {"implicit + offset", "explicit, shared", "explicit, per row", "M-RoPE"};
  return names[static_cast<int>(ids)];
}

struct Positions {
  std::vector<std::int64_t> values;
  PositionIds ids;
};

// shift: added to every position (a large one turns attention's own table off: cos/sin per row).
Positions positions(Ids kind, int B, int tokens, std::int64_t shift) {
  Positions p;
  const int axes = kind == Ids::kMrope ? 3 : 1;
  if (kind == Ids::kImplicit) {
    p.ids = PositionIds::implicit(7 + shift);
    return p;
  }
  for (int a = 0; a < axes; ++a)
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < tokens; ++t) {
        std::int64_t v = 3 * t + 2;                          // gaps: not consecutive
        if (kind == Ids::kPerRow) v = b == 0 ? t : t / 2;    // row 1 repeats positions (padding-like)
        if (kind == Ids::kMrope) v = a == 0 ? t : (t * (a + 3) + b) % 11;
        p.values.push_back(v + shift);
      }
  p.ids = PositionIds::explicit_ids(p.values.data(), axes, std::int64_t{B} * tokens);
  return p;
}

struct Rope {
  std::vector<float> inv_freq;
  std::vector<std::uint8_t> axes;
  RopeApplyParams params;
};

// 12 frequencies over D = 32 (partial rotary), the axes M-RoPE reads when mrope.
Rope rope(RopeLayout layout, bool mrope, bool hf_float32) {
  Rope r;
  for (int j = 0; j < 12; ++j) r.inv_freq.push_back(static_cast<float>(std::pow(10000.0, -j / 12.0)));
  if (mrope)
    for (int j = 0; j < 12; ++j) r.axes.push_back(static_cast<std::uint8_t>(j < 4 ? 0 : j < 8 ? 1 : 2));
  r.params = rope_apply_params(r.inv_freq, hf_float32 ? 1.0 : 1.25, layout, r.axes);
  if (hf_float32) r.params.angles = Numerics::kHfFloat32;
  return r;
}

TEST(AttentionTable, RowsAreTheAnglesOfEachTokensPositionBitForBit) {
  const int B = 2, tokens = 50;
  int compared = 0;
  for (Ids kind : {Ids::kImplicit, Ids::kSharedExplicit, Ids::kPerRow, Ids::kMrope})
    for (bool hf_float32 : {false, true}) {
      SCOPED_TRACE(std::string(name(kind)) + (hf_float32 ? ", HF float32 angles" : ""));
      const Rope r = rope(RopeLayout::kHalfSplit, kind == Ids::kMrope, hf_float32);
      const Positions pos = positions(kind, B, tokens, 0);
      const RopeTable table(r.params, 1);  // grows to what ensure() asks
      const auto rows = table.ensure(pos.values.empty() ? 7 + tokens : *std::max_element(pos.values.begin(), pos.values.end()));
      const int half = r.params.num_freqs;
      ASSERT_EQ(rows->num_freqs, half);
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < tokens; ++t)
          for (int j = 0; j < half; ++j) {
            // What attention computed per token before it read the table (its RowAngles).
            const std::int64_t at = pos.ids.at(r.axes.empty() ? 0 : r.axes[j], b, t, tokens);
            float c, s;
            rope_cos_sin(r.inv_freq[j], at, r.params, &c, &s);
            const std::size_t row = static_cast<std::size_t>(at) * half + j;
            ASSERT_EQ(bits(rows->cos[row]), bits(c)) << "cos, position " << at << ", frequency " << j;
            ASSERT_EQ(bits(rows->sin[row]), bits(s)) << "sin, position " << at << ", frequency " << j;
            ++compared;
          }
    }
  EXPECT_EQ(compared, 4 * 2 * B * tokens * 12);
}

// One RoPE problem: q [B, S, Hq, D] against k, v [B, T, Hk, D].
struct Call {
  Call(DType dtype, int S, int T, std::mt19937& rng)
      : q(make(dtype, kB, S, 4, kD, false, &rng)), k(make(dtype, kB, T, 2, kD, true, &rng)), v(make(dtype, kB, T, 2, kD, false, &rng)) {}
  static constexpr int kB = 2, kD = 32;
  Tensor4 q, k, v;

  // out's bytes and the lse (and, for float32, dq, dk and dv's bytes) of attention with options.
  std::vector<std::uint8_t> run(const AttentionParams& p, const RopeTable* table, std::mt19937 rng) const {
    const RopeTensor& qv = q.view;
    Tensor4 out = make(q.dtype, kB, qv.tokens, qv.heads, kD, false, nullptr);
    std::vector<float> lse(static_cast<std::size_t>(kB) * qv.heads * qv.tokens);
    AttentionOptions options;
    options.threads = 3;
    options.table = table;
    options.lse = lse.data();
    attention(q.view, k.view, v.view, out.view, p, options);
    std::vector<std::uint8_t> result = out.bytes;
    result.insert(result.end(), reinterpret_cast<const std::uint8_t*>(lse.data()),
                  reinterpret_cast<const std::uint8_t*>(lse.data() + lse.size()));
    if (q.dtype != DType::kF32) return result;
    const Tensor4 dout = make(DType::kF32, kB, qv.tokens, qv.heads, kD, false, &rng);
    Tensor4 dq = make(DType::kF32, kB, qv.tokens, qv.heads, kD, false, nullptr);
    Tensor4 dk = make(DType::kF32, kB, k.view.tokens, 2, kD, false, nullptr), dv = make(DType::kF32, kB, k.view.tokens, 2, kD, false, nullptr);
    attention_backward({q.view, k.view, v.view, out.view, dout.view, lse.data()}, {dq.view, dk.view, dv.view, nullptr}, p,
                       {3, table});
    for (const Tensor4* g : {&dq, &dk, &dv}) result.insert(result.end(), g->bytes.begin(), g->bytes.end());
    return result;
  }
};

TEST(AttentionTable, OutputsAndGradientsAreTheSameBitsWithATablePassedInOwnOrNone) {
  int cases = 0;
  const std::size_t targets = on_every_target([&] {
    std::mt19937 rng(5);
    for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved, RopeLayout::kDeepSeekV3})
      for (Ids kind : {Ids::kImplicit, Ids::kSharedExplicit, Ids::kPerRow, Ids::kMrope})
        for (DType dtype : {DType::kF32, DType::kBF16})
          for (bool decode : {false, true}) {
            SCOPED_TRACE(std::string(to_string(layout)) + ", " + name(kind) + ", " + to_string(dtype) + (decode ? ", decode" : ""));
            const int T = 70, S = decode ? 2 : T;
            const Call call(dtype, S, T, rng);
            const Rope r = rope(layout, kind == Ids::kMrope, dtype == DType::kBF16);
            for (std::int64_t shift : {std::int64_t{0}, std::int64_t{60000}}) {
              // Queries at the last S keys' positions (as a decode step after a cache).
              Positions kp = positions(kind, Call::kB, T, shift), qp = kp;
              if (kind == Ids::kImplicit) {
                qp.ids.offset += T - S;
              } else {
                qp.values.clear();
                for (int a = 0; a < kp.ids.axes; ++a)
                  for (int b = 0; b < Call::kB; ++b)
                    for (int t = 0; t < S; ++t) qp.values.push_back(kp.ids.at(a, b, T - S + t, T));
                qp.ids = PositionIds::explicit_ids(qp.values.data(), kp.ids.axes, std::int64_t{Call::kB} * S);
              }
              kp.ids.shared_across_batch = qp.ids.shared_across_batch = kind == Ids::kSharedExplicit;
              AttentionParams p;
              p.positions = AttentionPositions::kRope;
              p.rope = r.params;
              p.q_positions = qp.ids;
              p.k_positions = kp.ids;
              const RopeTable table(r.params, 1);
              // shift 0: attention builds its own table; 60000: it rotates row by row (rope_row_reference).
              const std::vector<std::uint8_t> passed = call.run(p, &table, rng), own = call.run(p, nullptr, rng);
              ASSERT_EQ(passed.size(), own.size());
              EXPECT_TRUE(passed == own) << (shift ? "a table against cos/sin per row" : "a table passed in against attention's own");
              const std::int64_t largest = kind == Ids::kImplicit ? kp.ids.at(0, 0, T - 1, T)
                                                                  : *std::max_element(kp.values.begin(), kp.values.end());
              EXPECT_GT(table.ensure(0)->positions, largest) << "the table grew to the call's largest position";
              ++cases;
            }
          }
  });
  EXPECT_EQ(cases, static_cast<int>(targets) * 3 * 4 * 2 * 2 * 2);
}

TEST(AttentionTable, ATableOfOtherFrequenciesIsAnError) {
  std::mt19937 rng(1);
  const Call call(DType::kF32, 4, 4, rng);
  const Rope r = rope(RopeLayout::kHalfSplit, false, false);
  Rope other = rope(RopeLayout::kHalfSplit, false, false);
  other.inv_freq[3] *= 2;
  other.params.inv_freq = other.inv_freq.data();
  const RopeTable table(other.params, 1);
  AttentionParams p;
  p.positions = AttentionPositions::kRope;
  p.rope = r.params;
  try {
    call.run(p, &table, rng);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built for other frequencies"), std::string::npos) << e.what();
  }
}

TEST(AttentionTable, ExtraBytesCountTheTableAttentionBuildsOnlyWithoutOne) {
  std::mt19937 rng(2);
  const Call call(DType::kF32, 100, 100, rng);
  const Rope r = rope(RopeLayout::kHalfSplit, false, false);
  AttentionParams p;
  p.positions = AttentionPositions::kRope;
  p.rope = r.params;
  const RopeTable table(r.params, 1);
  const std::int64_t with_table = attention_extra_bytes(call.q.view, call.k.view, p, {1, &table});
  const std::int64_t without = attention_extra_bytes(call.q.view, call.k.view, p, {1, nullptr});
  EXPECT_EQ(without - with_table, 128 * 2 * 12 * 4) << "positions 0 .. 99: 128 rows of 12 cos and 12 sin floats";
  p.q_positions.offset = p.k_positions.offset = 100000;  // past 2 (S + T) + 4096: cos/sin per row, no table
  EXPECT_EQ(attention_extra_bytes(call.q.view, call.k.view, p, {1, nullptr}), with_table);
}

}  // namespace
}  // namespace posenc
