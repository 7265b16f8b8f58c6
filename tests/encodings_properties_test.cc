// The behaviour of each encoding: the claimed properties, posenc's choices, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "posenc/alibi.h"
#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/learned.h"
#include "posenc/mrope.h"
#include "posenc/properties.h"
#include "posenc/rope_apply.h"
#include "posenc/schemes.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc/transformer_xl.h"
#include "rope_params_fixtures.h"

namespace posenc {

namespace {

TEST(PropertyChecks, AllPassAtTypicalDims) {
  for (int dim : {64, 128}) {
    CheckOptions o;
    o.dim = dim;
    const auto checks = run_property_checks(o);
    EXPECT_EQ(checks.size(), 25u);
    for (const auto& c : checks) EXPECT_TRUE(c.pass()) << dim << " " << c.name << ": " << c.measured << " > " << c.tolerance;
  }
}

TEST(PropertyChecks, DecayClaimNeedsManyFrequencies) {
  // Honest limit: with 2 frequencies the bound oscillates instead of decaying.
  CheckOptions o;
  o.dim = 4;
  o.positions = 1000;
  bool seen = false;
  for (const auto& c : run_property_checks(o)) {
    if (c.name != "rope.decay") continue;
    seen = true;
    EXPECT_FALSE(c.pass()) << c.measured;
  }
  EXPECT_TRUE(seen);
}

TEST(Sinusoidal, OddDimensions) {
  float row[7];
  SinusoidalParams p{7, SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani, 10000.0};
  sinusoidal_row(p, 3.0, row);
  EXPECT_FLOAT_EQ(row[6], static_cast<float>(std::sin(3.0 * std::pow(10000.0, -6.0 / 7))));  // 4 sin, 3 cos
  p.layout = SinusoidalLayout::kHalves;
  sinusoidal_row(p, 3.0, row);
  EXPECT_FLOAT_EQ(row[3], static_cast<float>(std::sin(3.0 * std::pow(10000.0, -6.0 / 7))));  // sin half is 4 wide
  EXPECT_FLOAT_EQ(row[4], static_cast<float>(std::cos(3.0)));
  p.freqs = SinusoidalFreqs::kFairseq;
  sinusoidal_row(p, 3.0, row);
  EXPECT_EQ(row[6], 0.0f);  // fairseq pads odd d with a zero column
  EXPECT_FLOAT_EQ(row[2], static_cast<float>(std::sin(3.0 * 1e-4)));  // last pair has frequency 1/base
}

TEST(Sinusoidal, NoLengthCeilingAndRotationGenerationAtLargePositions) {
  const SinusoidalParams p{64, SinusoidalLayout::kHalves, SinusoidalFreqs::kVaswani, 10000.0};
  const std::int64_t start = std::int64_t{1} << 30;
  const auto rolled = sinusoidal_table_by_rotation(p, start, 300, 64);
  std::vector<std::int64_t> positions;
  for (int i = 0; i < 300; ++i) positions.push_back(start + i);
  const auto direct = sinusoidal_table(p, positions);
  for (std::size_t i = 0; i < direct.size(); ++i) ASSERT_NEAR(direct[i], rolled[i], 1e-6) << i;
}

TEST(Sinusoidal, BadOptions) {
  EXPECT_THROW(validate(SinusoidalParams{0, SinusoidalLayout::kHalves, SinusoidalFreqs::kVaswani, 10000.0}), Error);
  EXPECT_THROW(validate(SinusoidalParams{2, SinusoidalLayout::kHalves, SinusoidalFreqs::kFairseq, 10000.0}), Error);
  EXPECT_THROW(validate(SinusoidalParams{8, SinusoidalLayout::kHalves, SinusoidalFreqs::kVaswani, -1.0}), Error);
}

TEST(Alibi, NonPowerOfTwoAndShards) {
  const auto s12 = alibi_slopes(12);
  for (int h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(s12[h], std::exp2(-(h + 1.0)));      // the 8-head sequence
  for (int h = 0; h < 4; ++h) EXPECT_DOUBLE_EQ(s12[8 + h], std::exp2(-(2 * h + 1) / 2.0));  // odd terms of 16
  const auto shard = alibi_slopes_for_heads(12, 4, 4);
  EXPECT_EQ(shard, std::vector<double>(s12.begin() + 4, s12.begin() + 8));
  EXPECT_THROW(alibi_slopes(0), Error);
  EXPECT_THROW(alibi_slopes_for_heads(12, 10, 4), Error);
}

TEST(Alibi, CausalAndSymmetricRows) {
  std::vector<float> causal(6, 0.0f), sym(6, 0.0f);
  alibi_add_bias_row(0.5, 3, 0, 6, AlibiMode::kCausal, causal.data());
  alibi_add_bias_row(0.5, 3, 0, 6, AlibiMode::kSymmetric, sym.data());
  EXPECT_EQ(causal, (std::vector<float>{-1.5f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f}));
  EXPECT_EQ(sym, (std::vector<float>{-1.5f, -1.0f, -0.5f, 0.0f, -0.5f, -1.0f}));
}

TEST(T5, GuardsAndLimits) {
  EXPECT_THROW(validate(T5BucketParams{1, 128, false}), Error);
  EXPECT_THROW(validate(T5BucketParams{2, 128, true}), Error);
  EXPECT_THROW(validate(T5BucketParams{32, 8, true}), Error);  // max_distance <= exact range
  EXPECT_NO_THROW(validate(T5BucketParams{2, 2, false}));
  for (bool bidirectional : {true, false}) {
    const T5BucketParams p{32, 128, bidirectional};
    EXPECT_EQ(t5_bucket(0, p), 0);
    const int far = t5_bucket(-(std::int64_t{1} << 40), p);  // no overflow, no UB: the last bucket
    EXPECT_EQ(far, bidirectional ? 15 : 31);
  }
  EXPECT_EQ(t5_bucket(5, T5BucketParams{32, 128, false}), 0) << "causal: future keys share bucket 0";
}

TEST(T5, BiasRowEqualsComputeBias) {
  const T5BucketParams p{32, 128, false};
  const int heads = 2, q = 3, k = 300;
  std::vector<float> table(32 * heads);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) - 20.0f;
  const auto full = t5_compute_bias(table, heads, q, k, 7, p);
  for (int h = 0; h < heads; ++h) {
    std::vector<float> column(32);
    for (int b = 0; b < 32; ++b) column[b] = table[b * heads + h];
    for (int i = 0; i < q; ++i) {
      std::vector<float> row(k, 1.0f);
      t5_add_bias_row(column.data(), p, i + 7, 0, k, row.data());
      for (int j = 0; j < k; ++j) ASSERT_EQ(row[j], 1.0f + full[(static_cast<std::size_t>(h) * q + i) * k + j]) << j;
    }
  }
}

TEST(Learned, LookupErrorsInitAndInterpolation) {
  const LearnedTable t = learned_init(16, 4, 0.02, 7);
  EXPECT_EQ(t.weight, learned_init(16, 4, 0.02, 7).weight) << "deterministic";
  EXPECT_NE(t.weight, learned_init(16, 4, 0.02, 8).weight);
  double sq = 0;
  const LearnedTable big = learned_init(1000, 64, 0.02, 1);
  for (float w : big.weight) sq += w * w;
  EXPECT_NEAR(std::sqrt(sq / big.weight.size()), 0.02, 0.001);
  std::vector<float> out(4);
  const std::int64_t past_end = 16;
  try {
    learned_lookup(t, &past_end, 1, 0, out.data());
    ADD_FAILURE() << "lookup past the table must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 16"), std::string::npos) << e.what();
  }
  const std::int64_t p = 3;
  EXPECT_THROW(learned_lookup(t, &p, 1, 13, out.data()), Error) << "KV-cache offset counts";
  EXPECT_EQ(learned_interpolate(t, 16).weight, t.weight) << "same length: identity";
  LearnedTable ramp{4, 1, 0, {0, 1, 2, 3}};
  const auto stretched = learned_interpolate(ramp, 8).weight;  // half-pixel centres
  EXPECT_FLOAT_EQ(stretched[0], 0.0f);
  EXPECT_FLOAT_EQ(stretched[1], 0.25f);
  EXPECT_FLOAT_EQ(stretched[2], 0.75f);
  EXPECT_FLOAT_EQ(stretched[7], 3.0f);
}

TEST(Learned, OptPadsReadRowOne) {
  LearnedTable t{4, 1, 2, {10, 11, 12, 13, 14, 15}};
  const std::int64_t positions[3] = {-1, 0, 3};  // OPT: pads carry position -1
  std::vector<float> out(3);
  learned_lookup(t, positions, 3, 0, out.data());
  EXPECT_EQ(out, (std::vector<float>{11, 12, 15}));
}

TEST(Deberta, LogBuckets) {
  const int buckets = 256, max_pos = 512;
  for (std::int64_t r = -128; r <= 128; ++r) EXPECT_EQ(deberta_log_bucket(r, buckets, max_pos), r);
  std::int64_t previous = 128;
  for (std::int64_t r = 129; r < 5000; ++r) {
    const std::int64_t b = deberta_log_bucket(r, buckets, max_pos);
    EXPECT_EQ(deberta_log_bucket(-r, buckets, max_pos), -b) << "odd symmetry";
    EXPECT_GE(b, previous) << r;
    previous = b;
  }
  EXPECT_LE(deberta_log_bucket(511, buckets, max_pos), 255);
}

TEST(Deberta, ScoresSplitIntoThreeTerms) {
  const int q = 3, k = 4, d = 2, span = 4;
  const DebertaRelativeParams params{0, span};
  std::vector<float> qc = {1, 0, 0, 1, 1, 1}, kc = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> zeros(2 * span * d, 0.0f), rows(2 * span * d);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  const auto c2c = deberta_scores({qc.data(), kc.data(), zeros.data(), zeros.data(), q, k, d}, params);
  EXPECT_FLOAT_EQ(c2c[0], 1.0f / std::sqrt(6.0f));  // (1,0).(1,2) / sqrt(3 d)
  const auto c2p = deberta_scores({qc.data(), kc.data(), rows.data(), zeros.data(), q, k, d}, params);
  // i = 0, j = 1: delta = -1 -> row 3 = (6, 7); qc_0 = (1, 0) -> 6 extra.
  EXPECT_FLOAT_EQ(c2p[1] - c2c[1], 6.0f / std::sqrt(6.0f));
  EXPECT_THROW(deberta_relative_positions(2, 2, {2, 512}), Error);
}

TEST(TransformerXl, MaskAndClamp) {
  const int d = 2, qlen = 2, mlen = 1;
  std::vector<float> q(qlen * d, 1.0f), k(3 * d, 1.0f), r(3 * d, 0.0f), u(d, 0.0f), v(d, 0.0f);
  const auto s = xl_scores({q.data(), k.data(), r.data(), u.data(), v.data(), qlen, mlen, d});
  EXPECT_TRUE(std::isinf(s[2]) && s[2] < 0) << "query 0 cannot see key 2";
  EXPECT_FLOAT_EQ(s[1], 2.0f / std::sqrt(2.0f));
  const auto clamped = xl_relative_sinusoid(4, 10, 3);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(clamped[c], clamped[6 * 4 + c]) << "distances 9 and 3 agree under clamp 3";
}

TEST(RopeApply, PartialPassThroughAndLayoutsOfMemory) {
  RopeParams rp;
  rp.head_dim = 8;
  rp.partial_rotary_factor = 0.5;
  const RopeSchedule s = compute_schedule(rp);
  // [B=1, S=3, H=2, D=8] data, viewed as BSHD, and the same logical tensor stored BHSD.
  std::vector<float> bshd_data(48), bhsd_data(48);
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 8; ++c) {
        const float v = static_cast<float>(t * 100 + h * 10 + c);
        bshd_data[(t * 2 + h) * 8 + c] = v;
        bhsd_data[(h * 3 + t) * 8 + c] = v;
      }
  const std::int64_t positions[3] = {5, 900, 70000};
  rope_apply_reference(bshd(bshd_data.data(), {1, 3, 2, 8}), {positions, 1, 0}, rope_apply_params(s));
  rope_apply_reference(bhsd(bhsd_data.data(), {1, 3, 2, 8}), {positions, 1, 0}, rope_apply_params(s));
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 8; ++c) {
        EXPECT_EQ(bshd_data[(t * 2 + h) * 8 + c], bhsd_data[(h * 3 + t) * 8 + c]);
        if (c >= 4) {
          EXPECT_EQ(bshd_data[(t * 2 + h) * 8 + c], static_cast<float>(t * 100 + h * 10 + c)) << "pass-through";
        }
      }
}

TEST(RopeApply, BackwardIsTheTransposeWithAttentionFactor) {
  RopeParams rp;
  rp.head_dim = 16;
  rp.type = RopeType::kYarn;
  rp.factor = 8;
  rp.original_max_position_embeddings = 64;
  const RopeSchedule s = compute_schedule(rp);
  ASSERT_GT(s.attention_factor, 1.0);
  std::vector<float> x(16), y(16);
  for (int i = 0; i < 16; ++i) {
    x[i] = std::sin(i + 1.0f);
    y[i] = std::cos(3.0f * i);
  }
  auto rx = x, ty = y;
  const std::int64_t pos = 1234;
  RopeApplyParams p = rope_apply_params(s);
  rope_apply_reference(bshd(rx.data(), {1, 1, 1, 16}), {&pos, 1, 0}, p);
  p.direction = -1;
  rope_apply_reference(bshd(ty.data(), {1, 1, 1, 16}), {&pos, 1, 0}, p);
  double a = 0, b = 0;
  for (int i = 0; i < 16; ++i) {
    a += static_cast<double>(rx[i]) * y[i];
    b += static_cast<double>(x[i]) * ty[i];
  }
  EXPECT_NEAR(a, b, 1e-5) << "<A x, y> = <x, A^T y>";
}

TEST(RopeApply, AccurateAnglesStayExactAtLargePositions) {
  RopeParams rp;
  rp.head_dim = 128;
  rp.theta = 500000;
  const RopeSchedule s = compute_schedule(rp);
  RopeApplyParams accurate = rope_apply_params(s), hf = rope_apply_params(s);
  hf.angles = Numerics::kHfFloat32;
  double worst_accurate = 0, worst_hf = 0;
  for (std::int64_t pos : {131071, 1 << 24}) {
    for (int j = 0; j < 64; ++j) {
      const long double angle = static_cast<long double>(pos) * s.inv_freq[j];
      const double exact_cos = static_cast<double>(std::cos(angle));
      float c, sn;
      rope_cos_sin(s.inv_freq[j], pos, accurate, &c, &sn);
      worst_accurate = std::max(worst_accurate, std::fabs(c - exact_cos));
      rope_cos_sin(s.inv_freq[j], pos, hf, &c, &sn);
      if (pos == 131071) worst_hf = std::max(worst_hf, std::fabs(c - exact_cos));
    }
  }
  EXPECT_LE(worst_accurate, 1e-6);
  EXPECT_GT(worst_hf, 1e-4) << "HF's float32 angle drifts at 131071 (the reason for the accurate mode)";
}

TEST(RopeApply, BadViewsAndPositions) {
  std::vector<float> x(8);
  const std::int64_t bad = -1;
  const RopeSchedule s = testing::plain_schedule(8);
  EXPECT_THROW(rope_apply_reference(bshd(x.data(), {1, 1, 1, 8}), {&bad, 1, 0}, rope_apply_params(s)), Error);
  const std::int64_t ok = 0;
  EXPECT_THROW(rope_apply_reference(bshd(x.data(), {1, 1, 1, 4}), {&ok, 1, 0}, rope_apply_params(s)), Error);
  auto p = rope_apply_params(s);
  const std::uint8_t axes[4] = {0, 1, 2, 2};
  p.axis_of_freq = axes;
  EXPECT_THROW(rope_apply_reference(bshd(x.data(), {1, 1, 1, 8}), {&ok, 1, 0}, p), Error) << "3 axes needed";
}

TEST(Mrope, AxisMapsAndVideoIndexRules) {
  const auto contiguous = mrope_axis_map({16, 24, 24}, false);
  EXPECT_EQ(contiguous[15], 0);
  EXPECT_EQ(contiguous[16], 1);
  EXPECT_EQ(contiguous[40], 2);
  const auto inter = mrope_axis_map({24, 20, 20}, true);  // Qwen3-VL
  EXPECT_EQ(inter[0], 0);
  EXPECT_EQ(inter[1], 1);
  EXPECT_EQ(inter[2], 2);
  EXPECT_EQ(inter[3], 0);
  EXPECT_EQ(inter[58], 1);
  EXPECT_EQ(inter[59], 2);
  EXPECT_EQ(inter[61], 0);
  // hf-reference.md §4.1: a 4-frame video then text: v5 [3, 4], v4.49 [6, 7].
  const std::vector<TokenRun> runs = {{TokenRun::kText, 2}, {TokenRun::kVideo, 0, 4, 2, 2}, {TokenRun::kText, 2}};
  const auto v5 = mrope_position_ids(runs, 2, MropeIndexRule::kV5);
  const auto v4 = mrope_position_ids(runs, 2, MropeIndexRule::kV4_49);
  EXPECT_EQ(v5.seq_len, 8);
  EXPECT_EQ(v5.ids[6], 3);
  EXPECT_EQ(v5.ids[7], 4);
  EXPECT_EQ(v4.ids[6], 6);
  EXPECT_EQ(v4.ids[7], 7);
  EXPECT_THROW(mrope_axis_map({1, 2}, false), Error);
  EXPECT_THROW(mrope_position_ids({{TokenRun::kImage, 0, 1, 3, 4}}, 2), Error) << "h not divisible by merge";
}

TEST(Schemes, NamesRoundTripAndNopeIsExplicit) {
  for (const char* name : {"nope", "sinusoidal", "learned", "rope", "mrope", "alibi", "t5", "xl", "deberta"}) {
    auto s = try_from_name<Scheme>(name);
    ASSERT_TRUE(s.has_value()) << name;
    EXPECT_STREQ(to_string(*s), name);
  }
  EXPECT_EQ(scheme_info(Scheme::kNope).kind, SchemeKind::kNone);
  EXPECT_FALSE(try_from_name<Scheme>("copee").has_value());
}

}  // namespace
}  // namespace posenc
