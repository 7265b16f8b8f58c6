// Issue 26, model families round three, second half: Gemma 3n and 4, Qwen-1's dynamic NTK and
// logN, the ALiBi / T5 / Whisper configs. Each rule is checked against values derived here
// independently (the formula in double, or the layer indices HF's code gives), on the real
// configs in tests/data where one was found and on `__constructed` ones where none was.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "posenc/error.h"
#include "posenc/golden.h"
#include "posenc/hf_config.h"
#include "posenc/model_spec.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

using nlohmann::json;

std::string real(const std::string& name) { return testing::reference_dir() + "/real-configs/" + name + ".json"; }
std::string extra(const std::string& name) { return testing::reference_dir() + "/configs-extra/" + name + ".json"; }
json read_json(const std::string& path) { return json::parse(testing::read_file(path)); }

// RU _compute_proportional_rope_parameters over Gemma 4's full layers: head_dim = global_head_dim
// 512, ra = int(0.25 * 512 // 2) = 64 angles theta^(-2i/512), then 192 zeros.
TEST(Families4, Gemma4FullLayersRotateTwoBlocksOfTheGlobalHead) {
  const ModelSpec spec = load_model_spec(real("gemma-4-31B-it"));
  ASSERT_EQ(spec.layers.size(), 60u);
  for (const LayerSpec& l : spec.layers) {
    SCOPED_TRACE(l.index);
    EXPECT_EQ(l.layer_type, (l.index + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
    EXPECT_EQ(l.softmax_scale, 1.0);  // Gemma4TextAttention: self.scaling = 1.0
    EXPECT_FALSE(l.kv_shared_from);   // num_kv_shared_layers 0
    if (l.layer_type == "sliding_attention") {
      EXPECT_EQ(l.head_dim, 256);
      EXPECT_EQ(l.rotated_channels, (std::vector<std::array<int, 2>>{{0, 256}}));
      EXPECT_EQ(l.window, 1024);
      continue;
    }
    EXPECT_EQ(l.head_dim, 512);
    EXPECT_EQ(l.rotary_dim, 512);
    EXPECT_EQ(l.rotated_channels, (std::vector<std::array<int, 2>>{{0, 64}, {256, 320}}));
    const RopeSchedule& s = spec.schedules.at(l.schedule);
    ASSERT_EQ(s.inv_freq.size(), 256u);
    for (int i = 0; i < 256; ++i) {
      const double want = i < 64 ? std::pow(1e6, -2.0 * i / 512) : 0.0;
      EXPECT_NEAR(s.inv_freq[i], want, 1e-6 * want) << i;
    }
  }
}

// golden writes vectors that rotate exactly [0, 64) and [256, 320) of a full layer: rotate_half
// over 512 channels, recomputed here in double from q and the angle p * theta^(-2j/512).
TEST(Families4, Gemma4GoldenRotatesExactlyTheProportionalChannels) {
  const ModelSpec spec = load_model_spec(real("gemma-4-31B-it"));
  const std::vector<std::int64_t> positions = {0, 1, 127, 4095};
  const Golden g = make_golden(spec, GoldenParams{positions, 7});
  const F32Tensor *q = nullptr, *q_out = nullptr;
  for (const F32Tensor& t : g.tensors.tensors) {
    if (t.name == "full_attention.q") q = &t;
    if (t.name == "full_attention.q_out") q_out = &t;
  }
  ASSERT_TRUE(q && q_out);
  ASSERT_EQ(q->shape, (std::vector<std::int64_t>{4, 512}));
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const float* in = &q->data[r * 512];
    const float* out = &q_out->data[r * 512];
    for (int c = 0; c < 512; ++c) {
      const int j = c % 256;
      if (j >= 64) {
        EXPECT_EQ(out[c], in[c]) << "channel " << c << " must pass through";
        continue;
      }
      const double a = static_cast<double>(positions[r]) * std::pow(1e6, -2.0 * j / 512);
      const double want = c < 256 ? in[c] * std::cos(a) - in[c + 256] * std::sin(a)
                                  : in[c] * std::cos(a) + in[c - 256] * std::sin(a);
      EXPECT_NEAR(out[c], want, 2e-3) << "row " << r << " channel " << c;  // float32 angles at p 4095
    }
  }
  const json manifest = json::parse(g.manifest_json);
  for (const json& e : manifest.at("layer_types"))
    if (e.at("layer_type") == "full_attention")
      EXPECT_EQ(e.at("rotated_channels"), json::parse("[[0, 64], [256, 320]]"));
}

// The last num_kv_shared_layers layers read the last earlier layer of their type
// (Gemma4TextAttention.kv_shared_layer_index = len(prev) - 1 - prev[::-1].index(type)).
TEST(Families4, KvSharedLayersReadTheLastEarlierLayerOfTheirType) {
  struct Case { const char* config; int layers, shared, sliding_from, full_from; };
  for (const Case& c : {Case{"gemma-4-E2B__constructed", 35, 20, 13, 14}, Case{"gemma-3n-E2B__constructed", 30, 10, 18, 19}}) {
    SCOPED_TRACE(c.config);
    const ModelSpec spec = load_model_spec(extra(c.config));
    ASSERT_EQ(spec.layers.size(), static_cast<std::size_t>(c.layers));
    for (const LayerSpec& l : spec.layers) {
      if (l.index < c.layers - c.shared) {
        EXPECT_FALSE(l.kv_shared_from) << l.index;
        continue;
      }
      // Recomputed from the list, as HF does.
      int from = c.layers - c.shared - 1;
      while (spec.layers[from].layer_type != l.layer_type) --from;
      EXPECT_EQ(l.kv_shared_from, from) << l.index;
      EXPECT_EQ(from, l.layer_type == "full_attention" ? c.full_from : c.sliding_from);
    }
  }
  json j = read_json(extra("gemma-4-E2B__constructed"));
  j["text_config"]["num_kv_shared_layers"] = 35;  // every layer shared: no earlier layer to read
  EXPECT_THROW(parse_model_spec(j.dump()), Error);
  j["text_config"]["num_kv_shared_layers"] = 34;  // layer 0 is sliding; no full layer before 1
  EXPECT_THROW(parse_model_spec(j.dump()), Error);
}

// Gemma 3n (legacy layout): sliding layers at rope_local_base_freq, full at rope_theta, scale 1.
TEST(Families4, Gemma3nSlidingLayersUseTheLocalBase) {
  const ModelRope m = load_hf_config(extra("gemma-3n-E2B__constructed"));
  EXPECT_EQ(m.select("sliding_attention").params.theta, 1e4);
  EXPECT_EQ(m.select("full_attention").params.theta, 1e6);
  EXPECT_EQ(m.select().params.head_dim, 256);  // no global_head_dim in Gemma 3n
  const ModelSpec spec = load_model_spec(extra("gemma-3n-E2B__constructed"));
  EXPECT_EQ(spec.layers.at(4).softmax_scale, 1.0);  // query_pre_attn_scalar 256 is not read
  EXPECT_EQ(spec.layers.at(0).window, 512);
}

// Gemma4TextConfig.__post_init__: without layer_types every 6th layer is full and the last is
// forced full; without rope_parameters the per-type defaults; global_head_dim defaults to 512.
TEST(Families4, Gemma4ConfigDefaults) {
  json t = {{"model_type", "gemma4_text"}, {"head_dim", 256}, {"num_hidden_layers", 8}, {"num_attention_heads", 8},
            {"hidden_size", 2048}};
  const ModelSpec spec = parse_model_spec(t.dump());
  for (const LayerSpec& l : spec.layers)
    EXPECT_EQ(l.layer_type, l.index == 5 || l.index == 7 ? "full_attention" : "sliding_attention") << l.index;
  EXPECT_EQ(spec.layers.at(7).head_dim, 512);
  EXPECT_EQ(spec.layers.at(7).rotated_channels, (std::vector<std::array<int, 2>>{{0, 64}, {256, 320}}));
  EXPECT_EQ(spec.layers.at(0).window, 512);
  EXPECT_EQ(spec.schedules.at(spec.layers.at(0).schedule).base, 1e4);
  t["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"};
  EXPECT_EQ(parse_model_spec(t.dump()).layers.at(7).layer_type, "full_attention");  // forced, as HF
  t["global_head_dim"] = 0;
  EXPECT_THROW(parse_model_spec(t.dump()), Error);
}


// Qwen-1 (remote modeling_qwen.py): QWenAttention's logn_list[p] = log(p + 1, seq_length) past
// seq_length, on the query at cache index p; golden writes the same scales.
TEST(Families4, QwenLogNQueryScalePastSeqLength) {
  const ModelSpec spec = load_model_spec(real("Qwen-1_8B"));
  const QueryScaling& q = spec.layers.at(0).query_scale;
  EXPECT_EQ(q.rule, QueryScale::kQwenLogN);
  EXPECT_EQ(q.at(0), 1.0);
  EXPECT_EQ(q.at(8191), 1.0);  // p + 1 = 8192 is not > seq_length
  EXPECT_DOUBLE_EQ(q.at(8192), std::log(8193.0) / std::log(8192.0));
  EXPECT_DOUBLE_EQ(q.at(16383), 14.0 / 13.0);  // log_8192(16384) = 14 / 13
  const Golden g = make_golden(spec, GoldenParams{{0, 8191, 8192, 16383}, 0});
  const json entry = json::parse(g.manifest_json).at("layer_types").at(0);
  EXPECT_EQ(entry.at("query_scale_rule"), "qwen_logn_attn");
  EXPECT_NEAR(entry.at("query_scales")[3].get<double>(), 14.0 / 13.0, 1e-15);
  json c = read_json(real("Qwen-1_8B"));
  c["use_logn_attn"] = false;
  EXPECT_EQ(parse_model_spec(c.dump()).layers.at(0).query_scale.rule, QueryScale::kNone);
}

// QWenModel.forward with use_dynamic_ntk: a prefill of L tokens takes get_ntk_alpha(L) =
// max(2^ceil(log2(L / S) + 1) - 1, 1) and base = theta * alpha^(d/(d-2)), S = seq_length 8192.
TEST(Families4, QwenDynamicNtkAlphaIsFixedAtPrefill) {
  const ModelRope m = load_hf_config(real("Qwen-1_8B"));
  const LayerRope& l = m.select();
  ASSERT_EQ(l.ntk_prefill_length, 8192);
  struct Case { std::int64_t L; double alpha; };
  for (const Case& c : {Case{1, 1}, Case{4096, 1}, Case{8192, 1}, Case{8193, 3}, Case{16384, 3}, Case{16385, 7},
                        Case{131072, 31}, Case{131073, 63}}) {
    SCOPED_TRACE(c.L);
    EXPECT_EQ(qwen_ntk_alpha(c.L, 8192), c.alpha);
    const RopeSchedule s = compute_schedule(prefill_params(l, c.L), c.L);
    const double base = 1e4 * std::pow(c.alpha, 128.0 / 126.0);
    for (int i = 0; i < 64; ++i) {
      const double want = 1 / std::pow(base, 2.0 * i / 128);
      EXPECT_NEAR(s.inv_freq[i], want, 1e-7 * want) << i;  // float32 storage
    }
  }
  // golden's default positions reach 131071: one prefill of 131072 tokens, alpha 31.
  const Golden g = make_golden(load_model_spec(real("Qwen-1_8B")), GoldenParams{});
  EXPECT_EQ(json::parse(g.manifest_json).at("layer_types").at(0).at("qwen_ntk_alpha"), 31.0);
  json c = read_json(real("Qwen-1_8B"));
  c["use_dynamic_ntk"] = false;
  EXPECT_FALSE(parse_hf_config(c.dump()).select().ntk_prefill_length);
  c["use_dynamic_ntk"] = true;
  c["seq_length"] = 2048;  // seq_length, not max_position_embeddings (8192), is Qwen's length
  EXPECT_EQ(parse_hf_config(c.dump()).select().ntk_prefill_length, 2048);
}

}  // namespace
}  // namespace posenc
