// GGUF files written here and read back; llama.cpp's schedule from them against HF's.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "gguf_values.h"
#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

const auto num = testing::gguf_num;
const auto str = testing::gguf_str;

ModelRope real(const std::string& name) {
  return load_hf_config(testing::reference_dir() + "/real-configs/" + name + ".json");
}

// What convert_hf_to_gguf.py writes for gpt-oss-20b's positions (yarn, factor 32, original 4096).
GgufFile gpt_oss_gguf() {
  GgufFile f;
  f.metadata = {{"general.architecture", str("gpt-oss")},
                {"gpt-oss.context_length", num(4, 131072)},
                {"gpt-oss.embedding_length", num(4, 2880)},
                {"gpt-oss.attention.head_count", num(4, 64)},
                {"gpt-oss.attention.key_length", num(4, 64)},
                {"gpt-oss.rope.freq_base", num(6, 150000)},
                {"gpt-oss.rope.scaling.type", str("yarn")},
                {"gpt-oss.rope.scaling.factor", num(6, 32)},
                {"gpt-oss.rope.scaling.original_context_length", num(4, 4096)},
                {"gpt-oss.attention.sliding_window", num(4, 128)}};
  return f;
}

// Llama 3.1: rope_freqs.weight = 1 / (HF llama3 inv_freq / default inv_freq), as the converter does.
GgufFile llama31_gguf() {
  GgufFile f;
  f.metadata = {{"general.architecture", str("llama")},
                {"llama.context_length", num(4, 131072)},
                {"llama.rope.dimension_count", num(4, 128)},
                {"llama.rope.freq_base", num(6, 500000)}};
  const RopeSchedule s = compute_schedule(real("Llama-3.1-8B-Instruct").select().params);
  std::vector<float> ff;
  for (std::size_t i = 0; i < s.inv_freq.size(); ++i) ff.push_back(static_cast<float>(double(s.base_inv_freq[i]) / s.inv_freq[i]));
  f.positional_tensors["rope_freqs.weight"] = ff;
  return f;
}

TEST(Gguf, WrittenFilesReadBackKeysAndPositionalTensors) {
  const GgufFile f = parse_gguf(gguf_bytes(llama31_gguf()));
  EXPECT_EQ(f.version, 3u);
  ASSERT_NE(f.find("llama.rope.freq_base"), nullptr);
  EXPECT_EQ(f.find("llama.rope.freq_base")->number, 500000);
  EXPECT_EQ(f.find("general.architecture")->text, "llama");
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.positional_tensors.at("rope_freqs.weight"), llama31_gguf().positional_tensors.at("rope_freqs.weight"));
}

TEST(Gguf, Llama3FreqFactorsAgreeWithHf) {
  const GgufRope r = gguf_rope(parse_gguf(gguf_bytes(llama31_gguf())));
  EXPECT_EQ(r.freq_factors_tensor, "rope_freqs.weight");
  EXPECT_TRUE(compare_with_hf(r, real("Llama-3.1-8B-Instruct")).empty());
  // Without the tensor llama.cpp computes plain RoPE: the report names rope_freqs.weight.
  GgufFile plain = llama31_gguf();
  plain.positional_tensors.clear();
  const auto m = compare_with_hf(gguf_rope(parse_gguf(gguf_bytes(plain))), real("Llama-3.1-8B-Instruct"));
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].key, "rope_freqs.weight");
}

TEST(Gguf, YarnAgreesWithHfAndAWrongFactorIsNamed) {
  // HF's yarn with truncate: true equals llama.cpp's rope_yarn; the attention factor
  // 0.1 ln 32 + 1 comes from ggml's mscale.
  ModelRope hf = real("gpt-oss-20b");
  for (auto& l : hf.layers) l.params.truncate = true;
  const GgufRope r = gguf_rope(parse_gguf(gguf_bytes(gpt_oss_gguf())));
  EXPECT_NEAR(r.attention_factor, 0.1 * std::log(32.0) + 1, 1e-12);
  const auto ok = compare_with_hf(r, hf);
  EXPECT_TRUE(ok.empty()) << ok[0].key << ": " << ok[0].message;
  GgufFile wrong = gpt_oss_gguf();
  wrong.metadata[7].second.number = 16;  // rope.scaling.factor
  const auto m = compare_with_hf(gguf_rope(parse_gguf(gguf_bytes(wrong))), hf);
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].key, "gpt-oss.rope.scaling.factor");
  // gpt-oss as released (truncate: false): llama.cpp's integer correction range differs.
  EXPECT_FALSE(compare_with_hf(r, real("gpt-oss-20b")).empty());
}

// What convert_hf_to_gguf.py writes for a YaRN model with mscale_all_dim: deepseek2 stores
// 0.1 * mscale_all_dim as rope.scaling.yarn_log_multiplier, mistral3 stores mscale_all_dim itself.
GgufFile yarn_log_mul_gguf(const std::string& arch, int n_rot, double base, double factor, int orig, double log_mul) {
  GgufFile f;
  f.metadata = {{"general.architecture", str(arch)},
                {arch + ".rope.dimension_count", num(4, n_rot)},
                {arch + ".rope.freq_base", num(6, base)},
                {arch + ".rope.scaling.type", str("yarn")},
                {arch + ".rope.scaling.factor", num(6, factor)},
                {arch + ".rope.scaling.original_context_length", num(4, orig)},
                {arch + ".rope.scaling.yarn_log_multiplier", num(6, log_mul)}};
  return f;
}

TEST(Gguf, YarnLogMultiplierGivesHfMscaleRatio) {
  // llama_context: get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) replaces ggml's
  // 1 + 0.1 ln factor. DeepSeek-V2-Lite (mscale = mscale_all_dim = 0.707) and Devstral Small 2
  // (both 1) have HF attention factor 1.
  const GgufRope ds = gguf_rope(parse_gguf(gguf_bytes(yarn_log_mul_gguf("deepseek2", 64, 10000, 40, 4096, 0.0707))));
  EXPECT_NEAR(ds.attention_factor, 1.0, 1e-12);
  const auto m1 = compare_with_hf(ds, real("DeepSeek-V2-Lite"));
  EXPECT_TRUE(m1.empty()) << m1[0].key << ": " << m1[0].message;
  const GgufRope mi = gguf_rope(parse_gguf(gguf_bytes(yarn_log_mul_gguf("mistral3", 128, 1e8, 48, 8192, 1.0))));
  EXPECT_NEAR(mi.attention_factor, 1.0, 1e-12);
  const auto m2 = compare_with_hf(mi, real("Devstral-Small-2-24B-Instruct"));
  EXPECT_TRUE(m2.empty()) << m2[0].key << ": " << m2[0].message;
  // Another architecture with a multiplier m: mscale stays 1, the ratio is (1 + 0.1 ln f) / (1 + 0.1 m ln f).
  const GgufRope other = gguf_rope(parse_gguf(gguf_bytes(yarn_log_mul_gguf("llama", 64, 10000, 16, 4096, 0.5))));
  EXPECT_NEAR(other.attention_factor, (1 + 0.1 * std::log(16.0)) / (1 + 0.05 * std::log(16.0)), 1e-7);
  // A wrong multiplier is named by its key.
  const auto m3 = compare_with_hf(gguf_rope(parse_gguf(gguf_bytes(yarn_log_mul_gguf("mistral3", 128, 1e8, 48, 8192, 0.5)))),
                                  real("Devstral-Small-2-24B-Instruct"));
  ASSERT_EQ(m3.size(), 1u);
  EXPECT_EQ(m3[0].key, "mistral3.rope.scaling.yarn_log_multiplier");
}

TEST(Gguf, AttentionFactorKeysAsLlamaContextCombinesThem) {
  // YaRN: llama_context overwrites yarn_attn_factor, then multiplies by rope.scaling.attn_factor.
  GgufFile yarn = gpt_oss_gguf();
  yarn.metadata.push_back({"gpt-oss.rope.scaling.yarn_attn_factor", num(6, 0.5)});
  yarn.metadata.push_back({"gpt-oss.rope.scaling.attn_factor", num(6, 2)});
  EXPECT_NEAR(gguf_rope(parse_gguf(gguf_bytes(yarn))).attention_factor, 2 * (1 + 0.1 * std::log(32.0)), 1e-6);
  // Without YaRN both keys multiply (cparams.yarn_attn_factor *= hparams.rope_attn_factor).
  GgufFile plain = llama31_gguf();
  plain.metadata.push_back({"llama.rope.scaling.yarn_attn_factor", num(6, 3)});
  plain.metadata.push_back({"llama.rope.scaling.attn_factor", num(6, 2)});
  EXPECT_NEAR(gguf_rope(parse_gguf(gguf_bytes(plain))).attention_factor, 6, 1e-6);
  // A YaRN factor below 1: get_mscale is 1 and ggml's 1 + 0.1 ln(factor) is divided back out.
  GgufFile shrink = gpt_oss_gguf();
  shrink.metadata[7].second.number = 0.5;  // rope.scaling.factor
  EXPECT_NEAR(gguf_rope(parse_gguf(gguf_bytes(shrink))).attention_factor, 1, 1e-12);
}

TEST(Gguf, ScalingTypeAsLoadHparamsReadsIt) {
  // No rope.scaling.type: "linear", so rope.scaling.factor divides every frequency.
  GgufFile linear = llama31_gguf();
  linear.positional_tensors.clear();
  linear.metadata.push_back({"llama.rope.scaling.factor", num(6, 4)});
  GgufRope r = gguf_rope(parse_gguf(gguf_bytes(linear)));
  EXPECT_EQ(r.scaling_type, "linear");
  EXPECT_FLOAT_EQ(r.inv_freq[0], 0.25f);
  // "none": llama_context forces freq_scale = 1 whatever the factor says.
  GgufFile none = linear;
  none.metadata.push_back({"llama.rope.scaling.type", str("none")});
  r = gguf_rope(parse_gguf(gguf_bytes(none)));
  EXPECT_EQ(r.factor, 1);
  EXPECT_FLOAT_EQ(r.inv_freq[0], 1.0f);
  // A name llama_rope_scaling_type_from_string does not know: llama.cpp aborts; here an error naming it.
  GgufFile unknown = linear;
  unknown.metadata.push_back({"llama.rope.scaling.type", str("ntk")});
  try {
    gguf_rope(parse_gguf(gguf_bytes(unknown)));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"ntk\""), std::string::npos) << e.what();
  }
}

TEST(Gguf, KeysOfAnotherTypeThanLlamaCppReadsAreErrors) {
  // llama-model-loader.cpp GGUFMeta::GKV::get_kv: "key %s has wrong type %s but expected type %s".
  auto message = [](GgufFile f) {
    try {
      gguf_rope(parse_gguf(gguf_bytes(f)));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  GgufFile f64_base = llama31_gguf();
  f64_base.metadata[3].second.type = 12;  // llama.rope.freq_base as f64
  EXPECT_NE(message(f64_base).find("llama.rope.freq_base must be f32"), std::string::npos) << message(f64_base);
  GgufFile u64_ctx = gpt_oss_gguf();
  u64_ctx.metadata[8].second.type = 10;  // original_context_length as u64
  EXPECT_NE(message(u64_ctx).find("gpt-oss.rope.scaling.original_context_length must be u32"), std::string::npos)
      << message(u64_ctx);
  GgufFile str_factor = gpt_oss_gguf();
  str_factor.metadata[7].second = str("32");
  EXPECT_NE(message(str_factor).find("gpt-oss.rope.scaling.factor must be f32"), std::string::npos) << message(str_factor);
  // attention.head_count may be one value per layer (get_key_or_arr).
  GgufFile per_layer = gpt_oss_gguf();
  per_layer.metadata[3].second.type = 9, per_layer.metadata[3].second.elem_type = 4;
  per_layer.metadata[3].second.numbers = {64, 64};
  EXPECT_EQ(message(per_layer), "");
}

TEST(Gguf, MalformedFilesAreErrors) {
  const std::string good = gguf_bytes(llama31_gguf());
  EXPECT_THROW(parse_gguf(""), Error);
  EXPECT_THROW(parse_gguf("GGML" + good.substr(4)), Error);
  for (std::size_t cut : {std::size_t{6}, std::size_t{30}, good.size() / 2, good.size() - 1})
    EXPECT_THROW(parse_gguf(good.substr(0, cut)), Error) << cut;
  std::string bad_type = gguf_bytes(gpt_oss_gguf());
  bad_type[24 + 8 + 20] = 99;  // the first value's type (after the key "general.architecture")
  try {
    parse_gguf(bad_type);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("value type 99"), std::string::npos) << e.what();
  }
  std::string huge = good;
  huge[15] = '\x7f';  // tensor count
  EXPECT_THROW(parse_gguf(huge), Error);
  GgufFile odd = gpt_oss_gguf();
  odd.metadata.push_back({"gpt-oss.rope.dimension_count", num(4, 63)});
  EXPECT_THROW(gguf_rope(parse_gguf(gguf_bytes(odd))), Error);
}

// The rotary dimension against the head (llama-model.cpp load_hparams; ggml's rope), the
// architecture's name, frequencies below float's normal range and the listed keys are checked
// as llama.cpp reads them; each message names where a value came from and what was expected
// (issue 33's second re-run).
TEST(Gguf, RotaryDimensionHeadSizeAndListedKeysAreCheckedAsLlamaCppReadsThem) {
  const auto message = [](const std::vector<std::pair<std::string, GgufValue>>& metadata) {
    GgufFile f;
    f.metadata = metadata;
    try {
      gguf_rope(parse_gguf(gguf_bytes(f)));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto model = [](const std::string& arch, double n_rot) {
    std::vector<std::pair<std::string, GgufValue>> m = {{"general.architecture", str(arch)},
                                                          {arch + ".embedding_length", num(4, 4096)},
                                                          {arch + ".attention.head_count", num(4, 32)}};
    if (n_rot > 0) m.push_back({arch + ".rope.dimension_count", num(4, n_rot)});
    return m;
  };
  EXPECT_EQ(message(model("llama", 128)), "");
  EXPECT_EQ(message(model("stablelm", 32)), "");  // partial rotary: fewer channels than the head's 128
  EXPECT_NE(message(model("stablelm", 256)).find("stablelm.rope.dimension_count 256 is more than the head size 128 "
                                                 "(stablelm.embedding_length / attention.head_count)"), std::string::npos)
      << message(model("stablelm", 256));
  EXPECT_NE(message(model("llama", 64)).find("must equal the head size 128"), std::string::npos) << message(model("llama", 64));
  EXPECT_NE(message(model("llama", 4294967295.0)).find("got 4294967295"), std::string::npos) << message(model("llama", 4294967295.0));
  auto no_heads = model("llama", 0);
  no_heads[2].second.number = 0;
  EXPECT_NE(message(no_heads).find("are each missing (head_count is 0)"), std::string::npos) << message(no_heads);
  // Frequencies that are 0 or subnormal in float: rope.scaling.factor 3e38.
  auto tiny = model("llama", 128);
  tiny.push_back({"llama.rope.scaling.factor", num(6, 3e38)});
  EXPECT_NE(message(tiny).find("float32's normal range"), std::string::npos) << message(tiny);
  // The architecture's name: printable, at most 64 characters.
  EXPECT_NE(message(model(std::string(65, 'a'), 128)).find("got 65 bytes starting \"aaaa"), std::string::npos);
  EXPECT_NE(message(model("ll\x1b[2J\nama", 128)).find("with a control or non-ASCII byte"), std::string::npos);
  EXPECT_NE(message(model("", 128)).find("general.architecture must be 1 to 64"), std::string::npos);
  // Listed keys: n_swa a u32; M-RoPE's sections, at most four of n_rot / 2 pairs.
  auto swa = model("llama", 128);
  swa.push_back({"llama.attention.sliding_window", num(5, -4096)});
  EXPECT_NE(message(swa).find("llama.attention.sliding_window must be u32"), std::string::npos) << message(swa);
  const auto sections = [&](std::vector<double> values) {
    auto m = model("qwen2vl", 128);
    GgufValue v;
    v.type = 9, v.elem_type = 5, v.numbers = std::move(values);
    m.push_back({"qwen2vl.rope.dimension_sections", v});
    return message(m);
  };
  EXPECT_EQ(sections({16, 24, 24, 0}), "");
  EXPECT_NE(sections({-1, 1e9, 0, 0}).find("holds -1; expected sections >= 0"), std::string::npos) << sections({-1, 1e9, 0, 0});
  EXPECT_NE(sections({16, 24, 24, 1}).find("sums to 65 pairs; n_rot / 2 = 64 at most"), std::string::npos) << sections({16, 24, 24, 1});
  EXPECT_NE(sections({1, 1, 1, 1, 1}).find("at most 4 i32"), std::string::npos);
  // head_count as an i32 array (per layer) whose first count is negative: named, not "missing".
  auto negative_heads = model("llama", 0);
  negative_heads[2].second.type = 9, negative_heads[2].second.elem_type = 5, negative_heads[2].second.numbers = {-32, 32};
  EXPECT_NE(message(negative_heads).find("llama.attention.head_count[0] is -32; expected a count >= 0"), std::string::npos)
      << message(negative_heads);
}

}  // namespace
}  // namespace posenc
