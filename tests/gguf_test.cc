// GGUF files written here and read back; llama.cpp's schedule from them against HF's.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

GgufValue num(std::uint32_t type, double v) {
  GgufValue x;
  x.type = type, x.number = v;
  return x;
}
GgufValue str(const std::string& s) {
  GgufValue x;
  x.type = 8, x.text = s;
  return x;
}

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

}  // namespace
}  // namespace posenc
