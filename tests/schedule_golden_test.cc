// Every rope_inv_freq case of hf-golden.json, through the config parser and the schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "golden.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

using testing::golden;
using testing::max_rel_diff;

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

RopeParams params_of(const nlohmann::json& c) {
  return parse_hf_config(c.at("config_input").dump()).select().params;
}

// The bound against HF's float32 values; posenc's double path is within ~3e-7.
constexpr double kGoldenRelTol = 2e-6;

TEST(ScheduleGolden, EveryInvFreqCaseMatchesHf) {
  const auto& cases = golden().at("rope_inv_freq");
  ASSERT_EQ(cases.size(), 12u) << "golden file changed: update this test's coverage";
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const RopeParams p = params_of(c);
    const RopeSchedule s = compute_schedule(p);
    EXPECT_EQ(c.at("head_dim").get<int>(), s.head_dim);
    EXPECT_EQ(c.at("rotary_dim").get<int>(),
              s.type == RopeType::kProportional ? s.rotated_dim : s.rotary_dim);
    const auto hf = c.at("inv_freq").get<std::vector<double>>();
    EXPECT_LE(max_rel_diff(widen(s.inv_freq), hf), kGoldenRelTol);
    // The double path against HF's own float64 spec: one float32 rounding apart at most.
    EXPECT_LE(max_rel_diff(widen(s.inv_freq), c.at("spec_f64_inv_freq").get<std::vector<double>>()), 6e-8);
    EXPECT_NEAR(s.attention_factor, c.at("attention_factor").get<double>(), 1e-12);
    if (c.contains("correction_range_low_high")) {
      ASSERT_TRUE(s.correction_range.has_value());
      const auto r = c.at("correction_range_low_high").get<std::vector<double>>();
      EXPECT_NEAR((*s.correction_range)[0], r[0], 1e-12);
      EXPECT_NEAR((*s.correction_range)[1], r[1], 1e-12);
    }
    if (c.contains("deepseek_softmax_scale_multiplier")) {
      EXPECT_NEAR(deepseek_softmax_scale_multiplier(p), c.at("deepseek_softmax_scale_multiplier").get<double>(), 1e-12);
    }
  }
}

TEST(ScheduleGolden, SequenceLengthVariants) {
  // inv_freq_seq_len_N (dynamic, longrope) and attention_factor_seq_len_N.
  const std::regex key_re("inv_freq_seq_len_([0-9]+)");
  int checked = 0;
  for (const auto& c : golden().at("rope_inv_freq")) {
    const RopeParams p = params_of(c);
    for (auto it = c.begin(); it != c.end(); ++it) {
      std::smatch m;
      if (!std::regex_match(it.key(), m, key_re)) continue;
      const std::int64_t len = std::stoll(m[1]);
      SCOPED_TRACE(c.at("name").get<std::string>() + " at seq_len " + m[1].str());
      const RopeSchedule s = compute_schedule(p, len);
      EXPECT_LE(max_rel_diff(widen(s.inv_freq), it.value().get<std::vector<double>>()), kGoldenRelTol);
      const std::string att_key = "attention_factor_seq_len_" + m[1].str();
      if (c.contains(att_key)) {
        EXPECT_NEAR(s.attention_factor, c.at(att_key).get<double>(), 1e-12);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);  // dynamic 8192, 16384; longrope 8192, 8193
}

TEST(ScheduleGolden, DynamicNtkBaseMatchesHfDouble) {
  const auto& c = testing::golden_case("rope_inv_freq", "dynamic_f2_init");
  const RopeParams p = params_of(c);
  for (std::int64_t len : {8192, 16384}) {
    const double expected = c.at("ntk_base_f64_seq_len_" + std::to_string(len)).get<double>();
    EXPECT_NEAR(compute_schedule(p, len).base / expected, 1.0, 1e-14) << len;
  }
}

TEST(ScheduleGolden, CosSinTablesUseTheseFrequencies) {
  // rope_cos_sin_tables record the inv_freq HF's module actually used (incl. runtime variants).
  for (const auto& t : golden().at("rope_cos_sin_tables")) {
    const std::string name = t.at("name");
    SCOPED_TRACE(name);
    const RopeParams p = params_of(t);
    std::optional<std::int64_t> len;
    if (name.find("__long") != std::string::npos) len = resolved_original_max(p) + 1;
    std::smatch m;
    if (std::regex_search(name, m, std::regex("runtime_seq_len_([0-9]+)"))) len = std::stoll(m[1]);
    const RopeSchedule s = compute_schedule(p, len);
    EXPECT_LE(max_rel_diff(widen(s.inv_freq), t.at("inv_freq_used").get<std::vector<double>>()), kGoldenRelTol);
    EXPECT_NEAR(s.attention_factor, t.at("attention_scaling").get<double>(), 1e-12);
  }
}

TEST(ScheduleGolden, HfFloat32ModeReproducesHfBits) {
  // Numerics::kHfFloat32 replays HF's float32 operations. torch's vectorised powf (SLEEF, 1-ulp
  // accurate) and glibc's powf round differently for a few inputs, so the bound is one float32
  // ulp; measured: 572 of the 576 golden values are bit-identical.
  std::size_t total = 0, identical = 0;
  for (const auto& c : golden().at("rope_inv_freq")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const RopeSchedule s = compute_schedule(params_of(c), std::nullopt, Numerics::kHfFloat32);
    const auto hf = c.at("inv_freq").get<std::vector<double>>();
    ASSERT_EQ(s.inv_freq.size(), hf.size());
    for (std::size_t i = 0; i < hf.size(); ++i) {
      const float want = static_cast<float>(hf[i]);
      EXPECT_LE(std::fabs(s.inv_freq[i] - want), std::nextafter(std::fabs(want), INFINITY) - std::fabs(want)) << i;
      identical += s.inv_freq[i] == want;
      ++total;
    }
  }
  EXPECT_GE(identical * 100, total * 99);
  std::printf("hf_float32: %zu of %zu inv_freq values bit-identical to HF\n", identical, total);
}

}  // namespace
}  // namespace posenc
