// The C ABI (posenc.h) against the C++ API it wraps, on every real config: the same schedule per
// layer type, the same per-layer facts as `posenc spec` reads them (ModelSpec), the same bits from
// rope_rotate and attention, and the C++ error text passed through unchanged.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "golden.h"
#include "posenc.h"
#include "posenc/attention.h"
#include "posenc/model_spec.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_runtime.h"

namespace posenc {
namespace {

using testing::read_file;
using testing::reference_dir;

std::vector<std::string> real_configs() {
  std::vector<std::string> names;
  DIR* dir = opendir((reference_dir() + "/real-configs").c_str());
  EXPECT_NE(dir, nullptr);
  while (dirent* e = dir ? readdir(dir) : nullptr) {
    const std::string file = e->d_name;
    if (file.size() > 5 && file.substr(file.size() - 5) == ".json" && file != "manifest.json" &&
        file != "keys-in-the-wild.json")
      names.push_back(reference_dir() + "/real-configs/" + file);
  }
  if (dir) closedir(dir);
  EXPECT_GT(names.size(), 30u);
  return names;
}

struct Handle {
  posenc_schedule* s = nullptr;
  ~Handle() { posenc_schedule_free(s); }
};

std::vector<float> inv_freq(const posenc_schedule* s) {
  std::int64_t n = 0;
  EXPECT_EQ(posenc_schedule_inv_freq(s, nullptr, 0, &n), POSENC_OK);
  std::vector<float> out(static_cast<std::size_t>(n));
  EXPECT_EQ(posenc_schedule_inv_freq(s, out.data(), n, &n), POSENC_OK) << posenc_last_error();
  return out;
}

posenc_layer_info layer_info(const posenc_schedule* s) {
  posenc_layer_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(posenc_schedule_layer(s, &info), POSENC_OK) << posenc_last_error();
  return info;
}

TEST(CApi, EveryRealConfigReadsAsTheCppApi) {
  for (const std::string& path : real_configs()) {
    SCOPED_TRACE(path);
    const std::string text = read_file(path);
    const ModelSpec spec = parse_model_spec(text);
    for (std::size_t t = 0; t < spec.rope.layers.size(); ++t) {  // by layer type
      const LayerRope& l = spec.rope.layers[t];
      if (!l.has_rope) continue;
      Handle h;
      ASSERT_EQ(posenc_schedule_from_config_type(text.data(), static_cast<std::int64_t>(text.size()), 0,
                                                 l.layer_type.c_str(), &h.s),
                POSENC_OK)
          << posenc_last_error();
      const RopeSchedule want = compute_schedule(l.params);
      EXPECT_EQ(inv_freq(h.s), want.inv_freq);
      double factor = 0;
      ASSERT_EQ(posenc_schedule_attention_factor(h.s, &factor), POSENC_OK);
      EXPECT_EQ(factor, want.attention_factor);
      std::int32_t rotary = 0;
      ASSERT_EQ(posenc_schedule_rotary_dim(h.s, &rotary), POSENC_OK);
      EXPECT_EQ(rotary, want.rotary_dim);
    }
    for (const LayerSpec& l : spec.layers) {  // by layer index: spec's facts
      Handle h;
      ASSERT_EQ(posenc_schedule_from_config(text.data(), static_cast<std::int64_t>(text.size()), 0, l.index, &h.s),
                POSENC_OK)
          << posenc_last_error();
      const posenc_layer_info i = layer_info(h.s);
      EXPECT_EQ(i.index, l.index);
      EXPECT_EQ(i.rope, l.rope ? 1 : 0);
      EXPECT_STREQ(i.pairing, pairing_name(l.layout));
      EXPECT_EQ(i.head_dim, l.head_dim);
      EXPECT_EQ(i.rotary_offset, l.rotary_offset);
      EXPECT_EQ(i.rotary_dim, l.rotary_dim);
      EXPECT_STREQ(i.attention_name, to_string(l.attention));
      EXPECT_EQ(i.window, l.window ? *l.window : -1);
      EXPECT_EQ(i.softmax_scale, l.softmax_scale);
      EXPECT_EQ(i.softmax_scale_multiplier, l.softmax_scale_multiplier);
      EXPECT_STREQ(i.qk_norm, to_string(l.qk_norm));
      EXPECT_STREQ(i.layer_type, l.layer_type.c_str());
      double scale = 0;
      ASSERT_EQ(posenc_schedule_query_scale_at(h.s, 100000, &scale), POSENC_OK);
      EXPECT_EQ(scale, l.query_scale.at(100000));
      if (l.rope) {
        EXPECT_EQ(inv_freq(h.s), spec.schedules[static_cast<std::size_t>(l.schedule)].inv_freq);
      }
    }
  }
}

TEST(CApi, RuntimeRuleIsRopeRuntimes) {
  const std::string text = read_file(reference_dir() + "/real-configs/Phi-3.5-mini-instruct.json");
  const ModelRope model = parse_hf_config(text);
  RopeRuntime runtime(model.select().params);
  Handle h;
  ASSERT_EQ(posenc_schedule_from_config_type(text.data(), static_cast<std::int64_t>(text.size()), 0, nullptr, &h.s),
            POSENC_OK);
  for (std::int64_t max_id : {100, 5000, 200000, 10, 4095, 4096}) {  // LongRoPE: short, long, short ...
    SCOPED_TRACE(max_id);
    ASSERT_EQ(posenc_schedule_update(h.s, max_id), POSENC_OK);
    const RopeSchedule& want = runtime.update(max_id);
    EXPECT_EQ(inv_freq(h.s), want.inv_freq);
    EXPECT_EQ(layer_info(h.s).uses_long_factors, want.uses_long_factors ? 1 : 0);
    Handle at;
    ASSERT_EQ(posenc_schedule_at(h.s, max_id + 1, &at.s), POSENC_OK);
    EXPECT_EQ(inv_freq(at.s), want.inv_freq);  // LongRoPE's choice depends on the call alone
  }
}

TEST(CApi, RotateAndAttentionAreTheKernelsBits) {
  const std::string text = read_file(reference_dir() + "/real-configs/DeepSeek-V2-Lite.json");
  const ModelSpec spec = parse_model_spec(text);
  Handle h;
  ASSERT_EQ(posenc_schedule_from_config(text.data(), static_cast<std::int64_t>(text.size()), 0, 0, &h.s), POSENC_OK)
      << posenc_last_error();
  const RopeSchedule& schedule = spec.schedules[static_cast<std::size_t>(spec.layers[0].schedule)];
  const int T = 6, H = 3, D = schedule.rotary_dim;  // the rotated part of an MLA head
  std::vector<std::uint16_t> a(static_cast<std::size_t>(T * H * D)), b;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float_to_f16(std::sin(0.37f * static_cast<float>(i)));
  b = a;
  posenc_tensor view{a.data(), POSENC_DTYPE_F16, 1, T, H, D, std::int64_t{T} * H * D, std::int64_t{H} * D, D};
  posenc_positions ids{POSENC_IDS_IMPLICIT, nullptr, 1, 0, 40, 0};
  ASSERT_EQ(posenc_rope_rotate(h.s, &view, nullptr, &ids, nullptr), POSENC_OK) << posenc_last_error();
  rope_rotate(bshd(b.data(), DType::kF16, {1, T, H, D}), nullptr, PositionIds::implicit(40),
              rope_apply_params(schedule, spec.layers[0].layout));
  EXPECT_EQ(a, b);

  std::vector<float> q(static_cast<std::size_t>(T * H * D)), k = q, v = q, out_c = q, out_cpp = q;
  for (std::size_t i = 0; i < q.size(); ++i)
    q[i] = std::cos(0.1f * i), k[i] = std::sin(0.2f * i), v[i] = std::cos(0.3f * i);
  auto c_view = [&](std::vector<float>& x) {
    return posenc_tensor{x.data(), POSENC_DTYPE_F32, 1, T, H, D, std::int64_t{T} * H * D, std::int64_t{H} * D, D};
  };
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  p.positions = POSENC_POS_ROPE;
  p.rope = h.s;
  p.sliding_window = 4;
  const posenc_tensor qc = c_view(q), kc = c_view(k), vc = c_view(v), oc = c_view(out_c);
  ASSERT_EQ(posenc_attention_forward(&p, &qc, &kc, &vc, &oc), POSENC_OK) << posenc_last_error();
  AttentionParams cpp;
  cpp.positions = AttentionPositions::kRope;
  cpp.rope = rope_apply_params(schedule, spec.layers[0].layout);
  cpp.mask.sliding_window = 4;
  attention(bshd(q.data(), {1, T, H, D}), bshd(k.data(), {1, T, H, D}), bshd(v.data(), {1, T, H, D}),
            bshd(out_cpp.data(), {1, T, H, D}), cpp);
  EXPECT_EQ(out_c, out_cpp);

  // The remaps reach the kernel: each equals the C++ call bit for bit and differs from plain RoPE.
  p.sliding_window = cpp.mask.sliding_window = 0;
  attention(bshd(q.data(), {1, T, H, D}), bshd(k.data(), {1, T, H, D}), bshd(v.data(), {1, T, H, D}),
            bshd(out_cpp.data(), {1, T, H, D}), cpp);
  const std::vector<float> plain = out_cpp;
  const std::pair<int, PositionRemap> remaps[] = {
      {POSENC_REMAP_SELF_EXTEND, {PositionRemapKind::kSelfExtend, 3, 2, 0}},
      {POSENC_REMAP_RE_ROPE, {PositionRemapKind::kReRope, 3, 1, 0}},
      {POSENC_REMAP_LEAKY_RE_ROPE, {PositionRemapKind::kLeakyReRope, 3, 1, 2.5}},
      {POSENC_REMAP_DUAL_CHUNK, {PositionRemapKind::kDualChunk, 0, 1, 0, 4, 2}}};  // c = 2: all three branches
  for (const auto& [c_kind, remap] : remaps) {
    p.remap = c_kind;
    p.remap_window = remap.window;
    p.remap_group = remap.group;
    p.remap_leak = remap.leak;
    p.remap_chunk_size = remap.chunk_size;
    p.remap_local_size = remap.local_size;
    ASSERT_EQ(posenc_attention_forward(&p, &qc, &kc, &vc, &oc), POSENC_OK) << posenc_last_error();
    cpp.remap = remap;
    attention(bshd(q.data(), {1, T, H, D}), bshd(k.data(), {1, T, H, D}), bshd(v.data(), {1, T, H, D}),
              bshd(out_cpp.data(), {1, T, H, D}), cpp);
    EXPECT_EQ(out_c, out_cpp) << c_kind;
    EXPECT_NE(out_c, plain) << c_kind;
  }
  p.remap = 7;
  EXPECT_EQ(posenc_attention_forward(&p, &qc, &kc, &vc, &oc), POSENC_ERR_ARGUMENT);
  EXPECT_NE(std::string(posenc_last_error()).find("params->remap"), std::string::npos) << posenc_last_error();
}

TEST(CApi, CppErrorsPassThroughWithTheirText) {
  const std::string text = R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 1, "max_position_embeddings": 4096,
    "rope_scaling": {"rope_type": "yarn", "factor": 4, "bogus_key": 1}})";
  std::string cpp;
  try {
    parse_model_spec(text);
  } catch (const Error& e) {
    cpp = e.what();
  }
  ASSERT_FALSE(cpp.empty());
  Handle h;
  EXPECT_EQ(posenc_schedule_from_config(text.data(), static_cast<std::int64_t>(text.size()), 0, 0, &h.s),
            POSENC_ERR_VALUE);
  EXPECT_EQ(std::string(posenc_last_error()), "posenc_schedule_from_config: " + cpp);
  // Lenient: the same text accepted, as the C++ option does.
  EXPECT_EQ(posenc_schedule_from_config(text.data(), static_cast<std::int64_t>(text.size()), POSENC_CONFIG_LENIENT, 0,
                                        &h.s),
            POSENC_OK)
      << posenc_last_error();
}

// Issue 32: a model without RoPE gets no schedule handle; the error names its scheme.
TEST(CApi, ModelsWithoutRopeAreRefusedNamingTheirScheme) {
  const std::string text = R"({"model_type": "bloom", "n_head": 16, "n_layer": 24})";
  Handle h;
  for (int by_type = 0; by_type < 2; ++by_type) {
    const posenc_status status =
        by_type ? posenc_schedule_from_config_type(text.data(), static_cast<std::int64_t>(text.size()), 0, nullptr, &h.s)
                : posenc_schedule_from_config(text.data(), static_cast<std::int64_t>(text.size()), 0, 0, &h.s);
    EXPECT_EQ(status, POSENC_ERR_VALUE);
    EXPECT_NE(std::string(posenc_last_error()).find("ALiBi biases over 16 heads"), std::string::npos) << posenc_last_error();
  }
}

}  // namespace
}  // namespace posenc
