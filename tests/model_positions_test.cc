// posenc::parse_model_positions (issue 32): models without RoPE read as what they are -- BERT's
// learned table, BLOOM's and Falcon's ALiBi slopes, T5's buckets, Whisper's two tables -- and
// the RoPE readers (hf_config, so freqs and golden) refuse them naming the scheme.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "golden.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/hf_config.h"
#include "posenc/model_positions.h"
#include "posenc/model_spec.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::read_file;
using testing::reference_dir;

std::string config_text(const std::string& name) {
  return read_file(reference_dir() + "/positions-configs/" + name + ".json");
}
ModelPositions positions(const std::string& name) { return parse_model_positions(config_text(name)); }

// The refusal names the value and what was expected (project standard): `part` in the message.
void expect_refused(const json& config, const std::string& part) {
  try {
    parse_model_positions(config.dump());
    ADD_FAILURE() << "accepted " << config.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ModelPositions, BertIsALearnedTableOfMaxPositionEmbeddingsRows) {
  const ModelPositions m = positions("bert-base-uncased");
  ASSERT_EQ(m.stacks.size(), 1u);
  EXPECT_FALSE(m.is_rope());
  EXPECT_EQ(m.stacks[0].scheme, PositionScheme::kLearnedAbsolute);
  EXPECT_EQ(m.stacks[0].rows, 512);
  EXPECT_EQ(m.stacks[0].width, 768);
  EXPECT_EQ(m.stacks[0].layers, 12);
  EXPECT_NE(m.stacks[0].hf_source.find("BertEmbeddings"), std::string::npos);
  EXPECT_TRUE(m.notes.empty());
}

TEST(ModelPositions, Gpt2IsALearnedTableOfNPositionsRows) {
  // GPT2Config: n_positions (max_position_embeddings in its attribute_map), n_embd, n_layer.
  const ModelPositions m = parse_model_positions(json{{"model_type", "gpt2"}, {"n_positions", 1024}, {"n_embd", 768},
                                                      {"n_layer", 12}}.dump());
  ASSERT_EQ(m.stacks.size(), 1u);
  EXPECT_EQ(m.stacks[0].scheme, PositionScheme::kLearnedAbsolute);
  EXPECT_EQ(m.stacks[0].rows, 1024);
  EXPECT_EQ(m.stacks[0].width, 768);
  EXPECT_EQ(m.stacks[0].layers, 12);
  const ModelPositions alias = parse_model_positions(json{{"model_type", "gpt2"}, {"max_position_embeddings", 2048}}.dump());
  EXPECT_EQ(alias.stacks[0].rows, 2048);
  EXPECT_EQ(alias.notes.size(), 1u);  // n_embd absent: GPT2Config's 768, said in a note
}

TEST(ModelPositions, BloomAndFalconWithAlibiHaveThePapersSlopesForTheirHeads) {
  // build_alibi_tensor: H a power of two gets 2^(-8k/H), k = 1..H.
  for (const auto& [name, heads] : {std::pair{"bloom-560m__constructed", 16}, std::pair{"falcon-rw-1b__constructed", 32}}) {
    SCOPED_TRACE(name);
    const ModelPositions m = positions(name);
    ASSERT_EQ(m.stacks.size(), 1u);
    const PositionStack& s = m.stacks[0];
    EXPECT_EQ(s.scheme, PositionScheme::kAlibi);
    EXPECT_EQ(s.heads, heads);
    EXPECT_EQ(s.layers, 24);
    ASSERT_EQ(s.alibi_slopes.size(), static_cast<std::size_t>(heads));
    for (int k = 1; k <= heads; ++k) EXPECT_DOUBLE_EQ(s.alibi_slopes[k - 1], std::exp2(-8.0 * k / heads)) << k;
    EXPECT_EQ(s.alibi_slopes_f32, alibi_slopes_bloom_f32(heads));
  }
  // BLOOM adds the bias to the scaled q.k; Falcon scales both by 1/sqrt(head_dim), 2048 / 32 = 64.
  EXPECT_EQ(positions("bloom-560m__constructed").stacks[0].alibi_bias_scale, 1.0);
  EXPECT_EQ(positions("falcon-rw-1b__constructed").stacks[0].alibi_bias_scale, 0.125);
  // Not a power of two: the odd terms of the 2c sequence follow (12 heads: c = 8, then 2^(-4k/8), k = 1, 3, 5, 7).
  const ModelPositions twelve = parse_model_positions(json{{"model_type", "bloom"}, {"n_head", 12}}.dump());
  EXPECT_DOUBLE_EQ(twelve.stacks[0].alibi_slopes[8], std::exp2(-0.5));
  EXPECT_DOUBLE_EQ(twelve.stacks[0].alibi_slopes[11], std::exp2(-3.5));
}

TEST(ModelPositions, FalconWithoutAlibiIsRope) {
  const ModelPositions m = parse_model_positions(json{{"model_type", "falcon"}, {"alibi", false}}.dump());
  EXPECT_TRUE(m.is_rope());
  EXPECT_TRUE(parse_model_positions(json{{"model_type", "falcon"}}.dump()).is_rope());  // FalconConfig: alibi False
}

TEST(ModelPositions, T5HasBidirectionalEncoderAndCausalDecoderBuckets) {
  const ModelPositions m = positions("t5-small");
  ASSERT_EQ(m.stacks.size(), 2u);
  EXPECT_EQ(m.stacks[0].stack, "encoder");
  EXPECT_TRUE(m.stacks[0].buckets.bidirectional);
  EXPECT_EQ(m.stacks[1].stack, "decoder");
  EXPECT_FALSE(m.stacks[1].buckets.bidirectional);
  for (const PositionStack& s : m.stacks) {
    EXPECT_EQ(s.scheme, PositionScheme::kT5Buckets);
    EXPECT_EQ(s.buckets.num_buckets, 32);
    EXPECT_EQ(s.buckets.max_distance, 128);
    EXPECT_EQ(s.heads, 8);
    EXPECT_EQ(s.layers, 6);
  }
  // Absent keys take T5Config's defaults, each said in a note.
  const ModelPositions bare = parse_model_positions(json{{"model_type", "t5"}, {"is_encoder_decoder", false}}.dump());
  ASSERT_EQ(bare.stacks.size(), 1u);  // an encoder-only T5 (T5EncoderModel's config)
  EXPECT_EQ(bare.stacks[0].buckets.num_buckets, 32);
  EXPECT_EQ(bare.notes.size(), 3u);
}

TEST(ModelPositions, WhisperHasASinusoidalEncoderAndALearnedDecoder) {
  const ModelPositions m = positions("whisper-tiny__constructed");
  ASSERT_EQ(m.stacks.size(), 2u);
  EXPECT_EQ(m.stacks[0].scheme, PositionScheme::kSinusoidal);
  EXPECT_EQ(m.stacks[0].rows, 1500);
  EXPECT_EQ(m.stacks[0].sinusoidal.freqs, SinusoidalFreqs::kFairseq);  // exp(-k ln(1e4) / (d/2 - 1))
  EXPECT_EQ(m.stacks[0].sinusoidal.layout, SinusoidalLayout::kHalves);
  EXPECT_EQ(m.stacks[1].scheme, PositionScheme::kLearnedAbsolute);
  EXPECT_EQ(m.stacks[1].rows, 448);
  EXPECT_EQ(m.stacks[1].width, 384);
}

TEST(ModelPositions, RopeModelsStayRope) {
  const ModelPositions m = parse_model_positions(read_file(reference_dir() + "/real-configs/Qwen3-8B.json"));
  EXPECT_TRUE(m.is_rope());
  EXPECT_EQ(parse_model_spec(read_file(reference_dir() + "/real-configs/Qwen3-8B.json")).layers.size(), 36u);
}

TEST(ModelPositions, BadKeysAreRefusedNamingTheKeyAndTheValue) {
  expect_refused({{"model_type", "bert"}, {"position_embedding_type", "relative_key"}}, "'relative_key'");
  expect_refused({{"model_type", "bloom"}, {"n_head", 0}}, "n_head");
  expect_refused({{"model_type", "bloom"}, {"n_head", 16}, {"num_attention_heads", 8}}, "disagree");
  expect_refused({{"model_type", "t5"}, {"relative_attention_num_buckets", 2}}, "relative_attention_num_buckets 2");
  expect_refused({{"model_type", "t5"}, {"relative_attention_max_distance", 4}}, "max_distance");
  expect_refused({{"model_type", "whisper"}, {"d_model", 383}}, "d_model is 383");
  expect_refused({{"model_type", "gpt2"}, {"n_positions", -1}}, "n_positions");
  expect_refused({{"model_type", "falcon"}, {"alibi", true}, {"num_attention_heads", 3}, {"hidden_size", 64}},
                 "not a multiple");
}

TEST(ModelPositions, RopeReadersRefuseNamingTheSchemeAndPointingAtSpec) {
  for (const char* name : {"bert-base-uncased", "t5-small", "bloom-560m__constructed", "falcon-rw-1b__constructed",
                           "whisper-tiny__constructed"}) {
    SCOPED_TRACE(name);
    try {
      parse_hf_config(config_text(name));
      ADD_FAILURE() << "read as RoPE";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("no rotary embedding"), std::string::npos) << what;
      EXPECT_NE(what.find(positions(name).summary()), std::string::npos) << what;
      EXPECT_NE(what.find("posenc spec"), std::string::npos) << what;
    }
    const ModelSpec spec = parse_model_spec(config_text(name));  // spec describes it instead
    EXPECT_FALSE(spec.positions.is_rope());
    EXPECT_TRUE(spec.layers.empty() && spec.schedules.empty());
    try {  // golden vectors are RoPE's
      make_golden(spec, {});
      ADD_FAILURE() << "golden made for a model without RoPE";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no rotary embedding"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace posenc
