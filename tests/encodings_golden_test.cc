// The golden cases of hf-golden.json for every encoding besides the RoPE schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "golden.h"
#include "posenc/alibi.h"
#include "posenc/learned.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc/transformer_xl.h"

namespace posenc {
namespace {

using testing::flatten;
using testing::flatten_f;
using testing::golden;
using testing::max_abs_diff;

TEST(SinusoidalGolden, XlmMarianWhisperLayouts) {
  struct Case {
    const char* name;
    SinusoidalLayout layout;
    SinusoidalFreqs freqs;
  };
  for (const Case& c : {Case{"xlm_distilbert_interleaved_d8", SinusoidalLayout::kInterleaved, SinusoidalFreqs::kVaswani},
                        Case{"marian_halves_d8", SinusoidalLayout::kHalves, SinusoidalFreqs::kVaswani},
                        Case{"whisper_d8", SinusoidalLayout::kHalves, SinusoidalFreqs::kFairseq}}) {
    SCOPED_TRACE(c.name);
    const auto& g = testing::golden_case("sinusoidal", c.name);
    SinusoidalParams p{g.at("d_model").get<int>(), c.layout, c.freqs, 10000.0};
    const auto table = sinusoidal_table(p, g.at("positions").get<std::vector<std::int64_t>>());
    const auto want = flatten(g.at("table"));
    // Whisper evaluates its angles in float32: at position 1000 that is off by up to ~3e-5.
    EXPECT_LE(max_abs_diff(table, want), c.freqs == SinusoidalFreqs::kFairseq ? 5e-5 : 2e-7);
    // Positions 0..3: one float32 rounding apart at most, in every convention.
    EXPECT_LE(max_abs_diff({table.begin(), table.begin() + 4 * p.dim}, {want.begin(), want.begin() + 4 * p.dim}),
              2e-7);
  }
}

TEST(SinusoidalGolden, TransformerXlRelativeSinusoid) {
  const auto& g = testing::golden_case("sinusoidal", "transfo_xl_PositionalEmbedding_d8");
  const auto pos_seq = g.at("pos_seq").get<std::vector<double>>();
  const auto r = xl_relative_sinusoid(g.at("d_model").get<int>(), static_cast<int>(pos_seq.size()));
  EXPECT_LE(max_abs_diff(r, flatten(g.at("pos_emb_[klen,1,width]"))), 2e-7);
}

TEST(TransformerXlGolden, RelShiftDemo) {
  const auto& g = golden().at("transfo_xl").at("rel_shift_demo");
  const auto x = flatten_f(g.at("x_[qlen,klen,1,1]"));
  const int qlen = static_cast<int>(g.at("x_[qlen,klen,1,1]").size());
  const int klen = static_cast<int>(x.size()) / qlen;
  EXPECT_EQ(xl_rel_shift(x, qlen, klen), flatten_f(g.at("rel_shift_x")));
}

TEST(AlibiGolden, SlopesForOneToSixteenHeads) {
  const auto& g = golden().at("alibi");
  const auto heads = g.at("n_heads").get<std::vector<int>>();
  ASSERT_EQ(heads.size(), 16u);
  for (std::size_t i = 0; i < heads.size(); ++i) {
    SCOPED_TRACE(heads[i]);
    const auto exact = alibi_slopes(heads[i]);
    const auto paper = g.at("paper_slopes_f64")[i].get<std::vector<double>>();
    ASSERT_EQ(exact.size(), paper.size());
    for (std::size_t h = 0; h < exact.size(); ++h) EXPECT_NEAR(exact[h], paper[h], 1e-15 * paper[h]) << h;
    // Bloom's float32 pow: torch's powf and glibc's may round one ulp apart.
    const auto bloom = alibi_slopes_bloom_f32(heads[i]);
    const auto hf = g.at("bloom_slopes_f32")[i].get<std::vector<double>>();
    for (std::size_t h = 0; h < bloom.size(); ++h) {
      const float want = static_cast<float>(hf[h]);
      EXPECT_LE(std::fabs(bloom[h] - want), std::nextafter(want, 1.0f) - want) << h;
    }
  }
}

TEST(AlibiGolden, BloomTensorWithLeftPadding) {
  // Bloom: slope_h * (key position counted over non-pad tokens); pads get 0.
  const auto& g = golden().at("alibi").at("bloom_tensor_case");
  const auto mask = g.at("attention_mask").get<std::vector<std::vector<int>>>();
  const int heads = g.at("num_heads");
  const auto slopes = alibi_slopes_bloom_f32(heads);
  std::vector<float> got;
  for (const auto& row : mask)
    for (int h = 0; h < heads; ++h) {
      std::int64_t seen = 0;
      for (int m : row) {
        seen += m;
        got.push_back(slopes[static_cast<std::size_t>(h)] * static_cast<float>((seen - 1) * m));
      }
    }
  EXPECT_EQ(got, flatten_f(g.at("alibi_[batch*heads,1,seq]")));
}

TEST(T5Golden, BucketsForRelativePositionsMinus300To300) {
  const auto& g = golden().at("t5_relative_bias");
  const auto rel = g.at("relative_positions").get<std::vector<std::int64_t>>();
  for (const auto& c : g.at("bucket_cases")) {
    T5BucketParams p{c.at("num_buckets"), c.at("max_distance"), c.at("bidirectional")};
    SCOPED_TRACE(std::string(p.bidirectional ? "bidirectional" : "causal"));
    const auto want = c.at("buckets").get<std::vector<int>>();
    for (std::size_t i = 0; i < rel.size(); ++i) EXPECT_EQ(t5_bucket(rel[i], p), want[i]) << "r = " << rel[i];
  }
  // The spec's examples, bidirectional 32 / 128.
  const T5BucketParams enc{32, 128, true};
  EXPECT_EQ(t5_bucket(0, enc), 0);
  EXPECT_EQ(t5_bucket(-7, enc), 7);
  EXPECT_EQ(t5_bucket(-8, enc), 8);
  EXPECT_EQ(t5_bucket(-128, enc), 15);
  EXPECT_EQ(t5_bucket(1, enc), 17);
  EXPECT_EQ(t5_bucket(8, enc), 24);
  EXPECT_EQ(t5_bucket(100, enc), 31);
  // The extremes of int64 land in the last buckets (-2^63's negation would overflow).
  EXPECT_EQ(t5_bucket(std::numeric_limits<std::int64_t>::min(), enc), 15);
  EXPECT_EQ(t5_bucket(std::numeric_limits<std::int64_t>::max(), enc), 31);
  EXPECT_EQ(t5_bucket(std::numeric_limits<std::int64_t>::min(), T5BucketParams{32, 128, false}), 31);
}

TEST(T5Golden, ComputeBias) {
  for (const auto& c : golden().at("t5_relative_bias").at("compute_bias_cases")) {
    T5BucketParams p{c.at("num_buckets"), c.at("max_distance"), !c.at("is_decoder").get<bool>()};
    const auto bias = t5_compute_bias(flatten_f(c.at("bias_table_[bucket][head]")), c.at("n_heads"),
                                      c.at("query_length"), c.at("key_length"), c.at("past_seen_tokens"), p);
    EXPECT_EQ(bias, flatten_f(c.at("values_[1,heads,q,k]")));
  }
}

TEST(LearnedGolden, BartOffsetTwoLookups) {
  const auto& g = golden().at("learned_absolute");
  LearnedTable t;
  t.weight = flatten_f(g.at("weight_rows_are_[2r,2r+1]"));
  t.dim = 2;
  t.offset = 2;
  t.num_positions = static_cast<int>(t.weight.size()) / 2 - 2;
  const std::vector<std::int64_t> seq4 = {0, 1, 2, 3};
  std::vector<float> out(8);
  learned_lookup(t, seq4.data(), 4, 0, out.data());
  const auto want4 = flatten_f(g.at("bart_seq4_past0"));  // [batch 2][4][2]: both rows equal
  EXPECT_EQ(out, std::vector<float>(want4.begin(), want4.begin() + 8));
  const std::vector<std::int64_t> seq1 = {0};
  std::vector<float> one(2);
  learned_lookup(t, seq1.data(), 1, 3, one.data());
  const auto want1 = flatten_f(g.at("bart_seq1_past3"));
  EXPECT_EQ(one, std::vector<float>(want1.begin(), want1.begin() + 2));
}

}  // namespace
}  // namespace posenc
