// Per-layer keys that made spec, golden and explain meaningless or crash (issue 33, F1, F8, F11):
// each is refused by parse_model_spec with an error naming the key, the value and the range, so
// every command that reads a ModelSpec (spec, golden, Python) refuses it alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/hf_config.h"
#include "posenc/model_spec.h"
#include "posenc/rope_runtime.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::reference_dir;

json real_config(const std::string& name) {
  return json::parse(testing::read_file(reference_dir() + "/real-configs/" + name + ".json"));
}

json llama_like(const std::string& model_type, int layers) {
  return {{"model_type", model_type}, {"hidden_size", 512}, {"num_attention_heads", 8},
          {"num_hidden_layers", layers}, {"rope_theta", 10000.0}};
}

// The error parse_model_spec gives, or "" when it accepts the config.
std::string spec_error(const json& config) {
  try {
    parse_model_spec(config.dump());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REFUSED(config, ...)                                            \
  do {                                                                         \
    const std::string err = spec_error(config);                                \
    EXPECT_FALSE(err.empty()) << "accepted";                                   \
    for (const std::string& part : std::initializer_list<std::string>{__VA_ARGS__})            \
      EXPECT_NE(err.find(part), std::string::npos) << err;                                     \
  } while (0)

TEST(ModelSpecHostile, QkNopeHeadDimIsAChannelCount) {
  json c = real_config("DeepSeek-V2-Lite");
  // -64 made head_dim 0, -32 made it smaller than the rotary slice, 2^31 wrapped int, 2^40 became 0.
  for (std::int64_t v : {std::int64_t{-64}, std::int64_t{-32}, std::int64_t{1} << 31, std::int64_t{1} << 40}) {
    c["qk_nope_head_dim"] = v;
    EXPECT_REFUSED(c, "qk_nope_head_dim must be in [0, 65472]", std::to_string(v).c_str());
  }
  c["qk_nope_head_dim"] = 0;  // MLA without the non-rotated part is a valid (if odd) shape
  EXPECT_EQ(spec_error(c), "");
}

TEST(ModelSpecHostile, ScalesAreFinitePositiveNumbers) {
  json gemma = real_config("gemma-3-1b-it");
  for (double v : {0.0, -256.0}) {
    gemma["query_pre_attn_scalar"] = v;
    EXPECT_REFUSED(gemma, "query_pre_attn_scalar must be a finite number > 0");
  }
  json granite = llama_like("granite", 2);
  granite["attention_multiplier"] = -1;
  EXPECT_REFUSED(granite, "attention_multiplier must be a finite number > 0", "-1");

  // spec-023: a subnormal is > 0 but 1 / sqrt(1e-320) = 1e160 made golden's logits +-inf; a normal
  // double whose scale is past float32 (1e-300 -> 1e150, or a multiplier of 1e-300) is refused by
  // the scale's own range, naming the key and its value.
  gemma["query_pre_attn_scalar"] = 1e-320;
  EXPECT_REFUSED(gemma, "query_pre_attn_scalar must be a finite number > 0 (and not subnormal), got 1e-320");
  gemma["query_pre_attn_scalar"] = 1e-300;
  EXPECT_REFUSED(gemma, "query_pre_attn_scalar 1e-300 gives a softmax scale of 1", "float32's normal range");
  granite["attention_multiplier"] = 1e-300;
  EXPECT_REFUSED(granite, "attention_multiplier 1e-300 gives a softmax scale of 1e-300");
  granite["attention_multiplier"] = 1e39;
  EXPECT_REFUSED(granite, "attention_multiplier 1e+39 gives a softmax scale");
  granite["attention_multiplier"] = 1e-30;  // small but a normal float32: accepted
  EXPECT_EQ(spec_error(granite), "");
  gemma["query_pre_attn_scalar"] = 256;
  EXPECT_EQ(spec_error(gemma), "");

  json llama4 = {{"model_type", "llama4_text"}, {"hidden_size", 512}, {"num_attention_heads", 4}, {"head_dim", 128},
                 {"num_hidden_layers", 4}, {"rope_theta", 500000.0}};
  for (const auto& [key, value, says] :
       {std::tuple<const char*, double, const char*>{"attn_scale", -0.1, "attn_scale must be a finite number >= 0, got -0.1"},
        {"attn_scale", 1e308, "query scale at position 2^31-1 infinite"},
        {"floor_scale", 0.0, "floor_scale must be a finite number > 0"},
        {"floor_scale", 1e-300, "query scale at position 2^31-1 infinite"}}) {
    json c = llama4;
    c[key] = value;
    EXPECT_REFUSED(c, says);
  }
}

TEST(ModelSpecHostile, WindowsAndChunksAreTokenCounts) {
  json mistral = llama_like("mistral", 2);
  for (int v : {0, -4096}) {
    mistral["sliding_window"] = v;
    EXPECT_REFUSED(mistral, "sliding_window must be in [1, 2147483647]", std::to_string(v).c_str());
  }
  json qwen2 = llama_like("qwen2", 2);  // Qwen2Config drops sliding_window unless use_sliding_window
  qwen2["sliding_window"] = -1;
  EXPECT_EQ(spec_error(qwen2), "");
  qwen2["use_sliding_window"] = true;
  EXPECT_REFUSED(qwen2, "sliding_window must be in [1,");

  json llama4 = {{"model_type", "llama4_text"}, {"hidden_size", 512}, {"num_attention_heads", 4}, {"head_dim", 128},
                 {"num_hidden_layers", 4}, {"rope_theta", 500000.0}, {"attention_chunk_size", 0}};
  EXPECT_REFUSED(llama4, "attention_chunk_size must be in [1, 2147483647], got 0");
}

TEST(ModelSpecHostile, LayerIndicesLieInsideTheModel) {
  json lfm2 = llama_like("lfm2", 4);
  lfm2["full_attn_idxs"] = {1, 7};
  EXPECT_REFUSED(lfm2, "full_attn_idxs entry 1 is 7; expected a layer index in [0, 3]");
  json mllama = llama_like("mllama_text_model", 4);
  mllama["cross_attention_layers"] = {-1};
  EXPECT_REFUSED(mllama, "cross_attention_layers entry 0 is -1; expected a layer index in [0, 3]");
  json bamba = llama_like("bamba", 4);
  bamba["attn_layer_indices"] = {4};
  EXPECT_REFUSED(bamba, "attn_layer_indices entry 0 is 4");
}

// Llama 4 with no_rope_layers all 0: no layer rotates, so no command may show a RoPE
// (explain opened with "RoPE (default) rotates 128 of 128 channels").
TEST(ModelSpecHostile, AModelWhoseLayersAllSkipRopeHasNoRope) {
  json c = {{"model_type", "llama4_text"}, {"hidden_size", 512}, {"num_attention_heads", 4}, {"head_dim", 128},
            {"num_hidden_layers", 2}, {"rope_theta", 500000.0}, {"no_rope_layers", {0, 0}}};
  const ModelRope rope = parse_hf_config(c.dump());
  for (const LayerRope& l : rope.layers) EXPECT_FALSE(l.has_rope);
  try {
    rope.select();
    FAIL() << "select() found a RoPE layer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no layer type of this model uses RoPE"), std::string::npos) << e.what();
  }
  const ModelSpec spec = parse_model_spec(c.dump());
  for (const LayerSpec& l : spec.layers) EXPECT_FALSE(l.rope);
}

// The hybrids too (issue 33's second re-run): every layer linear attention (Qwen3-Next with
// full_attention_interval past the layer count) or a convolution (LFM2 with full_attn_idxs []);
// one attention layer is enough to keep the rope.
TEST(ModelSpecHostile, AHybridWithoutAnAttentionLayerHasNoRope) {
  const json qwen = {{"model_type", "qwen3_next"}, {"hidden_size", 2048}, {"num_attention_heads", 16},
                     {"num_key_value_heads", 2}, {"head_dim", 256}, {"num_hidden_layers", 4},
                     {"full_attention_interval", 100}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}};
  json lfm2 = {{"model_type", "lfm2"}, {"hidden_size", 1024}, {"num_attention_heads", 16}, {"num_key_value_heads", 8},
               {"num_hidden_layers", 4}, {"full_attn_idxs", json::array()}, {"rope_theta", 1e6}};
  for (const json& c : {qwen, lfm2}) {
    SCOPED_TRACE(c.at("model_type").get<std::string>());
    const ModelRope rope = parse_hf_config(c.dump());
    for (const LayerRope& l : rope.layers) EXPECT_FALSE(l.has_rope);
    EXPECT_THROW(rope.select(), Error);
  }
  lfm2["full_attn_idxs"] = {2};
  const ModelRope one = parse_hf_config(lfm2.dump());
  EXPECT_TRUE(std::any_of(one.layers.begin(), one.layers.end(), [](const LayerRope& l) { return l.has_rope; }));
}

// Position 2^31-1 is valid for the kernels, so a sequence may be 2^31 long: golden at that
// position and RopeRuntime's dynamic NTK accept it (both asked for a seq_len the user never gave).
TEST(ModelSpecHostile, TheLastValidPositionIsAValidSequenceEnd) {
  json c = real_config("Qwen3-8B");
  c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  const ModelSpec spec = parse_model_spec(c.dump());
  GoldenParams gp;
  gp.positions = {0, kMaxPosition};
  try {
    make_golden(spec, gp);
  } catch (const Error& e) {
    // Only the float32 accuracy limit may refuse it, never the sequence length.
    EXPECT_EQ(std::string(e.what()).find("seq_len"), std::string::npos) << e.what();
  }
  EXPECT_EQ(compute_schedule(spec.rope.layers[0].params, kMaxPosition + 1).seq_len, kMaxPosition + 1);
  EXPECT_THROW(compute_schedule(spec.rope.layers[0].params, kMaxPosition + 2), Error);
  RopeRuntime rt(spec.rope.layers[0].params);
  EXPECT_EQ(rt.update(kMaxPosition).seq_len, kMaxPosition + 1);
  EXPECT_THROW(rt.update(kMaxPosition + 1), Error);
}

}  // namespace
}  // namespace posenc
