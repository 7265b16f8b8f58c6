// Strict validation: every bad input is an Error whose message names the key and the value.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>

#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"
#include "rope_params_fixtures.h"

namespace posenc {
namespace {

// A Llama-style config with the given rope_scaling dict (JSON text).
std::string llama_with(const std::string& rope_scaling, const std::string& extra = "") {
  return R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
             "max_position_embeddings": 131072, "rope_theta": 500000.0, )" +
         extra + R"("rope_scaling": )" + rope_scaling + "}";
}

// f() must throw posenc::Error whose message holds every one of mentions.
template <typename F>
void expect_error_from(F f, std::initializer_list<const char*> mentions, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "accepted: " << what;
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* m : mentions) EXPECT_NE(msg.find(m), std::string::npos) << "'" << m << "' not in: " << msg;
  }
}

void expect_error(const std::string& json, std::initializer_list<const char*> mentions,
                  ConfigOptions options = {}) {
  expect_error_from([&] { parse_hf_config(json, options); }, mentions, json);
}

TEST(ConfigErrors, UnknownKeyInsideRopeDict) {
  expect_error(llama_with(R"({"rope_type": "linear", "factor": 2.0, "facter": 4})"),
               {"rope_scaling.facter", "4", "--lenient", "did you mean 'factor'?"});
  // A tail of a key is a guess too; a key far from every name gets none.
  expect_error(llama_with(R"({"rope_type": "yarn", "factor": 2.0, "fast": 4})"), {"did you mean 'beta_fast'?"});
  try {
    parse_hf_config(llama_with(R"({"rope_type": "linear", "factor": 2.0, "qqqqqqqq": 4})"));
    ADD_FAILURE() << "accepted an unknown key";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

TEST(ConfigErrors, LenientTurnsOnlyUnknownKeysIntoWarnings) {
  ConfigOptions lenient;
  lenient.lenient = true;
  const ModelRope m = parse_hf_config(llama_with(R"({"rope_type": "linear", "factor": 2.0, "facter": 4})"), lenient);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("facter"), std::string::npos);
  // A bad value stays an error under --lenient.
  expect_error(llama_with(R"({"rope_type": "linear", "factor": -2})"), {"factor", "-2"}, lenient);
}

TEST(ConfigErrors, UnknownRopeType) {
  expect_error(llama_with(R"({"rope_type": "superrope", "factor": 2.0})"), {"rope_type", "superrope", "yarn"});
  expect_error(llama_with(R"({"type": "superrope"})"), {"rope_scaling.type", "superrope"});
}

TEST(ConfigErrors, WrongJsonTypes) {
  expect_error(llama_with(R"({"rope_type": "linear", "factor": "2"})"), {"rope_scaling.factor", "string", "number"});
  expect_error(llama_with(R"({"rope_type": "linear", "factor": true})"), {"rope_scaling.factor", "boolean"});
  expect_error(llama_with(R"({"rope_type": 3})"), {"rope_scaling.rope_type", "string"});
  expect_error(llama_with(R"({"rope_type": "yarn", "factor": 4, "truncate": "no"})"), {"truncate", "true or false"});
  expect_error(llama_with(R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4096.5})"),
               {"original_max_position_embeddings", "integer"});
  expect_error(llama_with(R"("linear")"), {"rope_scaling", "object or null"});
  expect_error(llama_with("null", R"("rope_theta": "1e6", )"), {"rope_theta"});
  expect_error(llama_with(R"({"rope_type": "longrope", "short_factor": [1, "x"], "long_factor": [1]})"),
               {"short_factor[1]", "string"});
}

TEST(ConfigErrors, NonPositiveValues) {
  expect_error(llama_with(R"({"rope_type": "linear", "factor": 0})"), {"factor", "> 0", "got 0"});
  expect_error(llama_with(R"({"rope_type": "linear", "factor": -2})"), {"factor", "-2"});
  expect_error(llama_with(R"({"rope_type": "default", "rope_theta": -1})"), {"rope_theta", "-1"});
  expect_error(llama_with(R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0})"),
               {"original_max_position_embeddings", "got 0"});
  expect_error(llama_with(R"({"rope_type": "yarn", "factor": 4, "beta_fast": 0})"), {"beta_fast", "got 0"});
  expect_error(llama_with(R"({"rope_type": "yarn", "factor": 4, "attention_factor": -1})"), {"attention_factor"});
}

TEST(ConfigErrors, PartialRotaryFactorOutsideUnitInterval) {
  expect_error(llama_with("null", R"("partial_rotary_factor": 0, )"), {"partial_rotary_factor", "(0, 1]", "got 0"});
  expect_error(llama_with("null", R"("partial_rotary_factor": 1.5, )"), {"partial_rotary_factor", "1.5"});
  // 128 * 0.3 = 38.4 -> 38 is fine; 128 * 0.01 = 1 is not a channel pair.
  expect_error(llama_with("null", R"("partial_rotary_factor": 0.01, )"), {"rotary dim", "even"});
}

TEST(ConfigErrors, FactorListsOfTheWrongLength) {
  expect_error(llama_with(R"({"type": "longrope", "short_factor": [1, 1], "long_factor": [1, 1]})"),
               {"short_factor", "64", "got 2"});
  expect_error(llama_with(R"({"type": "longrope", "short_factor": [1, 1]})"), {"long_factor"});
}

TEST(ConfigErrors, Llama3NeedsBothBands) {
  expect_error(llama_with(R"({"rope_type": "llama3", "factor": 8, "high_freq_factor": 4,
                              "original_max_position_embeddings": 8192})"),
               {"low_freq_factor"});
  expect_error(llama_with(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 0, "high_freq_factor": 4,
                              "original_max_position_embeddings": 8192})"),
               {"low_freq_factor", "0"});
}

// HF computes llama3 with low_freq_factor >= high_freq_factor (and Llama-4-Scout ships 1 and 1):
// the smooth band is empty, nothing divides by zero. Accepted; equal bands get a note, inverted
// ones a warning.
TEST(ConfigAccepts, Llama3EqualOrInvertedBandsAsHfComputes) {
  const ModelRope equal = parse_hf_config(llama_with(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 2,
      "high_freq_factor": 2, "original_max_position_embeddings": 8192})"));
  EXPECT_TRUE(equal.warnings.empty());
  ASSERT_FALSE(equal.notes.empty());
  EXPECT_NE(equal.notes.back().find("no smooth band"), std::string::npos) << equal.notes.back();
  const RopeSchedule s = compute_schedule(equal.select().params);
  for (float f : s.inv_freq) EXPECT_TRUE(std::isfinite(f));
  const ModelRope inverted = parse_hf_config(llama_with(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
      "high_freq_factor": 1, "original_max_position_embeddings": 8192})"));
  ASSERT_EQ(inverted.warnings.size(), 1u);
  EXPECT_NE(inverted.warnings[0].find("inverted"), std::string::npos) << inverted.warnings[0];
}

// A wavelength exactly on the edge of an empty band is HF's 0/0: refused as non-finite.
TEST(ConfigErrors, Llama3EmptyBandEdgeHitExactlyIsNotFinite) {
  // inv_freq[0] = 1, wavelength 2 pi; orig / low_freq_factor is exactly 2 pi in double.
  const double edge = 8192 / (2 * kPi);
  RopeParams p = testing::llama3_params(8, edge, edge, 8192);
  p.head_dim = 8;
  p.theta = 10000;
  expect_error_from([&] { compute_schedule(p); }, {"inv_freq[0]", "band edge"}, "a NaN frequency");
  p.original_max_position_embeddings = 8191;  // off the edge: finite, accepted
  EXPECT_NO_THROW(compute_schedule(p));
}

TEST(ConfigWarnings, YarnInvertedCorrectionRange) {
  const ModelRope m = parse_hf_config(llama_with(R"({"rope_type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32,
      "original_max_position_embeddings": 8192})"));
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("beta_fast 1 < beta_slow 32"), std::string::npos) << m.warnings[0];
  EXPECT_NO_THROW(compute_schedule(m.select().params));
}

// YaRN divides by ln(theta): only theta == 1 is undefined (HF: ZeroDivisionError).
TEST(ConfigErrors, YarnThetaOfOne) {
  expect_error(llama_with(R"({"rope_type": "yarn", "factor": 4, "rope_theta": 1, "original_max_position_embeddings": 8192})"),
               {"rope_theta", "!= 1"});
  EXPECT_NO_THROW(parse_hf_config(
      llama_with(R"({"rope_type": "yarn", "factor": 4, "rope_theta": 0.5, "original_max_position_embeddings": 8192})")));
}

TEST(ConfigErrors, NestingAndSizeAreBounded) {
  const std::string deep = R"({"head_dim": 64, "rope_theta": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_error(deep, {"nest deeper than 64"});
  // Inside the limit: the bad value's echo is bounded in depth and length.
  const std::string nested = R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2, "bogus": )" +
                             std::string(60, '[') + std::string(60, ']') + "}}";
  expect_error(nested, {"bogus", "array [[[[...]]]]"});
  try {
    parse_hf_config(nested);
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).find("known keys"), 200u) << "the echo is short: " << e.what();
  }
  // Brackets inside strings are not nesting.
  EXPECT_NO_THROW(parse_hf_config(R"({"head_dim": 64, "name": ")" + std::string(1000, '[') + R"("})"));
}

TEST(ConfigErrors, AbsurdSizes) {
  expect_error(R"({"head_dim": 70000, "max_position_embeddings": 4096})", {"head_dim", "70000"});
  expect_error(R"({"head_dim": -8})", {"head_dim", "-8"});
  expect_error(R"({"head_dim": 128, "max_position_embeddings": 3000000000})", {"max_position_embeddings", "3000000000"});
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": 0})", {"num_attention_heads", "0"});
  expect_error(R"({"hidden_size": 4096})", {"head_dim", "num_attention_heads"});
  expect_error(R"({"head_dim": 128, "max_position_embeddings": 1e30})", {"max_position_embeddings"});
}

TEST(ConfigErrors, MalformedJsonAndNonObjectTop) {
  expect_error(R"({"head_dim": 128,)", {"not valid JSON"});
  expect_error("[1, 2]", {"JSON object", "array"});
  expect_error("42", {"JSON object"});
  expect_error("", {"not valid JSON"});
  expect_error(R"({"text_config": 5, "head_dim": 64})", {"text_config", "object or null"});
}

TEST(ConfigErrors, FuzzFindings) {
  // libFuzzer (make fuzz): a number beyond double escaped as nlohmann's out_of_range.
  expect_error(R"({"head_dim": 64, "rope_theta": 1e705})", {"not valid JSON", "1e705"});
}

TEST(ConfigErrors, RequiredKeysAndContradictions) {
  expect_error(llama_with(R"({"rope_type": "linear"})"), {"linear", "factor"});
  expect_error(llama_with(R"({"rope_type": "dynamic"})"), {"dynamic", "factor"});
  expect_error(llama_with(R"({"rope_type": "yarn"})"), {"yarn", "factor"});
  expect_error(llama_with(R"({"rope_type": "yarn", "type": "linear", "factor": 2})"), {"rope_type", "type", "disagree"});
  expect_error(R"({"head_dim": 64, "rope_type": "x", "rope_scaling": {"rope_type": "dynamic", "factor": 2}})",
               {"dynamic", "max_position_embeddings"});
  expect_error(llama_with(R"({"rope_type": "default", "mrope_section": [16, 24, 16]})"), {"mrope_section", "64", "56"});
  expect_error(R"({"head_dim": 64, "rope_parameters": {"rope_type": "linear", "factor": 2},
                   "rope_scaling": {"rope_type": "linear", "factor": 4}})",
               {"rope_parameters", "rope_scaling", "differ"});
  expect_error(R"({"head_dim": 64, "layer_types": "full"})", {"layer_types", "array"});
}

TEST(ConfigErrors, LayerErrorsNameTheLayerType) {
  expect_error(R"({"head_dim": 64, "rope_parameters": {
                     "full_attention": {"rope_type": "linear", "factor": -1},
                     "sliding_attention": {"rope_type": "default"}}})",
               {"rope_parameters.full_attention", "factor", "-1"});
}

TEST(ConfigWarnings, KnownKeyUnusedByTheTypeIsAWarningNotAnError) {
  const ModelRope m = parse_hf_config(llama_with(R"({"rope_type": "linear", "factor": 2, "beta_fast": 32})"));
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("beta_fast"), std::string::npos);
  EXPECT_NE(m.warnings[0].find("linear"), std::string::npos);
}

TEST(ConfigWarnings, MscaleAloneIsFlagged) {
  const ModelRope m = parse_hf_config(llama_with(R"({"rope_type": "yarn", "factor": 4, "mscale": 0.7,
                                                     "original_max_position_embeddings": 8192})"));
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("mscale"), std::string::npos);
}

std::string ones(int n) {
  std::string out = "[";
  for (int i = 0; i < n; ++i) out += (i ? ", 1" : "1");
  return out + "]";
}

TEST(ConfigAccepts, WhatPublishersShip) {
  // Integers where floats belong, and a null dict.
  EXPECT_NO_THROW(parse_hf_config(R"({"head_dim": 64, "rope_theta": 500000, "rope_scaling": null})"));
  // Early Phi-3 'su' = longrope; the top-level original_max_position_embeddings overrides the dict.
  const ModelRope phi = parse_hf_config(
      R"({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
          "original_max_position_embeddings": 4096, "rope_scaling": {"type": "su", "short_factor": )" +
      ones(48) + R"(, "long_factor": )" + ones(48) + R"(, "original_max_position_embeddings": 2048}})");
  EXPECT_EQ(phi.select().params.type, RopeType::kLongRope);
  EXPECT_EQ(phi.select().params.original_max_position_embeddings, 4096);
  EXPECT_EQ(phi.warnings.size(), 1u);  // the override is worth a look
  // v5 per-layer-type dicts.
  const ModelRope layered = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 8192, "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8, "rope_theta": 1000000},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000}}})");
  EXPECT_EQ(layered.select().params.type, RopeType::kLinear);
  EXPECT_EQ(layered.select("sliding_attention").params.theta, 10000.0);
  // yarn with an explicit null factor derives it from the lengths (HF).
  const ModelRope yarn = parse_hf_config(llama_with(
      R"({"rope_type": "yarn", "factor": null, "original_max_position_embeddings": 8192})"));
  EXPECT_EQ(resolved_factor(yarn.select().params), 16.0);
}

}  // namespace
}  // namespace posenc
