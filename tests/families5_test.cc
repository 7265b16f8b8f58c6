// Issue 26, model families round three, last part: the legacy top-level keys publishers still
// ship (GPT-NeoX's rotary_pct / rotary_emb_base, StableLM-epoch's rope_pct), read where the family
// row says and ignored, with a warning, where HF's code for the family does not read them. Each
// rule is checked against the schedule derived here in double, on the real configs in tests/data
// where one was found and on configs built in the test (from the published values) where none was.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

using nlohmann::json;

std::string real(const std::string& name) { return testing::reference_dir() + "/real-configs/" + name + ".json"; }
json real_json(const std::string& name) { return json::parse(testing::read_file(real(name))); }

bool has(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

// The default schedule in double: rotary_dim = int(head_dim * fraction) channels, inv_freq[i] =
// theta^(-2i / rotary_dim) (RU _compute_default_rope_parameters over the partial dim).
void expect_default_schedule(const RopeSchedule& s, double theta, int rotary_dim) {
  ASSERT_EQ(s.rotary_dim, rotary_dim);
  EXPECT_EQ(s.base, theta);
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const double want = std::pow(theta, -2.0 * i / rotary_dim);
    EXPECT_NEAR(s.inv_freq[i], want, 1e-6 * want) << i;
  }
}

// A Pythia-style GPT-NeoX config (EleutherAI/pythia-160m: hidden 768, 12 heads, rotary_pct 0.25,
// rotary_emb_base 10000), with the base changed so that a reader of rope_theta would differ.
json pythia() {
  return {{"model_type", "gpt_neox"},   {"hidden_size", 768},          {"num_attention_heads", 12},
          {"num_hidden_layers", 12},    {"max_position_embeddings", 2048}, {"rotary_pct", 0.25},
          {"rotary_emb_base", 50000}};
}

// GPTNeoXConfig.convert_rope_params_to_dict: rope_theta from rotary_emb_base, partial_rotary_factor
// from rotary_pct. RedPajama-INCITE ships rotary_pct 1.0, which the family default 0.25 would cut.
TEST(Families5, GptNeoxReadsRotaryPctAndRotaryEmbBase) {
  expect_default_schedule(compute_schedule(load_hf_config(real("RedPajama-INCITE-3B-v1")).select().params), 1e4, 80);
  const ModelRope m = parse_hf_config(pythia().dump());
  expect_default_schedule(compute_schedule(m.select().params), 50000, 16);  // int(64 * 0.25)
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  json c = pythia();
  c.erase("rotary_pct");
  c.erase("rotary_emb_base");
  expect_default_schedule(compute_schedule(parse_hf_config(c.dump()).select().params), 1e4, 16);  // HF's defaults
}

// The mixin's keys are never read by GPTNeoXConfig (it overrides convert_rope_params_to_dict and
// has no rope_theta / partial_rotary_factor attribute when standardize_rope_params runs): ignored,
// with a warning naming the key it does read.
TEST(Families5, GptNeoxIgnoresTheMixinsKeys) {
  json c = pythia();
  c["rope_theta"] = 1e6;
  c["partial_rotary_factor"] = 0.5;
  const ModelRope m = parse_hf_config(c.dump());
  expect_default_schedule(compute_schedule(m.select().params), 50000, 16);
  EXPECT_TRUE(has(m.warnings, "rope_theta = 1000000.0 ignored: model_type 'gpt_neox' reads rotary_emb_base"));
  EXPECT_TRUE(has(m.warnings, "partial_rotary_factor = 0.5 ignored: model_type 'gpt_neox' reads rotary_pct"));
}

// setdefault: a rope dict's own rope_theta and partial_rotary_factor win over the legacy keys,
// and the legacy rotary_pct does not overwrite the dict as a top-level partial_rotary_factor would.
TEST(Families5, GptNeoxRopeDictWinsOverLegacyKeys) {
  json c = pythia();
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.5}};
  expect_default_schedule(compute_schedule(parse_hf_config(c.dump()).select().params), 1e6, 32);
  c["partial_rotary_factor"] = 0.75;  // the mixin's overwrite (RU standardize_rope_params) is not GPT-NeoX's
  expect_default_schedule(compute_schedule(parse_hf_config(c.dump()).select().params), 1e6, 32);
  c.erase("partial_rotary_factor");
  c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  const RopeSchedule s = compute_schedule(parse_hf_config(c.dump()).select().params);
  ASSERT_EQ(s.rotary_dim, 16);
  EXPECT_NEAR(s.inv_freq[1], std::pow(50000.0, -2.0 / 16) / 2, 1e-6 * s.inv_freq[1]);  // linear: / factor
}

// GPTNeoXJapaneseConfig: the same keys, but rotary_pct defaults to 1.0, not GPT-NeoX's 0.25.
TEST(Families5, GptNeoxJapaneseDefaultsToTheWholeHead) {
  json c = pythia();
  c["model_type"] = "gpt_neox_japanese";
  c.erase("rotary_pct");
  expect_default_schedule(compute_schedule(parse_hf_config(c.dump()).select().params), 50000, 64);
}

// A family whose code reads rope_theta / partial_rotary_factor ignores GPT-NeoX's spellings, as
// LlamaConfig (the mixin) does, with a warning: a Llama config carrying rotary_pct still rotates all.
TEST(Families5, OtherFamiliesIgnoreLegacySpellings) {
  json c = real_json("Llama-3.2-1B-Instruct");
  c["rotary_pct"] = 0.5;
  c["rotary_emb_base"] = 1e4;
  const ModelRope m = parse_hf_config(c.dump());
  EXPECT_EQ(m.select().params.rotated_dim(), 64);
  EXPECT_EQ(m.select().params.theta, 500000);
  EXPECT_TRUE(has(m.warnings, "rotary_pct = 0.5 ignored: model_type 'llama' reads partial_rotary_factor"));
  EXPECT_TRUE(has(m.warnings, "rotary_emb_base = 10000.0 ignored: model_type 'llama' reads rope_theta"));
}

// Qwen-1's hub code: RotaryEmbedding(base=config.rotary_emb_base), rotary_ndims from rotary_pct.
TEST(Families5, Qwen1ReadsRotaryEmbBase) {
  json c = real_json("Qwen-1_8B");
  c["rotary_emb_base"] = 20000;
  c["rotary_pct"] = 0.5;
  expect_default_schedule(compute_schedule(parse_hf_config(c.dump()).select().params), 20000, 64);  // kv_channels 128
}

// StableLM-epoch's hub code (stabilityai/stablelm-3b-4e1t before the HF port): rotary_ndims =
// int(head_dim * config.rope_pct), base config.rope_theta. Built from that model's published
// config (hidden 2560, 32 heads, rope_pct 0.25, rope_theta 10000), the base changed to tell it apart.
TEST(Families5, StableLmEpochReadsRopePct) {
  const json c = {{"model_type", "stablelm_epoch"}, {"hidden_size", 2560},  {"num_attention_heads", 32},
                  {"num_hidden_layers", 32},        {"rope_pct", 0.25},     {"rope_theta", 20000},
                  {"max_position_embeddings", 4096}};
  const ModelRope m = parse_hf_config(c.dump());
  expect_default_schedule(compute_schedule(m.select().params), 20000, 20);  // int(80 * 0.25)
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  // HF's StableLmConfig (model_type stablelm) reads partial_rotary_factor, 0.25 by default.
  json port = c;
  port["model_type"] = "stablelm";
  port["rope_pct"] = 0.5;
  const ModelRope hf = parse_hf_config(port.dump());
  EXPECT_EQ(hf.select().params.rotated_dim(), 20);
  EXPECT_TRUE(has(hf.warnings, "rope_pct = 0.5 ignored: model_type 'stablelm' reads partial_rotary_factor"));
}

}  // namespace
}  // namespace posenc
