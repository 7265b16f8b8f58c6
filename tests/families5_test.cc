// Issue 26, model families round three, last part: the legacy top-level keys publishers still
// ship (GPT-NeoX's rotary_pct / rotary_emb_base, StableLM-epoch's rope_pct), read where the family
// row says and ignored, with a warning, where HF's code for the family does not read them; the
// non-RoPE families that were misread (MPT's ALiBi, OPT's / BART's / RoBERTa's offset learned
// tables, UMT5's per-layer buckets), described as what they are. Each
// rule is checked against the schedule derived here in double, on the real configs in tests/data
// where one was found and on configs built in the test (from the published values) where none was.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/model_positions.h"
#include "posenc/model_spec.h"
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


// ---- models without RoPE (model_positions.cc) ---------------------------------------------------

ModelPositions positions(const std::string& name) {
  return parse_model_positions(testing::read_file(testing::reference_dir() + "/positions-configs/" + name + ".json"));
}

// MPT's slopes (HF build_mpt_alibi_tensor, bias max 8) against the paper's in double: the same
// values in the same head order, rounded once in float32 (within an ulp of the double).
TEST(Families5, MptSlopesAreThePapersInMptsFloat32) {
  for (int heads = 1; heads <= 64; ++heads) {
    const std::vector<double> want = alibi_slopes(heads);
    const std::vector<float> got = alibi_slopes_mpt_f32(heads);
    ASSERT_EQ(got.size(), want.size()) << heads;
    for (int h = 0; h < heads; ++h) EXPECT_NEAR(got[h], want[h], 0x1p-23 * want[h]) << heads << " " << h;
  }
  const ModelPositions m = positions("mpt-7b-instruct__constructed");
  ASSERT_EQ(m.stacks.size(), 1u);
  const PositionStack& s = m.stacks[0];
  EXPECT_EQ(s.scheme, PositionScheme::kAlibi);
  EXPECT_EQ(s.heads, 32);
  EXPECT_EQ(s.layers, 32);
  EXPECT_EQ(s.alibi_bias_scale, 1.0);  // MptAttention adds the bias after * softmax_scale
  for (int k = 1; k <= 32; ++k) EXPECT_DOUBLE_EQ(s.alibi_slopes[k - 1], std::exp2(-8.0 * k / 32)) << k;
  EXPECT_EQ(s.alibi_slopes_f32, alibi_slopes_mpt_f32(32));
  EXPECT_TRUE(has(s.facts, "at most 2048 tokens"));
  EXPECT_TRUE(m.notes.empty()) << m.notes.front();
}

// MptModel ignores attn_config: alibi false and alibi_bias_max 16 leave HF's slopes at bias max 8,
// and each is said in a note.
TEST(Families5, MptAttnConfigIsNotWhatHfReads) {
  json c = json::parse(testing::read_file(testing::reference_dir() + "/positions-configs/mpt-7b-instruct__constructed.json"));
  c["attn_config"]["alibi"] = false;
  c["attn_config"]["alibi_bias_max"] = 16;
  c["n_heads"] = 12;
  const ModelPositions m = parse_model_positions(c.dump());
  EXPECT_DOUBLE_EQ(m.stacks[0].alibi_slopes[8], std::exp2(-0.5));  // 12 heads: c = 8, then 2^(-4k/8), k odd
  EXPECT_TRUE(has(m.notes, "attn_config.alibi is false"));
  EXPECT_TRUE(has(m.notes, "attn_config.alibi_bias_max = 16 is ignored"));
}

// OPTLearnedPositionalEmbedding / BartLearnedPositionalEmbedding: max_position_embeddings + 2 rows,
// position p reads row p + 2. Checked on HF's own lookup (hf-golden.json learned_absolute: a table
// whose row r is [2r, 2r + 1]; positions 0..3 read [4, 5] .. [10, 11], position 3 of a decode step
// after 3 cached tokens reads [10, 11]).
TEST(Families5, OptAndBartReadRowPPlusTwo) {
  const json golden = json::parse(testing::read_file(testing::reference_dir() + "/hf-golden.json"))["learned_absolute"];
  const PositionStack opt = positions("opt-125m__constructed").stacks.at(0);
  EXPECT_EQ(opt.scheme, PositionScheme::kLearnedAbsolute);
  EXPECT_EQ(opt.rows, 2048);
  EXPECT_EQ(opt.width, 768);
  EXPECT_EQ(opt.layers, 12);
  EXPECT_EQ(opt.row_offset, 2);
  EXPECT_TRUE(has(opt.facts, "row p + 2 of a table of 2050 rows"));
  for (int p = 0; p < 4; ++p) {
    const json& row = golden["weight_rows_are_[2r,2r+1]"][p + opt.row_offset];
    EXPECT_EQ(golden["bart_seq4_past0"][0][p], row) << p;
  }
  EXPECT_EQ(golden["bart_seq1_past3"][0][0], golden["weight_rows_are_[2r,2r+1]"][3 + opt.row_offset]);
  const ModelPositions bart = positions("bart-large-mnli__constructed");
  ASSERT_EQ(bart.stacks.size(), 2u);
  for (const PositionStack& s : bart.stacks) {
    EXPECT_EQ(s.scheme, PositionScheme::kLearnedAbsolute);
    EXPECT_EQ(s.rows, 1024);
    EXPECT_EQ(s.width, 1024);
    EXPECT_EQ(s.row_offset, 2);
    EXPECT_EQ(s.layers, 12);
  }
  EXPECT_EQ(bart.stacks[1].stack, "decoder");
}

// RobertaEmbeddings: create_position_ids_from_input_ids gives the first token padding_idx + 1, so
// roberta-base's 514 rows serve 512 tokens; another pad id moves the offset with it.
TEST(Families5, RobertaPositionsStartPastThePaddingIndex) {
  const PositionStack s = positions("roberta-base__constructed").stacks.at(0);
  EXPECT_EQ(s.stack, "encoder");
  EXPECT_EQ(s.rows, 512);
  EXPECT_EQ(s.row_offset, 2);
  EXPECT_EQ(s.width, 768);
  const ModelPositions zero =
      parse_model_positions(json{{"model_type", "xlm-roberta"}, {"pad_token_id", 0}, {"max_position_embeddings", 514}}.dump());
  EXPECT_EQ(zero.stacks[0].rows, 513);
  EXPECT_EQ(zero.stacks[0].row_offset, 1);
  try {
    parse_model_positions(json{{"model_type", "roberta"}, {"max_position_embeddings", 2}}.dump());
    ADD_FAILURE() << "accepted a table with no row for a token";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings 2 leaves no row"), std::string::npos) << e.what();
  }
}

// UMT5Block: every self-attention layer owns a bias table (T5 shares layer 0's); the buckets
// are T5's (bidirectional encoder, causal decoder) and the scores are not scaled.
TEST(Families5, Umt5HasABiasTablePerLayer) {
  const ModelPositions m = positions("umt5-base__constructed");
  ASSERT_EQ(m.stacks.size(), 2u);
  EXPECT_TRUE(m.stacks[0].buckets.bidirectional);
  EXPECT_FALSE(m.stacks[1].buckets.bidirectional);
  for (const PositionStack& s : m.stacks) {
    EXPECT_EQ(s.scheme, PositionScheme::kT5Buckets);
    EXPECT_EQ(s.heads, 12);
    EXPECT_EQ(s.layers, 12);
    EXPECT_EQ(s.buckets.num_buckets, 32);
    EXPECT_EQ(s.buckets.max_distance, 128);
    EXPECT_TRUE(has(s.facts, "every self-attention layer owns its own"));
    EXPECT_NE(s.hf_source.find("modeling_umt5.py"), std::string::npos);
  }
  EXPECT_TRUE(has(positions("umt5-base__constructed").stacks[0].facts, "scale scores by 1"));
  EXPECT_EQ(parse_model_positions(json{{"model_type", "umt5"}}.dump()).stacks[0].heads, 6);  // UMT5Config's default
}

// ---- GLM-4.5V (glm4v_moe) ----------------------------------------------------------------------

// modeling_glm4v_moe.py (as glm4v): M-RoPE sections [8, 12, 12] over the rotated half only
// (partial_rotary_factor 0.5 of head_dim 128: 32 frequencies theta^(-2i/64)), applied in GPT-J
// pairs (cos[..., :d/2].repeat_interleave(2)) on channels 0..63, the rest passed through; every one
// of the 46 text layers alike (full attention, no sliding window).
TEST(Families5, Glm45vMropeOverTheRotatedHalfOnEveryLayer) {
  const ModelSpec spec = load_model_spec(testing::reference_dir() + "/configs-extra/GLM-4.5V__constructed.json");
  EXPECT_EQ(spec.mrope_section, (std::vector<int>{8, 12, 12}));
  EXPECT_EQ(spec.mrope_style, MropeStyle::kContiguous);
  ASSERT_EQ(spec.layers.size(), 46u);
  for (const LayerSpec& l : spec.layers) {
    SCOPED_TRACE(l.index);
    EXPECT_TRUE(l.rope);
    EXPECT_EQ(l.layout, RopeLayout::kInterleaved);
    EXPECT_EQ(l.head_dim, 128);
    EXPECT_EQ(l.rotary_dim, 64);
    EXPECT_EQ(l.rotated_channels, (std::vector<std::array<int, 2>>{{0, 64}}));
    EXPECT_EQ(l.softmax_scale, 1 / std::sqrt(128.0));
    EXPECT_EQ(l.schedule, spec.layers.front().schedule);
  }
  const RopeSchedule& s = spec.schedules.at(spec.layers.front().schedule);
  expect_default_schedule(s, 1e4, 64);
}

// ---- Falcon-H1 (falcon_h1) ---------------------------------------------------------------------

// modeling_falcon_h1.py: every layer runs Mamba2 and attention side by side, so every layer
// rotates (full head, rotate_half, theta 1e11); the keys are multiplied by key_multiplier before
// q.k, so the logits' scale is head_dim^-0.5 * key_multiplier = 0.390625 / 8.
TEST(Families5, FalconH1EveryLayerRotatesWithKeysScaled) {
  const ModelSpec spec = load_model_spec(testing::reference_dir() + "/configs-extra/Falcon-H1-0.5B__constructed.json");
  ASSERT_EQ(spec.layers.size(), 36u);
  for (const LayerSpec& l : spec.layers) {
    SCOPED_TRACE(l.index);
    EXPECT_TRUE(l.rope);
    EXPECT_EQ(l.layout, RopeLayout::kHalfSplit);
    EXPECT_EQ(l.rotated_channels, (std::vector<std::array<int, 2>>{{0, 64}}));
    EXPECT_DOUBLE_EQ(l.softmax_scale, 0.39062499999999994 / 8);
  }
  expect_default_schedule(spec.schedules.at(spec.layers.front().schedule), 1e11, 64);
  json c = json::parse(testing::read_file(testing::reference_dir() + "/configs-extra/Falcon-H1-0.5B__constructed.json"));
  c.erase("key_multiplier");  // FalconH1Config's default 1.0
  EXPECT_DOUBLE_EQ(parse_model_spec(c.dump()).layers.at(0).softmax_scale, 1.0 / 8);
}

// ---- Zamba2 (zamba2) ---------------------------------------------------------------------------

// modeling_zamba2.py: the shared attention runs at the "hybrid" entries of layers_block_type, over
// heads of attention_head_dim = 2 * hidden_size / heads = 224 channels, scaled by (224 / 2)^-0.5,
// rotated (full head, rotate_half) only with use_mem_rope; the Mamba2 layers have no positions.
TEST(Families5, Zamba2SharedAttentionAtItsHybridLayers) {
  const std::string path = testing::reference_dir() + "/configs-extra/Zamba2-7B__constructed.json";
  const ModelSpec spec = load_model_spec(path);
  ASSERT_EQ(spec.layers.size(), 81u);
  std::vector<int> hybrid;
  for (const LayerSpec& l : spec.layers) {
    SCOPED_TRACE(l.index);
    if (l.layer_type != "hybrid") {
      EXPECT_EQ(l.layer_type, "mamba");
      EXPECT_FALSE(l.rope);
      EXPECT_EQ(l.attention, AttentionKind::kNone);
      continue;
    }
    hybrid.push_back(l.index);
    EXPECT_TRUE(l.rope);
    EXPECT_EQ(l.attention, AttentionKind::kFull);
    EXPECT_EQ(l.head_dim, 224);
    EXPECT_EQ(l.rotated_channels, (std::vector<std::array<int, 2>>{{0, 224}}));
    EXPECT_DOUBLE_EQ(l.softmax_scale, 1 / std::sqrt(112.0));
    expect_default_schedule(spec.schedules.at(l.schedule), 1e4, 224);
  }
  EXPECT_EQ(hybrid, (std::vector<int>{6, 11, 17, 23, 29, 35, 41, 47, 53, 59, 65, 71, 77}));
  // Zamba2Config's default use_mem_rope is false: no layer rotates.
  json c = json::parse(testing::read_file(path));
  c.erase("use_mem_rope");
  for (const LayerSpec& l : parse_model_spec(c.dump()).layers) EXPECT_FALSE(l.rope) << l.index;
}

// Without layers_block_type, Zamba2Config.__post_init__'s fixed list of 54 entries (hybrid at 6,
// 12, ..., 42, 47, 51); another layer count has no default and is refused naming both.
TEST(Families5, Zamba2DefaultLayerList) {
  json c = json::parse(testing::read_file(testing::reference_dir() + "/configs-extra/Zamba2-7B__constructed.json"));
  c.erase("layers_block_type");
  c["num_hidden_layers"] = 54;
  std::vector<int> hybrid;
  for (const LayerSpec& l : parse_model_spec(c.dump()).layers)
    if (l.layer_type == "hybrid") hybrid.push_back(l.index);
  EXPECT_EQ(hybrid, (std::vector<int>{6, 12, 18, 24, 30, 36, 42, 47, 51}));
  c["num_hidden_layers"] = 81;
  try {
    parse_model_spec(c.dump());
    ADD_FAILURE() << "accepted 81 layers without layers_block_type";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_hidden_layers is 81 without layers_block_type"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc
