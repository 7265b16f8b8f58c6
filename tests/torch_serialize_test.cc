// Saved models: the whole ModelConfig survives save and load (every RopeParams field, T5's
// direction, XL memory), logits are bit-identical after load, and a file that names something
// unknown is an error, never a silent default.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "posenc/error.h"
#include "posenc/rope_fields.h"
#include "posenc/rope_params_json.h"
#include "posenc_torch/model.h"
#include "field_table_support.h"
#include "rope_params_fixtures.h"
#include "torch_support.h"

namespace posenc::torch_layer {
namespace {

// The field tables (rope_fields.h, model_config.h) drive the comparison: a new row is compared
// with no edit here.
template <class S>
void expect_same(const S& a, const S& b) {
  posenc::testing::expect_same_fields(a, b);
}

TEST(TorchSerialize, TheFieldTablesCoverTheirStructs) {
  posenc::testing::expect_table_covers(RopeParams{});
  posenc::testing::expect_table_covers(ModelConfig{});
  posenc::testing::expect_table_covers(T5BucketParams{});
}

ModelConfig small(Scheme scheme) {
  ModelConfig c = testing::small_model(scheme, 40);
  c.d_ff = 48;
  return c;
}

// Every rope type, each with the fields it reads set away from their defaults (head_dim 8:
// 4 frequencies).
std::vector<std::pair<std::string, RopeParams>> rope_cases() {
  std::vector<std::pair<std::string, RopeParams>> out;
  RopeParams p;
  p.theta = 5000.25;
  out.push_back({"default", p});
  p.type = RopeType::kLinear;
  p.factor = 3.5;
  out.push_back({"linear", p});
  p.type = RopeType::kNtk;
  out.push_back({"ntk", p});
  p.type = RopeType::kDynamic;
  p.max_position_embeddings = 16;
  out.push_back({"dynamic", p});
  RopeParams yarn = posenc::testing::yarn_params(4.0, 16);
  yarn.beta_fast = 16.0;
  yarn.beta_slow = 2.0;
  yarn.mscale = 0.707;
  yarn.mscale_all_dim = 0.5;
  yarn.truncate = false;
  out.push_back({"yarn", yarn});
  yarn.attention_factor = 1.3;
  out.push_back({"yarn-attention-factor", yarn});
  RopeParams parts = yarn;
  parts.type = RopeType::kNtkByParts;
  parts.attention_factor.reset();
  parts.mscale.reset();
  parts.mscale_all_dim.reset();
  out.push_back({"ntk_by_parts", parts});
  RopeParams llama3 = posenc::testing::llama3_params(8.0, 1.0, 4.0, 16);
  llama3.theta = 500000;
  out.push_back({"llama3", llama3});
  RopeParams longrope = posenc::testing::longrope_params(64, 16, {1.0, 1.25, 1.5, 1.75}, {1.0, 2.0, 4.0, 8.0});
  out.push_back({"longrope", longrope});
  RopeParams partial;
  partial.partial_rotary_factor = 0.5;
  partial.llama_4_scaling_beta = 0.1;
  out.push_back({"partial", partial});
  RopeParams proportional;
  proportional.type = RopeType::kProportional;
  proportional.partial_rotary_factor = 0.5;
  proportional.factor = 2.0;
  out.push_back({"proportional", proportional});
  return out;
}

std::vector<std::pair<std::string, ModelConfig>> model_cases() {
  std::vector<std::pair<std::string, ModelConfig>> out;
  for (const auto& [name, rope] : rope_cases()) {
    ModelConfig c = small(Scheme::kRope);
    c.rope = rope;
    out.push_back({"rope-" + name, c});
  }
  for (Scheme s : {Scheme::kNope, Scheme::kSinusoidal, Scheme::kLearned, Scheme::kAlibi, Scheme::kT5, Scheme::kXl,
                   Scheme::kDeberta, Scheme::kDpb, Scheme::kShaw, Scheme::kFire, Scheme::kCope, Scheme::kXpos,
                   Scheme::kRopeLearned, Scheme::kPope})
    out.push_back({to_string(s), small(s)});
  ModelConfig shaw = small(Scheme::kShaw);  // its tables' shape follows shaw_max_relative
  shaw.shaw_max_relative = 5;
  out.push_back({"shaw-max-relative-5", shaw});
  ModelConfig t5 = small(Scheme::kT5);  // causal, yet bidirectional buckets: kept as set
  t5.t5 = {16, 64, true};
  out.push_back({"t5-causal-bidirectional-buckets", t5});
  ModelConfig encoder = small(Scheme::kAlibi);
  encoder.causal = false;
  encoder.embed_scale = true;
  out.push_back({"alibi-encoder", encoder});
  ModelConfig xl = small(Scheme::kXl);
  xl.xl_mem_len = 12;
  xl.xl_clamp_len = 20;
  out.push_back({"xl-memory", xl});
  for (Fusion f : {Fusion::kConcat, Fusion::kMultiply}) {
    ModelConfig c = small(Scheme::kSinusoidal);
    c.fusion = f;
    c.pe_dim = 8;
    out.push_back({std::string("sinusoidal-") + to_string(f), c});
  }
  return out;
}

TEST(TorchSerialize, EveryRopeTypeAndSchemeRoundTripsWithBitIdenticalLogits) {
  for (const auto& [name, config] : model_cases()) {
    SCOPED_TRACE(name);
    TransformerLM model = testing::eval_model(config, 9);
    const std::string path = ::testing::TempDir() + "posenc_roundtrip_" + name + ".pt";
    save_model(model, path);
    TransformerLM loaded = load_model(path);
    std::remove(path.c_str());
    loaded->eval();
    expect_same(model->config(), loaded->config());
    torch::NoGradGuard no_grad;
    const torch::Tensor tokens = torch::randint(0, 40, {2, 24}, torch::kInt64);  // past the dynamic/longrope switch
    EXPECT_TRUE(torch::equal(model->forward(tokens), loaded->forward(tokens)));
  }
}

TEST(TorchSerialize, RopeParamsJsonRoundTripsEveryField) {
  for (const auto& [name, p] : rope_cases()) {
    SCOPED_TRACE(name);
    expect_same(p, rope_params_from_json(rope_params_to_json(p)));
  }
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    config_from_json(text);
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TorchSerialize, UnknownNamesAndKeysAreErrors) {
  const std::string good = config_to_json(small(Scheme::kSinusoidal));
  expect_error(replaced(good, "\"fusion\":\"add\"", "\"fusion\":\"addd\""), "fusion must be one of add|concat|multiply, got 'addd'");
  expect_error(replaced(good, "\"scheme\":\"sinusoidal\"", "\"scheme\":\"sinusoidall\""), "scheme must be one of nope|sinusoidal|learned|rope|mrope|alibi|t5|xl|deberta|kerple|sandwich|fox|dpb|shaw|fire|cope|xpos|rope-learned|pope, got 'sinusoidall'");
  expect_error(replaced(good, "\"d_ff\"", "\"d_fff\""), "d_ff");
  expect_error(replaced(good, "\"beta_fast\"", "\"beta_fastt\""), "rope.beta_fastt");
  expect_error(replaced(good, "\"rope_type\":\"default\"", "\"rope_type\":\"yarnn\""), "unknown rope type 'yarnn'");
  expect_error(replaced(good, "\"version\":7", "\"version\":8"), "version 8");
  expect_error(replaced(good, "\"bidirectional\":false", "\"bidirectional\":0"), "t5.bidirectional");
}

// The "use: ..." lists of errors come from Scheme's names: a new scheme appears by itself.
TEST(TorchSerialize, SchemeListsNameEverySchemeATextModelTakes) {
  EXPECT_EQ(language_model_scheme_names(),
            "nope, sinusoidal, learned, rope, alibi, t5, xl, deberta, kerple, sandwich, fox, dpb, shaw, fire, cope, xpos, rope-learned, pope");
  EXPECT_EQ(language_model_scheme_names({Scheme::kXl}),
            "nope, sinusoidal, learned, rope, alibi, t5, deberta, kerple, sandwich, fox, dpb, shaw, fire, cope, xpos, rope-learned, pope");
  try {
    language_model_scheme("mrope", "--schemes");
    ADD_FAILURE() << "mrope taken as a text model's scheme";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--schemes: 'mrope' is not a language-model scheme; use: nope, sinusoidal,"),
              std::string::npos) << e.what();
  }
}

TEST(TorchSerialize, VersionOneFilesStillLoad) {
  // What posenc wrote before the version key (a lab model of that time).
  const std::string v1 =
      R"({"vocab_size":40,"d_model":32,"n_layers":2,"n_heads":4,"n_kv_heads":0,"d_ff":0,"dropout":0.0,)"
      R"("causal":true,"embed_scale":false,"scheme":"rope","fusion":"add","pe_dim":0,"learned_positions":1024,)"
      R"("rope_type":"linear","rope_theta":10000.0,"rope_factor":4.0,"t5_num_buckets":32,"t5_max_distance":128,)"
      R"("deberta_buckets":64,"deberta_max_relative":256,"xl_clamp_len":0})";
  const ModelConfig c = config_from_json(v1);
  EXPECT_EQ(c.rope.type, RopeType::kLinear);
  EXPECT_EQ(c.rope.factor, 4.0);
  EXPECT_FALSE(c.t5.bidirectional);
  expect_error(replaced(v1, "\"fusion\":\"add\"", "\"fusion\":\"sum\""), "fusion must be one of add|concat|multiply, got 'sum'");
}

TEST(TorchSerialize, VersionTwoFilesLoadWithTheSinusoidalBaseTheyHad) {
  ModelConfig wanted = small(Scheme::kSinusoidal);
  std::string v2 = replaced(config_to_json(wanted), "\"version\":7", "\"version\":2");
  v2 = replaced(v2, ",\"xpos_scale_base\":512.0", "");  // version 2 had none of these keys (xpos_scale_base: 7)
  v2 = replaced(v2, "\"cope_max_pos\":64,", "");       // (cope_max_pos: 6)
  v2 = replaced(v2, "\"sinusoidal_base\":10000.0,", "");  // version 2 had no such key: its base was 10000
  v2 = replaced(v2, "\"raw_index\":false,", "");        // nor this one (version 4)
  v2 = replaced(v2, "\"shaw_max_relative\":16,", "");   // nor this one (version 5)
  EXPECT_EQ(config_to_json(config_from_json(v2)), config_to_json(wanted));
  // In version 2 the key is unknown; in 3 a base <= 1 is refused.
  const std::string v7 = config_to_json(wanted);
  // In version 6 xpos_scale_base is unknown: a version-6 file is read with xPos's default, 512.
  expect_error(replaced(v7, "\"version\":7", "\"version\":6"), "xpos_scale_base");
  const std::string v6 = replaced(replaced(v7, "\"version\":7", "\"version\":6"), ",\"xpos_scale_base\":512.0", "");
  EXPECT_EQ(config_from_json(v6).xpos_scale_base, 512);
  const std::string v5 = replaced(replaced(v6, "\"version\":6", "\"version\":5"), "\"cope_max_pos\":64,", "");
  // In version 5 cope_max_pos is unknown: a version-5 file is read with CoPE's default, 64.
  expect_error(replaced(v6, "\"version\":6", "\"version\":5"), "cope_max_pos");
  EXPECT_EQ(config_from_json(v5).cope_max_pos, 64);
  const std::string v4 = replaced(replaced(v5, "\"version\":5", "\"version\":4"), "\"shaw_max_relative\":16,", "");
  expect_error(replaced(replaced(v4, "\"version\":4", "\"version\":2"), "\"raw_index\":false,", ""), "sinusoidal_base");
  // In version 3 raw_index is unknown: a version-3 file is read without it (false).
  expect_error(replaced(v4, "\"version\":4", "\"version\":3"), "raw_index");
  EXPECT_FALSE(config_from_json(replaced(replaced(v4, "\"version\":4", "\"version\":3"), "\"raw_index\":false,", "")).raw_index);
  // In version 4 shaw_max_relative is unknown: a version-4 file is read with Shaw's default, 16.
  expect_error(replaced(v5, "\"version\":5", "\"version\":4"), "shaw_max_relative");
  EXPECT_EQ(config_from_json(v4).shaw_max_relative, 16);
  wanted.sinusoidal_base = 100;
  const ModelConfig read = config_from_json(config_to_json(wanted));
  EXPECT_EQ(read.sinusoidal_base, 100);
  wanted.sinusoidal_base = 1;
  try {
    TransformerLM model(wanted);
    ADD_FAILURE() << "a sinusoidal base of 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sinusoidal_base must be a finite number > 1, got 1 ("), std::string::npos) << e.what();
  }
}

TEST(TorchSerialize, MropeIsRejectedByTheTextModel) {
  try {
    TransformerLM model(small(Scheme::kMrope));
    ADD_FAILURE() << "a text model accepted mrope";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(T, H, W)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc::torch_layer

namespace posenc::torch_layer {
namespace {

TEST(TorchSerialize, AFailedSaveIsAnErrorAndKeepsThePreviousFile) {
  TransformerLM model(small(Scheme::kRope));
  const std::string dir = ::testing::TempDir() + "posenc_readonly_dir";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.pt";
  save_model(model, path);
  const auto before = std::filesystem::file_size(path);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const bool root_ignores_permissions = ::access(dir.c_str(), W_OK) == 0;
  if (!root_ignores_permissions) {
    try {
      save_model(model, path);
      ADD_FAILURE() << "no error writing into a read-only directory";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    EXPECT_EQ(std::filesystem::file_size(path), before);
    for (const auto& e : std::filesystem::directory_iterator(dir)) EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  // A path whose directory does not exist: an Error naming it, never an abort.
  EXPECT_THROW(save_model(model, dir + "/missing/model.pt"), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace posenc::torch_layer
