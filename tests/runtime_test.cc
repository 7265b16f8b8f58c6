// HF's runtime rules: dynamic NTK grows only and resets strictly below the original length;
// LongRoPE switches the whole call to long factors past original_max_position_embeddings.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_runtime.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

using testing::max_rel_diff;

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(RopeRuntime, DynamicSequenceMatchesHfV5) {
  const auto& g = testing::golden_case("rope_runtime", "dynamic_runtime_sequence_v5_main");
  // HF's float32 arithmetic, so the cos/sin of the last position can be compared too.
  RopeRuntime rt(parse_hf_config(g.at("config_input").dump()).select().params, Numerics::kHfFloat32);
  const auto& calls = g.at("calls");
  ASSERT_EQ(calls.size(), 6u);
  for (const auto& call : calls) {
    const std::int64_t len = call.at("seq_len_of_call");  // position_ids = arange(len)
    SCOPED_TRACE("call with seq_len " + std::to_string(len));
    const RopeSchedule& s = rt.update(len - 1);
    EXPECT_EQ(rt.max_seq_len_cached(), call.at("max_seq_len_cached_after_call").get<std::int64_t>());
    EXPECT_LE(max_rel_diff(widen(s.inv_freq), call.at("inv_freq_after_call").get<std::vector<double>>()), 2e-6);
    // cos/sin of the last position, HF-style (float32 angle, concat(freqs, freqs) layout). A
    // one-ulp difference in inv_freq (torch's powf) moves the angle by ~6e-8 * position.
    const double tol = 1e-6 + 6e-8 * static_cast<double>(len - 1);
    const auto cos_hf = call.at("cos_last_position").get<std::vector<double>>();
    const auto sin_hf = call.at("sin_last_position").get<std::vector<double>>();
    const std::size_t half = s.inv_freq.size();
    ASSERT_EQ(cos_hf.size(), 2 * half);
    for (std::size_t i = 0; i < 2 * half; ++i) {
      const float angle = s.inv_freq[i % half] * static_cast<float>(len - 1);
      EXPECT_NEAR(std::cos(angle) * s.attention_factor, cos_hf[i], tol) << i;
      EXPECT_NEAR(std::sin(angle) * s.attention_factor, sin_hf[i], tol) << i;
    }
  }
}

RopeParams dynamic_params() {
  RopeParams p;
  p.type = RopeType::kDynamic;
  p.head_dim = 64;
  p.factor = 2.0;
  p.max_position_embeddings = 64;
  return p;
}

TEST(RopeRuntime, DynamicLengthIsMaxPositionPlusOneNotTokenCount) {
  RopeRuntime rt(dynamic_params());
  // One decode token at position 100: L = 101 > 64, so the schedule grows.
  const RopeSchedule& s = rt.update(100);
  EXPECT_EQ(rt.max_seq_len_cached(), 101);
  EXPECT_EQ(s.seq_len, 101);
  EXPECT_GT(s.base, 10000.0);
}

TEST(RopeRuntime, DynamicDoesNotResetAtExactlyTheOriginalLength) {
  RopeRuntime rt(dynamic_params());
  const float grown = rt.update(255).inv_freq[1];
  EXPECT_EQ(rt.update(63).inv_freq[1], grown) << "L == max_pos (64) must not reset: HF's test is strict <";
  EXPECT_EQ(rt.max_seq_len_cached(), 256);
  const RopeSchedule& reset = rt.update(62);
  EXPECT_EQ(rt.max_seq_len_cached(), 64);
  EXPECT_EQ(reset.inv_freq, compute_schedule(dynamic_params()).inv_freq);
}

TEST(RopeRuntime, LongRopeSwitchesWholeCallPastOriginal) {
  RopeParams p = testing::longrope_params(64, 16, {1, 1, 1, 1}, {1, 2, 4, 8});
  p.head_dim = 8;
  RopeRuntime rt(p);
  EXPECT_FALSE(rt.update(15).uses_long_factors);  // L = 16 = orig: short
  const RopeSchedule& longer = rt.update(16);     // L = 17 > orig: long, for every position
  EXPECT_TRUE(longer.uses_long_factors);
  EXPECT_FLOAT_EQ(longer.inv_freq[3], compute_schedule(p).inv_freq[3] / 8);
  const double attention = longer.attention_factor;
  EXPECT_FALSE(rt.update(3).uses_long_factors);  // back to short factors
  EXPECT_EQ(rt.current().attention_factor, attention) << "HF keeps the init attention factor";
}

TEST(RopeRuntime, FixedTypesNeverChange) {
  RopeParams p = testing::yarn_params(4, 128);
  p.head_dim = 64;
  RopeRuntime rt(p);
  const auto before = rt.current().inv_freq;
  EXPECT_EQ(rt.update(100000).inv_freq, before);
  EXPECT_EQ(rt.update(5).inv_freq, before);
}

TEST(RopeRuntime, RejectsNegativePositions) {
  RopeRuntime rt(dynamic_params());
  EXPECT_THROW(rt.update(-1), Error);
}

}  // namespace
}  // namespace posenc
