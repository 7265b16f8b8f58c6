// posenc::parse_model_spec: per-layer positional semantics of the real configs and of configs
// built from the HF modeling code of the families model-semantics.md names.
#include <gtest/gtest.h>

#include <cmath>
#include <dirent.h>
#include <nlohmann/json.hpp>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/model_spec.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::reference_dir;

ModelSpec real(const std::string& name) {
  return load_model_spec(reference_dir() + "/real-configs/" + name + ".json");
}
ModelSpec built(const json& config) { return parse_model_spec(config.dump()); }

std::vector<int> rope_layers(const ModelSpec& s) {
  std::vector<int> out;
  for (const LayerSpec& l : s.layers)
    if (l.rope) out.push_back(l.index);
  return out;
}

json llama_like(const std::string& model_type, int layers) {
  return {{"model_type", model_type}, {"hidden_size", 512}, {"num_attention_heads", 8},
          {"num_hidden_layers", layers}, {"rope_theta", 10000.0}};
}

TEST(ModelSpec, EveryRealConfigIsAKnownFamilyWithOneEntryPerLayer) {
  DIR* dir = opendir((reference_dir() + "/real-configs").c_str());
  ASSERT_NE(dir, nullptr);
  int seen = 0;
  while (dirent* e = readdir(dir)) {
    std::string file = e->d_name;
    if (file.size() < 5 || file.substr(file.size() - 5) != ".json") continue;
    if (file == "manifest.json" || file == "keys-in-the-wild.json") continue;
    SCOPED_TRACE(file);
    ++seen;
    const ModelSpec s = real(file.substr(0, file.size() - 5));
    ASSERT_NE(s.family, nullptr);
    ASSERT_FALSE(s.layers.empty());
    for (std::size_t i = 0; i < s.layers.size(); ++i) {
      const LayerSpec& l = s.layers[i];
      EXPECT_EQ(l.index, static_cast<int>(i));
      EXPECT_EQ(l.rope, l.rotary_dim > 0);
      EXPECT_LE(l.rotary_offset + l.rotary_dim, l.head_dim);
      EXPECT_GT(l.softmax_scale, 0);
    }
  }
  closedir(dir);
  EXPECT_EQ(seen, 46);
}

std::vector<std::string> types_of(const ModelSpec& s) {
  std::vector<std::string> out;
  for (const LayerSpec& l : s.layers) out.push_back(l.layer_type);
  return out;
}

TEST(ModelSpec, Exaone4WithoutLayerTypesFollowsExaone4ConfigDefaults) {
  // Exaone4Config: sliding_window 4096 and sliding_window_pattern 4 when absent; layer i is full
  // when (i + 1) % pattern == 0, and full layers of a hybrid model are NoPE (Exaone4Attention).
  json c = llama_like("exaone4", 8);
  ModelSpec s = built(c);
  EXPECT_EQ(rope_layers(s), (std::vector<int>{0, 1, 2, 4, 5, 6}));
  ASSERT_EQ(s.layers.size(), 8u);
  EXPECT_EQ(s.layers[0].attention, AttentionKind::kSliding);
  EXPECT_EQ(s.layers[0].window, 4096);
  EXPECT_EQ(s.layers[3].attention, AttentionKind::kFull);
  c["sliding_window_pattern"] = 2, c["sliding_window"] = 1024;
  s = built(c);
  EXPECT_EQ(rope_layers(s), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(s.layers[0].window, 1024);
  // sliding_window null without layer_types: Exaone4Config divides by a pattern of 0, so unknown.
  c["sliding_window"] = nullptr;
  s = built(c);
  EXPECT_TRUE(s.layers.empty());
  EXPECT_FALSE(s.warnings.empty());
}

TEST(ModelSpec, Qwen3NextWithoutLayerTypesUsesFullAttentionInterval) {
  // Qwen3NextConfig: linear_attention unless (i + 1) % full_attention_interval == 0 (default 4).
  json c = llama_like("qwen3_next", 8);
  c["head_dim"] = 256, c["partial_rotary_factor"] = 0.25;
  ModelSpec s = built(c);
  EXPECT_EQ(rope_layers(s), (std::vector<int>{3, 7}));
  EXPECT_EQ(s.layers[0].attention, AttentionKind::kLinear);
  EXPECT_EQ(s.layers[3].rotary_dim, 64);
  c["full_attention_interval"] = 2;
  s = built(c);
  EXPECT_EQ(rope_layers(s), (std::vector<int>{1, 3, 5, 7}));
}

TEST(ModelSpec, Lfm2WithoutLayerTypesUsesFullAttnIdxs) {
  // Lfm2Config: full_attention at full_attn_idxs (every layer when absent), conv otherwise.
  json c = llama_like("lfm2", 6);
  c["full_attn_idxs"] = {2, 5};
  ModelSpec s = built(c);
  EXPECT_EQ(rope_layers(s), (std::vector<int>{2, 5}));
  EXPECT_EQ(s.layers[0].attention, AttentionKind::kNone);
  EXPECT_EQ(s.layers[0].layer_type, "conv");
  c.erase("full_attn_idxs");
  EXPECT_EQ(rope_layers(built(c)).size(), 6u);
}

json kimi_linear(bool nope) {
  json c = {{"model_type", "kimi_linear"}, {"hidden_size", 2304}, {"num_attention_heads", 32},
            {"num_hidden_layers", 4}, {"rope_theta", 10000.0}, {"qk_nope_head_dim", 128},
            {"qk_rope_head_dim", 64}, {"kv_lora_rank", 512}, {"v_head_dim", 128}, {"mla_use_nope", nope},
            {"linear_attn_config", {{"full_attn_layers", {4}}, {"kda_layers", {1, 2, 3}}}}};
  return c;
}

TEST(ModelSpec, KimiLinearKdaLayersAndMlaUseNope) {
  // KimiLinearConfig: 1-based full_attn_layers / kda_layers; mla_use_nope leaves MLA without RoPE.
  ModelSpec s = built(kimi_linear(true));
  ASSERT_EQ(s.layers.size(), 4u);
  EXPECT_EQ(types_of(s), (std::vector<std::string>{"linear_attention", "linear_attention", "linear_attention",
                                                   "full_attention"}));
  EXPECT_TRUE(rope_layers(s).empty());
  EXPECT_EQ(s.layers[0].attention, AttentionKind::kLinear);
  EXPECT_EQ(s.layers[3].attention, AttentionKind::kFull);
  EXPECT_NEAR(s.layers[3].softmax_scale, 1 / std::sqrt(192.0), 1e-12);  // qk_head_dim^-0.5
  // Without mla_use_nope the MLA layer rotates its qk_rope_head_dim channels after the NoPE part.
  s = built(kimi_linear(false));
  EXPECT_EQ(rope_layers(s), (std::vector<int>{3}));
  EXPECT_EQ(s.layers[3].rotary_offset, 128);
  EXPECT_EQ(s.layers[3].rotary_dim, 64);
  // A layer in neither list is an error naming the key.
  json bad = kimi_linear(true);
  bad["linear_attn_config"]["kda_layers"] = {1, 2};
  try {
    built(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_attn_config"), std::string::npos) << e.what();
  }
}

TEST(ModelSpec, Exaone4FullLayersAreNoPEAndSlidingLayersRotate) {
  const ModelSpec s = real("EXAONE-4.0-32B");  // layer_types: LLLG, sliding_window 4096
  ASSERT_EQ(s.layers.size(), 64u);
  EXPECT_FALSE(s.layers[3].rope);
  EXPECT_EQ(s.layers[3].attention, AttentionKind::kFull);
  EXPECT_TRUE(s.layers[0].rope);
  EXPECT_EQ(s.layers[0].attention, AttentionKind::kSliding);
  EXPECT_EQ(*s.layers[0].window, 4096);
  EXPECT_EQ(s.layers[0].qk_norm, QkNormPlacement::kBeforeRope);
  json c = json::parse(testing::read_file(reference_dir() + "/real-configs/EXAONE-4.0-32B.json"));
  c["sliding_window"] = nullptr;  // not hybrid: every layer rotates (Exaone4Attention)
  EXPECT_EQ(rope_layers(built(c)).size(), 64u);
}

TEST(ModelSpec, DeepSeekMlaRotatesTheSliceAfterTheNopePartAndScalesTheSoftmax) {
  const ModelSpec v2 = real("DeepSeek-V2-Lite");
  const LayerSpec& l = v2.layers[0];
  EXPECT_EQ(l.rotary_offset, 128);
  EXPECT_EQ(l.rotary_dim, 64);
  EXPECT_EQ(l.head_dim, 192);
  EXPECT_EQ(l.layout, RopeLayout::kInterleaved);
  const double m = 0.1 * 0.707 * std::log(40.0) + 1;  // yarn_get_mscale(40, 0.707)
  EXPECT_NEAR(l.softmax_scale_multiplier, m * m, 1e-12);
  EXPECT_NEAR(l.softmax_scale, m * m / std::sqrt(192.0), 1e-12);
  EXPECT_EQ(v2.schedules[l.schedule].attention_factor, 1.0);  // mscale is not on cos/sin

  const ModelSpec kimi = real("Kimi-K2-Instruct");  // DeepSeek-V3 code, rope_interleave default
  EXPECT_EQ(kimi.layers[0].layout, RopeLayout::kDeepSeekV3);
  json c = json::parse(testing::read_file(reference_dir() + "/real-configs/Kimi-K2-Instruct.json"));
  c["rope_interleave"] = false;
  EXPECT_EQ(built(c).layers[0].layout, RopeLayout::kHalfSplit);
}

TEST(ModelSpec, PairingPerFamily) {
  EXPECT_EQ(real("GLM-4.5").layers[0].layout, RopeLayout::kHalfSplit);  // gpt_neox apply_rotary_pos_emb
  EXPECT_EQ(real("GLM-4.5").layers[0].rotary_dim, 64);
  EXPECT_EQ(real("chatglm3-6b").layers[0].layout, RopeLayout::kInterleaved);
  EXPECT_EQ(real("c4ai-command-r-v01").layers[0].layout, RopeLayout::kInterleaved);
  EXPECT_EQ(real("Llama-3.1-8B-Instruct").layers[0].layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(built(llama_like("glm4", 2)).layers[0].layout, RopeLayout::kInterleaved);
  EXPECT_EQ(built(llama_like("ernie4_5", 2)).layers[1].layout, RopeLayout::kInterleaved);
}

TEST(ModelSpec, SlidingWindowsFollowEachFamilysRule) {
  const ModelSpec g2 = real("gemma-2-9b");  // no layer_types: Gemma2Config alternates, sliding first
  EXPECT_EQ(g2.layers[0].attention, AttentionKind::kSliding);
  EXPECT_EQ(g2.layers[1].attention, AttentionKind::kFull);
  EXPECT_NEAR(g2.layers[0].softmax_scale, 1 / 16.0, 1e-15);  // query_pre_attn_scalar 256
  const ModelSpec g3 = real("gemma-3-1b-it");  // sliding_window_pattern 6
  EXPECT_EQ(g3.layers[5].attention, AttentionKind::kFull);
  EXPECT_EQ(g3.layers[4].attention, AttentionKind::kSliding);
  EXPECT_EQ(*g3.layers[4].window, 512);
  EXPECT_NE(g3.layers[4].schedule, g3.layers[5].schedule);  // rope_local_base_freq
  const ModelSpec oss = real("gpt-oss-20b");
  EXPECT_EQ(*oss.layers[0].window, 128);
  EXPECT_EQ(oss.layers[1].attention, AttentionKind::kFull);
  EXPECT_EQ(real("Qwen2.5-7B-Instruct").layers[27].attention, AttentionKind::kFull);  // use_sliding_window false
  json q = llama_like("qwen2", 4);
  q["use_sliding_window"] = true, q["sliding_window"] = 1024, q["max_window_layers"] = 2;
  const ModelSpec qs = built(q);
  EXPECT_EQ(qs.layers[1].attention, AttentionKind::kFull);
  EXPECT_EQ(qs.layers[2].attention, AttentionKind::kSliding);
  EXPECT_EQ(real("Mistral-7B-Instruct-v0.3__full_dump").layers[0].attention, AttentionKind::kFull);  // sliding_window null
}

TEST(ModelSpec, NopeLayersOfQwen35MllamaSmolLM3AndCohere2) {
  const ModelSpec qwen = real("Qwen3.5-9B");
  EXPECT_EQ(qwen.layers[0].attention, AttentionKind::kLinear);
  EXPECT_FALSE(qwen.layers[0].rope);
  EXPECT_TRUE(qwen.layers[3].rope);
  EXPECT_EQ(qwen.mrope_style, MropeStyle::kInterleaved);
  const ModelSpec mllama = real("Llama-3.2-90B-Vision-Instruct");
  EXPECT_EQ(mllama.layers[3].attention, AttentionKind::kCross);
  EXPECT_FALSE(mllama.layers[3].rope);

  json smol = llama_like("smollm3", 4);
  smol["no_rope_layers"] = {1, 0, 1, 1};  // 1 = uses RoPE (SmolLM3Attention.use_rope)
  EXPECT_EQ(rope_layers(built(smol)), (std::vector<int>{0, 2, 3}));
  smol.erase("no_rope_layers");  // default: every 4th layer NoPE
  EXPECT_EQ(rope_layers(built(smol)), (std::vector<int>{0, 1, 2}));

  json cohere2 = llama_like("cohere2", 8);
  cohere2["sliding_window"] = 4096;
  const ModelSpec c2 = built(cohere2);
  EXPECT_EQ(rope_layers(c2), (std::vector<int>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(c2.layers[3].attention, AttentionKind::kFull);
  EXPECT_EQ(c2.layers[0].layout, RopeLayout::kInterleaved);
}

TEST(ModelSpec, Llama4ChunkedRopeLayersAndTemperatureTunedNopeLayers) {
  json c = {{"model_type", "llama4"},
            {"text_config",
             {{"model_type", "llama4_text"}, {"hidden_size", 5120}, {"num_attention_heads", 40}, {"head_dim", 128},
              {"num_hidden_layers", 8}, {"rope_theta", 500000.0}, {"attention_chunk_size", 8192},
              {"attn_scale", 0.1}, {"floor_scale", 8192}, {"use_qk_norm", true},
              {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 16.0}, {"low_freq_factor", 1.0},
                                {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 8192}}}}}};
  const ModelSpec s = built(c);
  ASSERT_EQ(s.layers.size(), 8u);
  EXPECT_EQ(rope_layers(s), (std::vector<int>{0, 1, 2, 4, 5, 6}));  // no_rope_layer_interval 4
  const LayerSpec& rope = s.layers[0];
  EXPECT_EQ(rope.attention, AttentionKind::kChunked);
  EXPECT_EQ(*rope.window, 8192);
  EXPECT_EQ(rope.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(rope.qk_norm, QkNormPlacement::kL2AfterRope);
  EXPECT_EQ(rope.query_scale.rule, QueryScale::kNone);
  const LayerSpec& nope = s.layers[3];
  EXPECT_EQ(nope.attention, AttentionKind::kFull);
  ASSERT_EQ(nope.query_scale.rule, QueryScale::kLlama4Temperature);
  // 1 + 0.1 log1p(floor((p + 1) / 8192)): p = 8190 -> 1; p = 8191 -> 1 + 0.1 ln 2 (cache position + 1).
  EXPECT_EQ(nope.query_scale.at(8190), 1.0);
  EXPECT_NEAR(nope.query_scale.at(8191), 1 + 0.1 * std::log(2.0), 1e-15);
}

TEST(ModelSpec, Ministral3BetaScalingHasNoPlusOne) {
  const ModelSpec s = real("Devstral-Small-2-24B-Instruct");  // beta 0.1, original 8192
  const QueryScaling& q = s.layers[0].query_scale;
  ASSERT_EQ(q.rule, QueryScale::kLlama4ScalingBeta);
  EXPECT_EQ(q.at(8191), 1.0);  // Llama 4's +1 would already scale here
  EXPECT_NEAR(q.at(8192), 1 + 0.1 * std::log(2.0), 1e-15);
  EXPECT_NEAR(q.at(3 * 8192), 1 + 0.1 * std::log(4.0), 1e-15);
}

TEST(ModelSpec, UnknownFamilyGetsItsScheduleAndAWarningNotAGuess) {
  const ModelSpec s = built(llama_like("brand_new_arch", 4));
  EXPECT_EQ(s.family, nullptr);
  EXPECT_TRUE(s.layers.empty());
  ASSERT_EQ(s.schedules.size(), 1u);
  EXPECT_EQ(s.schedules[0].rotary_dim, 64);
  ASSERT_FALSE(s.warnings.empty());
  EXPECT_NE(s.warnings.back().find("per-layer semantics"), std::string::npos);
}

TEST(ModelSpec, InconsistentLayerListsAreErrorsNamingTheKeys) {
  json c = llama_like("gpt_oss", 3);
  c["layer_types"] = {"full_attention", "sliding_attention"};
  try {
    built(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer_types has 2 entries but num_hidden_layers is 3"), std::string::npos)
        << e.what();
  }
  json s = llama_like("smollm3", 3);
  s["no_rope_layers"] = {1, 1};
  EXPECT_THROW(built(s), Error);
  json big = llama_like("llama", 0);
  EXPECT_THROW(built(big), Error);
}

// EXAONE 4.5 (issue 23): a multimodal wrapper, model_type exaone4_5, whose text_config is an
// Exaone4Config (first released as exaone4_5_text) with the llama3 schedule at rope_theta 1e6
// inside rope_parameters. spec reads the text model's family and the dict's theta.
TEST(ModelSpec, Exaone45WrapperIsReadThroughItsTextConfig) {
  const std::string path = reference_dir() + "/configs-extra/EXAONE-4.5-33B__constructed.json";
  const json config = json::parse(testing::read_file(path));
  for (const char* text_type : {"exaone4_5_text", "exaone4", ""}) {
    json c = config;
    if (*text_type) c["text_config"]["model_type"] = text_type;
    else c["text_config"].erase("model_type");  // HF's default: exaone4
    const ModelSpec s = built(c);
    ASSERT_NE(s.family, nullptr) << text_type;
    EXPECT_NE(std::string(s.family->hf_source).find("modeling_exaone4.py"), std::string::npos);
    for (const auto& n : s.rope.notes) EXPECT_EQ(n.find("rope_theta absent"), std::string::npos) << n;
    ASSERT_EQ(s.layers.size(), 64u);
    EXPECT_FALSE(s.layers[3].rope);  // LLLG: the global layers are NoPE (hybrid)
    ASSERT_TRUE(s.layers[0].rope);
    EXPECT_EQ(s.layers[0].attention, AttentionKind::kSliding);
    const RopeSchedule& r = s.schedules[s.layers[0].schedule];
    EXPECT_EQ(r.type, RopeType::kLlama3);
    EXPECT_EQ(s.rope.layers[s.layers[0].schedule].params.theta, 1e6);
    // The same schedule as the text model's own config (EXAONE-4.0-32B's shape, top-level rope_theta).
    const ModelSpec text_model = real("EXAONE-4.0-32B");
    EXPECT_EQ(r.inv_freq, text_model.schedules[text_model.layers[0].schedule].inv_freq);
  }
}

// Defect 3 of the 2026-12 review: OLMo-3 without layer_types. Olmo3Config's default pattern
// (every 4th layer full) decides the layer types, and the sliding layers keep plain RoPE at
// rope_theta (Olmo3Attention) -- in freqs' ModelRope as in spec, exactly as with layer_types.
TEST(ModelSpec, Olmo3WithoutLayerTypesKeepsItsSlidingLayersUnscaled) {
  const ModelSpec given = real("Olmo-3.1-32B-Instruct");
  json c = json::parse(testing::read_file(reference_dir() + "/real-configs/Olmo-3.1-32B-Instruct.json"));
  c.erase("layer_types");
  const ModelSpec derived = built(c);
  ASSERT_EQ(derived.layers.size(), given.layers.size());
  ASSERT_EQ(derived.rope.layers.size(), 2u);  // full_attention and sliding_attention, each its own rope
  for (std::size_t i = 0; i < given.layers.size(); ++i) {
    const LayerSpec &g = given.layers[i], &d = derived.layers[i];
    EXPECT_EQ(d.layer_type, g.layer_type) << i;
    EXPECT_EQ(derived.schedules[d.schedule].inv_freq, given.schedules[g.schedule].inv_freq) << i;
  }
  const LayerSpec& sliding = derived.layers[0];
  ASSERT_EQ(sliding.layer_type, "sliding_attention");
  EXPECT_EQ(derived.schedules[sliding.schedule].type, RopeType::kDefault);  // unscaled
  EXPECT_NE(derived.schedules[derived.layers[3].schedule].type, RopeType::kDefault);  // the full layers' scaling
  EXPECT_EQ(parse_hf_config(c.dump()).select("sliding_attention").params.type, RopeType::kDefault);
}

}  // namespace
}  // namespace posenc
