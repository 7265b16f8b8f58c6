// Every config.json in tests/data/real-configs is accepted in strict mode and read as
// Hugging Face reads it; where the golden file covers the same model, the numbers are HF's.
#include <gtest/gtest.h>

#include <cmath>
#include <dirent.h>
#include <map>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

using testing::max_rel_diff;
using testing::reference_dir;

struct Expected {
  const char* rope_type;
  int head_dim;
  int rotary_dim;
  double theta;
  std::size_t layer_types;  // distinct layer types (0: uniform)
};

// What HF computes for each file (rotary_dim of the default layer: full attention).
const std::map<std::string, Expected> kExpected = {
    {"CodeLlama-7b-hf", {"default", 128, 128, 1e6, 0}},
    {"DeepSeek-V2-Lite", {"yarn", 64, 64, 1e4, 0}},
    {"DeepSeek-V3.2", {"yarn", 64, 64, 1e4, 0}},
    // the default layer is sliding_attention (rope "main"); the compressed layers' YaRN: families8_test.cc
    {"DeepSeek-V4-Flash-0731", {"default", 512, 64, 1e4, 3}},
    {"Devstral-Small-2-24B-Instruct", {"yarn", 128, 128, 1e8, 0}},
    {"EXAONE-4.0-32B", {"llama3", 128, 128, 1e6, 2}},
    {"GLM-4.1V-9B-Thinking", {"default", 128, 64, 1e4, 0}},
    {"GLM-4.5", {"default", 128, 64, 1e6, 0}},
    {"HunyuanImage-2.1-reprompt", {"dynamic", 128, 128, 1e4, 0}},
    {"Kimi-K2-Instruct", {"yarn", 64, 64, 5e4, 0}},
    {"Llama-2-7b__neuron_training", {"default", 128, 128, 1e4, 0}},
    {"Llama-3.1-8B-Instruct", {"llama3", 128, 128, 5e5, 0}},
    {"Llama-3.2-1B-Instruct", {"llama3", 64, 64, 5e5, 0}},
    {"Llama-3.2-90B-Vision-Instruct", {"llama3", 128, 128, 5e5, 0}},
    {"MiniCPM-2B-128k", {"dynamic", 64, 64, 1e6, 0}},
    {"MiniMax-M2", {"default", 128, 64, 5e6, 0}},  // rotary_dim honoured (HF: 128)
    {"Mistral-7B-Instruct-v0.3__full_dump", {"default", 128, 128, 1e6, 0}},
    {"Mixtral-8x7B-v0.1", {"default", 128, 128, 1e6, 0}},
    {"Olmo-3.1-32B-Instruct", {"yarn", 128, 128, 5e5, 2}},
    {"Phi-3.5-mini-instruct", {"longrope", 96, 96, 1e4, 0}},
    {"Phi-3.5-vision-instruct__text", {"longrope", 96, 96, 1e4, 0}},
    {"Phi-4-mini-instruct", {"longrope", 128, 96, 1e4, 0}},
    {"Qwen-1_8B", {"default", 128, 128, 1e4, 0}},
    {"Qwen2-VL-7B-Instruct__4layer", {"default", 128, 128, 1e6, 0}},
    {"Qwen2.5-7B-Instruct", {"default", 128, 128, 1e6, 0}},
    {"Qwen2.5-VL-7B-Instruct", {"default", 128, 128, 1e6, 0}},
    {"Qwen3-8B", {"default", 128, 128, 1e6, 0}},
    {"Qwen3.5-9B", {"default", 256, 64, 1e7, 2}},
    {"RedPajama-INCITE-3B-v1", {"default", 80, 80, 1e4, 0}},
    {"SmolLM2-360M-Instruct", {"default", 64, 64, 1e5, 0}},
    {"c4ai-command-r-v01", {"default", 128, 128, 8e6, 0}},
    {"codegen-350M-mono", {"default", 64, 32, 1e4, 0}},  // CodeGen's own rotary_dim, base 10000
    {"chatglm3-6b", {"default", 128, 64, 1e4, 0}},
    {"dbrx__neuron_training", {"default", 128, 128, 5e5, 0}},  // attn_config.rope_theta honoured
    {"gemma-2-9b", {"default", 256, 256, 1e4, 0}},
    {"gemma-2b", {"default", 256, 256, 1e4, 0}},
    {"gemma-3-1b-it", {"default", 256, 256, 1e6, 2}},
    {"gemma-3-27b-it", {"linear", 128, 128, 1e6, 2}},
    {"gemma-4-31B-it", {"proportional", 512, 512, 1e6, 2}},  // full layers: global_head_dim
    {"gpt-j-6b", {"default", 256, 64, 1e4, 0}},  // GPT-J's own rotary_dim, base 10000
    {"gpt-oss-20b", {"yarn", 64, 64, 150000, 2}},
    {"internlm2_5-7b-chat", {"dynamic", 128, 128, 1e6, 0}},
    {"phi-1", {"default", 64, 32, 1e4, 0}},
    {"phi-2", {"default", 80, 32, 1e4, 0}},
    {"phi-4", {"default", 128, 128, 250000, 0}},
    {"stablelm-2-zephyr-1_6b", {"default", 64, 16, 1e4, 0}},
};

std::string config_path(const std::string& name) { return reference_dir() + "/real-configs/" + name + ".json"; }

ModelRope load(const std::string& name, ConfigOptions options = {}) {
  return load_hf_config(config_path(name), options);
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(RealConfigs, EveryFileIsAcceptedAndReadAsHfDoes) {
  DIR* dir = opendir((reference_dir() + "/real-configs").c_str());
  ASSERT_NE(dir, nullptr) << "missing " << reference_dir() << "/real-configs";
  std::size_t seen = 0;
  while (dirent* e = readdir(dir)) {
    std::string file = e->d_name;
    if (file.size() < 5 || file.substr(file.size() - 5) != ".json") continue;
    if (file == "manifest.json" || file == "keys-in-the-wild.json") continue;
    const std::string name = file.substr(0, file.size() - 5);
    SCOPED_TRACE(name);
    ++seen;
    auto it = kExpected.find(name);
    ASSERT_NE(it, kExpected.end()) << "new config: add its expected reading to kExpected";
    const Expected& want = it->second;
    ModelRope model;
    ASSERT_NO_THROW(model = load(name));  // strict mode: no --lenient
    const LayerRope& layer = model.select();
    const RopeSchedule s = compute_schedule(layer.params);
    EXPECT_STREQ(to_string(s.type), want.rope_type);
    EXPECT_EQ(s.head_dim, want.head_dim);
    EXPECT_EQ(s.rotary_dim, want.rotary_dim);
    EXPECT_EQ(layer.params.theta, want.theta);
    EXPECT_EQ(want.layer_types == 0 ? 1u : want.layer_types, model.layers.size());
    EXPECT_EQ(s.inv_freq.size() * 2, static_cast<std::size_t>(s.rotary_dim));
    // proportional (Gemma 4): zero frequencies past rotated_dim / 2 by design.
    for (std::size_t i = 0; i < s.inv_freq.size(); ++i)
      EXPECT_TRUE(std::isfinite(s.inv_freq[i]) && (static_cast<int>(i) < s.rotated_dim / 2 ? s.inv_freq[i] > 0 : s.inv_freq[i] == 0)) << i;
    EXPECT_TRUE(std::isfinite(s.attention_factor) && s.attention_factor > 0);
  }
  closedir(dir);
  EXPECT_EQ(seen, kExpected.size());
}

TEST(RealConfigs, NumbersEqualHfGoldenForTheSameModels) {
  struct Pair { const char* config; const char* golden; };
  for (const Pair& pair : {Pair{"Llama-3.1-8B-Instruct", "llama3_llama3.1_8b"},
                           Pair{"gpt-oss-20b", "yarn_gpt_oss_truncate_false"},
                           Pair{"Llama-2-7b__neuron_training", "default_llama2_7b"}}) {
    SCOPED_TRACE(pair.config);
    const auto& g = testing::golden_case("rope_inv_freq", pair.golden);
    const RopeSchedule s = compute_schedule(load(pair.config).select().params);
    EXPECT_LE(max_rel_diff(widen(s.inv_freq), g.at("inv_freq").get<std::vector<double>>()), 2e-6);
    EXPECT_NEAR(s.attention_factor, g.at("attention_factor").get<double>(), 1e-12);
  }
}

TEST(RealConfigs, SpecValuesForDeepSeekPhiAndQwen) {
  // hf-reference.md §3: DeepSeek-V2 range [10, 23], attention 1.0, softmax multiplier 1.5896262.
  const RopeParams ds = load("DeepSeek-V2-Lite").select().params;
  const RopeSchedule s = compute_schedule(ds);
  EXPECT_EQ((*s.correction_range)[0], 10);
  EXPECT_EQ((*s.correction_range)[1], 23);
  EXPECT_EQ(s.attention_factor, 1.0);
  EXPECT_NEAR(deepseek_softmax_scale_multiplier(ds), 1.5896262, 1e-7);
  // Phi-3.5-mini: factor 131072/4096 = 32, attention sqrt(1 + ln 32 / ln 4096) = 1.1902381.
  const RopeSchedule phi = compute_schedule(load("Phi-3.5-mini-instruct").select().params);
  EXPECT_NEAR(phi.attention_factor, 1.1902381, 1e-7);
  EXPECT_FALSE(phi.uses_long_factors);
  // Qwen2.5-7B's default schedule equals the Qwen2.5 YaRN golden below its correction range.
  const auto& yarn = testing::golden_case("rope_inv_freq", "yarn_qwen2.5_7b");
  const auto qwen = compute_schedule(load("Qwen2.5-7B-Instruct").select().params).inv_freq;
  const auto hf = yarn.at("inv_freq").get<std::vector<double>>();
  for (int i = 0; i <= 23; ++i) EXPECT_NEAR(qwen[i], hf[i], 2e-6 * hf[i]) << i;
}

TEST(RealConfigs, LayerTypesGetTheirOwnSchedules) {
  const ModelRope g1 = load("gemma-3-1b-it");
  EXPECT_EQ(g1.select("sliding_attention").params.theta, 10000.0);  // rope_local_base_freq
  EXPECT_EQ(g1.select().params.theta, 1e6);
  const ModelRope g27 = load("gemma-3-27b-it");
  EXPECT_EQ(g27.select().params.type, RopeType::kLinear);
  EXPECT_EQ(g27.select("sliding_attention").params.type, RopeType::kDefault);
  const ModelRope olmo = load("Olmo-3.1-32B-Instruct");
  EXPECT_EQ(olmo.select().params.type, RopeType::kYarn);
  EXPECT_EQ(olmo.select("sliding_attention").params.type, RopeType::kDefault);
  EXPECT_EQ(olmo.select("sliding_attention").params.theta, 500000.0);
  const ModelRope qwen35 = load("Qwen3.5-9B");
  EXPECT_THROW(qwen35.select("linear_attention"), Error);
  EXPECT_EQ(qwen35.select().params.mrope_section, (std::vector<int>{11, 11, 10}));
  EXPECT_TRUE(qwen35.select().params.mrope_interleaved);
  EXPECT_THROW(g1.select("chunked_attention"), Error);
  // EXAONE-4 (hybrid): global layers are NoPE in HF; the default pick is the sliding layers.
  const ModelRope exaone = load("EXAONE-4.0-32B");
  EXPECT_THROW(exaone.select("full_attention"), Error);
  EXPECT_EQ(exaone.select().layer_type, "sliding_attention");
  EXPECT_EQ(exaone.select().params.type, RopeType::kLlama3);
  // Without the key, Exaone4Config's sliding_window 4096 applies: still hybrid, as posenc spec says.
  nlohmann::json c = nlohmann::json::parse(testing::read_file(config_path("EXAONE-4.0-32B")));
  c.erase("sliding_window");
  for (const LayerRope& l : parse_hf_config(c.dump()).layers)
    EXPECT_EQ(l.has_rope, l.layer_type == "sliding_attention") << l.layer_type;
  c["sliding_window"] = nullptr;  // not hybrid: every layer rotates
  for (const LayerRope& l : parse_hf_config(c.dump()).layers) EXPECT_TRUE(l.has_rope) << l.layer_type;
}

TEST(RealConfigs, MultimodalSectionsAreCarried) {
  EXPECT_EQ(load("Qwen2-VL-7B-Instruct__4layer").select().params.mrope_section, (std::vector<int>{16, 24, 24}));
  EXPECT_EQ(load("Devstral-Small-2-24B-Instruct").select().params.llama_4_scaling_beta, 0.1);
}

TEST(RealConfigs, HfCompatibleIgnoresWhatHfIgnores) {
  ConfigOptions hf;
  hf.hf_compatible = true;
  EXPECT_EQ(compute_schedule(load("MiniMax-M2", hf).select().params).rotary_dim, 128);
  EXPECT_EQ(load("dbrx__neuron_training", hf).select().params.theta, 10000.0);
  // The default reading honours them and says so.
  const ModelRope minimax = load("MiniMax-M2");
  ASSERT_FALSE(minimax.notes.empty());
  bool mentioned = false;
  for (const auto& n : minimax.notes) mentioned = mentioned || n.find("rotary_dim") != std::string::npos;
  EXPECT_TRUE(mentioned);
}

// Llama-4-Scout's published config (examples/configs/llama4-scout-10m.json): llama3 scaling with
// equal bands, low_freq_factor == high_freq_factor == 1, nested in text_config. HF accepts it
// (the smooth band is empty); the schedule is recomputed here from the formula, in double.
TEST(RealConfigs, Llama4ScoutEqualBandsAsHfComputes) {
  const ModelRope model = load_hf_config(std::string(POSENC_EXAMPLES_DIR) + "/configs/llama4-scout-10m.json");
  EXPECT_EQ(model.model_type, "llama4");
  EXPECT_TRUE(model.warnings.empty());
  const RopeParams& p = model.select().params;
  EXPECT_EQ(p.type, RopeType::kLlama3);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.max_position_embeddings, 10485760);
  const RopeSchedule s = compute_schedule(p);
  ASSERT_EQ(s.inv_freq.size(), 64u);
  const double orig = 8192, factor = 8;
  int divided = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = 1 / std::pow(500000.0, 2.0 * i / 128);
    const double wavelength = 2 * kPi / base;
    // low == high: one edge at orig / 1 = 8192; longer wavelengths are divided by factor.
    const double want = wavelength > orig / 1.0 ? base / factor : base;
    divided += wavelength > orig;
    EXPECT_NEAR(s.inv_freq[static_cast<std::size_t>(i)], want, 4e-7 * want) << i;
  }
  EXPECT_EQ(divided, 29);
  bool noted = false, nope = false;
  for (const auto& n : model.notes) {
    noted = noted || n.find("no smooth band") != std::string::npos;
    nope = nope || n.find("36 of 48 layers use RoPE") != std::string::npos;
  }
  EXPECT_TRUE(noted);
  EXPECT_TRUE(nope) << "Llama 4's NoPE layers (every 4th) are mentioned";
}

}  // namespace
}  // namespace posenc
