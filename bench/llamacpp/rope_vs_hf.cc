// llama.cpp's RoPE (ggml's own ggml_rope_ext / ggml_rope_multi on the CPU) on `posenc golden`'s q
// and k, against HF's rotated q and k from the same file. Optional: built by rope.sh against a
// llama.cpp tree, never by the posenc build.
//
//   rope_vs_hf GOLDEN_DIR KEYS.json  ->  one JSON object per golden layer type and tensor (q, k)
//
// KEYS.json is rope_keys.py's output: the hparams llama.cpp's loader reads from the GGUF keys its
// converter writes. From them this computes llama_context's cparams as src/llama-context.cpp does
// (float32, n_ctx = 131072, no user overrides: lines 114-214), picks the graph's arguments as the
// model's builder does (src/models/<arch>.cpp: the SWA layers' base/scale, get_rope_factors), lays
// golden's q and k out as the converted weights would produce them (LlamaModel.permute, GLM's
// normal_to_neox), rotates them with ggml, maps back to HF's channel order and compares.
//
// "agrees to f32 rounding": every element within tol = 2 af |x_pair| eps32 ((j + 8) |theta| + 8),
// theta = w_j p HF's angle of pair j at position p, eps32 = 2^-24: float32 angles are only that
// exact in either implementation (ggml builds theta_j = p * theta_scale^j by j float products,
// ggml-cpu/ops.cpp ggml_rope_cache_init; HF rounds inv_freq and p * inv_freq once each).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "nlohmann/json.hpp"

#ifndef LLAMA_CPP_COMMIT
#define LLAMA_CPP_COMMIT "unknown"
#endif

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "rope_vs_hf: %s\n", message.c_str());
  std::exit(2);
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// safetensors: u64 header length, JSON header, data. F32 tensors only (golden writes F32).
struct Tensors {
  std::map<std::string, std::vector<float>> data;
  std::map<std::string, std::vector<int64_t>> shape;
};

Tensors read_safetensors(const std::string& path) {
  const std::string bytes = read_text(path);
  if (bytes.size() < 8) fail(path + ": shorter than a safetensors header");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8) fail(path + ": header length beyond the file");
  const json header = json::parse(bytes.substr(8, n));
  Tensors t;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    if (info.at("dtype") != "F32") fail(path + ": tensor " + name + " is not F32");
    const auto off = info.at("data_offsets").get<std::vector<uint64_t>>();
    if (off[1] < off[0] || 8 + n + off[1] > bytes.size()) fail(path + ": tensor " + name + " outside the file");
    std::vector<float> v((off[1] - off[0]) / 4);
    std::memcpy(v.data(), bytes.data() + 8 + n + off[0], v.size() * 4);
    t.data[name] = std::move(v);
    t.shape[name] = info.at("shape").get<std::vector<int64_t>>();
  }
  return t;
}

// src/llama-context.cpp lines 114-214 (yarn_* from hparams, freq base/scale, n_ctx_orig_yarn,
// the YaRN attention factor), with llama_context_default_params (all "unset") and n_ctx = 131072.
struct RopeArgs {
  int n_dims = 0, mode = 0, n_ctx_orig = 0;
  float freq_base = 0, freq_scale = 1, ext_factor = 0, attn_factor = 1, beta_fast = 32, beta_slow = 1;
  int sections[4] = {0, 0, 0, 0};
  std::vector<float> freq_factors;
  std::string factors_name;
};

RopeArgs llama_cpp_args(const json& h, uint32_t n_ctx) {
  RopeArgs a;
  const std::string scaling = h.at("rope_scaling_type");
  float freq_base = h.at("rope_freq_base_train").get<float>();
  float freq_scale = h.at("rope_freq_scale_train").get<float>();
  float ext_factor = h.at("yarn_ext_factor").get<float>();
  float attn_factor = h.at("yarn_attn_factor").get<float>();
  const float log_mul = h.at("rope_yarn_log_mul").get<float>();
  uint32_t n_ctx_orig = h.at("n_ctx_orig_yarn").get<uint32_t>();
  if (n_ctx_orig == 0) n_ctx_orig = h.at("n_ctx_train").get<uint32_t>();
  if (scaling == "none") freq_scale = 1.0f;  // "never scale if scaling type is none"
  if (ext_factor < 0.0f) ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
  if (ext_factor != 0) {
    auto get_mscale = [](float scale, float mscale) { return scale <= 1.0f ? 1.0f : (0.1f * mscale * logf(scale) + 1.0f); };
    const float factor = 1.0f / freq_scale;
    if (log_mul != 0.0f) {
      float mscale = 1.0f;
      if (h.value("arch", std::string()) == "deepseek2" && log_mul != 1.0f) mscale = log_mul;  // TAG_DEEPSEEK2_YARN_LOG_MUL_FIX
      attn_factor = get_mscale(factor, mscale) / get_mscale(factor, log_mul);
    } else {
      attn_factor = get_mscale(factor, 1.0f);
    }
    attn_factor *= 1.0f / (1.0f + 0.1f * logf(factor));
  }
  attn_factor *= h.at("rope_attn_factor").get<float>();

  a.n_dims = h.at("n_rot");
  const std::string rt = h.at("rope_type");
  a.mode = rt == "norm" ? GGML_ROPE_TYPE_NORMAL : rt == "neox" ? GGML_ROPE_TYPE_NEOX : rt == "mrope" ? GGML_ROPE_TYPE_MROPE
                                                                                    : GGML_ROPE_TYPE_IMROPE;
  a.n_ctx_orig = static_cast<int>(n_ctx_orig);
  a.freq_base = h.contains("swa_freq_base") ? h.at("swa_freq_base").get<float>() : freq_base;
  a.freq_scale = h.contains("swa_freq_scale") ? h.at("swa_freq_scale").get<float>() : freq_scale;
  a.ext_factor = ext_factor;
  a.attn_factor = attn_factor;
  a.beta_fast = h.at("yarn_beta_fast");
  a.beta_slow = h.at("yarn_beta_slow");
  const json& g = h.at("graph");
  if (g.contains("freq_scale")) a.freq_scale = g.at("freq_scale");
  if (g.contains("ext_factor")) a.ext_factor = g.at("ext_factor");
  if (g.contains("attn_factor")) a.attn_factor = g.at("attn_factor");
  const auto sec = h.at("sections").get<std::vector<int>>();
  for (int i = 0; i < 4 && i < static_cast<int>(sec.size()); ++i) a.sections[i] = sec[i];
  // src/llama-model.cpp llama_model::get_rope_factors: rope_freqs, else long/short by n_ctx_seq.
  if (h.contains("freq_factors") && !h.at("freq_factors").is_null()) {
    a.freq_factors = h.at("freq_factors").get<std::vector<float>>();
    a.factors_name = "rope_freqs";
  } else if (h.contains("freq_factors_long")) {
    const bool lng = n_ctx > n_ctx_orig;
    a.freq_factors = h.at(lng ? "freq_factors_long" : "freq_factors_short").get<std::vector<float>>();
    a.factors_name = lng ? "rope_factors_long" : "rope_factors_short";
  }
  return a;
}

// HF channel c of the rotated slice -> llama.cpp channel, as the converted q/k weights order them.
std::vector<int> llama_cpp_order(const std::string& qk_order, int slice, int rotary) {
  std::vector<int> to(slice);
  for (int c = 0; c < slice; ++c) to[c] = c;
  if (qk_order == "permute") {  // conversion/llama.py LlamaModel.permute: (h, i) -> (i, h)
    const int half = slice / 2;
    for (int c = 0; c < slice; ++c) to[c] = 2 * (c % half) + c / half;
  } else if (qk_order == "normal_to_neox") {  // conversion/glm.py: rot[::2], rot[1::2], rest
    for (int c = 0; c < rotary; ++c) to[c] = (c % 2 == 0) ? c / 2 : rotary / 2 + c / 2;
  } else if (qk_order != "hf") {
    fail("unknown qk_order " + qk_order);
  }
  return to;
}

struct Compare {
  double max_err = 0, max_ratio = 0;
  int64_t max_pos = -1, first_pos = -1;
  int max_ch = -1, first_ch = -1;
  double first_err = 0, first_tol = 0;
  double max_err_4095 = 0;
};

// One golden layer type, as the comparison needs it.
struct Layer {
  std::string name;
  int D = 0, R = 0, off = 0;
  std::string pairing;
  bool out_half = false;      // deepseek_v3: interleaved pairs, half-split output
  double af = 1;
  std::vector<double> w;      // HF's frequency of pair j
  std::vector<int> to;        // HF channel -> llama.cpp channel within the slice
};

// One sequence: rows of positions per axis (T, H, W; all equal for text), q or k and HF's result.
struct Sequence {
  std::string name;                        // "q", "k", "vision.q", ...
  std::vector<std::array<int64_t, 3>> pos; // [P]
  std::vector<int> axis_of_freq;           // [R/2], all 0 for text
  const std::vector<float>* in = nullptr;
  const std::vector<float>* gold = nullptr;
  std::vector<double> scale;               // divides golden's output (the query scale), [P]
};

json rotate_and_compare(const Layer& L, const RopeArgs& a, const Sequence& seq) {
  const int64_t P = static_cast<int64_t>(seq.pos.size());
  const int slice = L.D - L.off;  // MLA: the rope part [off, D) is its own tensor in llama.cpp
  const std::vector<float>& in = *seq.in;
  const std::vector<float>& gold = *seq.gold;
  const size_t mem = static_cast<size_t>(P) * slice * 4 * 4 + static_cast<size_t>(P) * 4 * 8 + (size_t{1} << 22);
  ggml_init_params init{mem, nullptr, false};
  ggml_context* ctx = ggml_init(init);
  if (!ctx) fail("ggml_init failed");
  ggml_tensor* x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, slice, 1, P);
  const bool multi = a.mode == GGML_ROPE_TYPE_MROPE || a.mode == GGML_ROPE_TYPE_IMROPE;
  ggml_tensor* pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, multi ? 4 * P : P);
  ggml_tensor* ff = nullptr;
  if (!a.freq_factors.empty()) {
    ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, static_cast<int64_t>(a.freq_factors.size()));
    std::memcpy(ff->data, a.freq_factors.data(), a.freq_factors.size() * 4);
  }
  float* xd = static_cast<float*>(x->data);
  int32_t* pd = static_cast<int32_t*>(pos->data);
  for (int64_t r = 0; r < P; ++r) {
    for (int c = 0; c < slice; ++c) xd[r * slice + L.to[c]] = in[r * L.D + L.off + c];
    if (multi) {  // ggml_rope_multi reads 4 position rows (T, H, W, extra); text: src/llama-graph.cpp (p, p, p, 0)
      for (int ax = 0; ax < 3; ++ax) pd[ax * P + r] = static_cast<int32_t>(seq.pos[r][ax]);
      pd[3 * P + r] = 0;
    } else {
      pd[r] = static_cast<int32_t>(seq.pos[r][0]);
    }
  }
  int sections[4];
  std::copy(a.sections, a.sections + 4, sections);
  ggml_tensor* y = multi ? ggml_rope_multi(ctx, x, pos, ff, a.n_dims, sections, a.mode, a.n_ctx_orig, a.freq_base,
                                           a.freq_scale, a.ext_factor, a.attn_factor, a.beta_fast, a.beta_slow)
                         : ggml_rope_ext(ctx, x, pos, ff, a.n_dims, a.mode, a.n_ctx_orig, a.freq_base, a.freq_scale,
                                         a.ext_factor, a.attn_factor, a.beta_fast, a.beta_slow);
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, y);
  ggml_graph_compute_with_ctx(ctx, graph, 1);
  const float* yd = static_cast<const float*>(y->data);

  Compare cmp;
  const double eps = std::ldexp(1.0, -24);
  const int R = L.R;
  for (int64_t r = 0; r < P; ++r) {
    const int64_t p0 = seq.pos[r][0];
    for (int c = 0; c < slice; ++c) {
      double g;  // the golden value of HF channel c (deepseek_v3 writes pair j at (j, j + R/2))
      if (L.out_half && c < R) g = gold[r * L.D + L.off + (c % 2 == 0 ? c / 2 : R / 2 + c / 2)];
      else g = gold[r * L.D + L.off + c];
      g /= seq.scale[r];
      const double v = yd[r * slice + L.to[c]];
      int j = -1, partner = -1;  // c's frequency and pair partner in HF's order
      if (c < R) {
        if (L.pairing == "interleaved") j = c / 2, partner = c ^ 1;
        else j = c % (R / 2), partner = c < R / 2 ? c + R / 2 : c - R / 2;
      }
      double tol = 8 * eps * std::fabs(g) + 1e-7;
      if (j >= 0) {
        const double xa = in[r * L.D + L.off + c], xb = in[r * L.D + L.off + partner];
        const double norm = std::sqrt(xa * xa + xb * xb);
        const double theta = std::fabs(L.w[j] * static_cast<double>(seq.pos[r][seq.axis_of_freq[j]]));
        tol = 2 * L.af * norm * eps * ((j + 8) * theta + 8) + 1e-7;
      }
      const double err = std::fabs(v - g);
      if (err > cmp.max_err) cmp.max_err = err, cmp.max_pos = p0, cmp.max_ch = c + L.off;
      if (p0 <= 4095) cmp.max_err_4095 = std::max(cmp.max_err_4095, err);
      cmp.max_ratio = std::max(cmp.max_ratio, err / tol);
      if (err > tol && cmp.first_pos < 0) cmp.first_pos = p0, cmp.first_ch = c + L.off, cmp.first_err = err, cmp.first_tol = tol;
    }
  }
  ggml_free(ctx);
  json row = {{"layer_type", L.name},
              {"tensor", seq.name},
              {"agrees", cmp.first_pos < 0},
              {"max_abs_error", cmp.max_err},
              {"max_error_at", {{"position", cmp.max_pos}, {"channel", cmp.max_ch}}},
              {"max_abs_error_to_4095", cmp.max_err_4095},
              {"max_error_over_tolerance", cmp.max_ratio},
              {"ggml", {{"op", multi ? "ggml_rope_multi" : "ggml_rope_ext"},
                        {"n_dims", a.n_dims},
                        {"mode", a.mode},
                        {"n_ctx_orig", a.n_ctx_orig},
                        {"freq_base", a.freq_base},
                        {"freq_scale", a.freq_scale},
                        {"ext_factor", a.ext_factor},
                        {"attn_factor", a.attn_factor},
                        {"beta_fast", a.beta_fast},
                        {"beta_slow", a.beta_slow},
                        {"sections", std::vector<int>(a.sections, a.sections + 4)},
                        {"freq_factors", a.factors_name}}},
              {"llama_cpp_commit", LLAMA_CPP_COMMIT}};
  if (cmp.first_pos >= 0)  // position: the token's T position (its only one for text)
    row["first_difference"] = {{"position", cmp.first_pos}, {"channel", cmp.first_ch},
                               {"abs_error", cmp.first_err}, {"tolerance", cmp.first_tol}};
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) fail("usage: rope_vs_hf GOLDEN_DIR KEYS.json");
  const std::string dir = argv[1];
  const json manifest = json::parse(read_text(dir + "/manifest.json"));
  const json keys = json::parse(read_text(argv[2]));
  const Tensors golden = read_safetensors(dir + "/golden.safetensors");
  const auto positions = manifest.at("positions").get<std::vector<int64_t>>();
  const int64_t P = static_cast<int64_t>(positions.size());
  const uint32_t n_ctx = 131072;
  const auto one = std::find(positions.begin(), positions.end(), int64_t{1});
  if (one == positions.end()) fail("golden's positions must include 1 (its cos/sin row gives HF's frequencies)");
  const int64_t row1 = one - positions.begin();

  for (const json& entry : manifest.at("layer_types")) {
    if (!entry.at("rope").get<bool>()) continue;
    const std::string lt = entry.at("layer_type");
    if (!keys.at("layer_types").contains(lt)) fail("KEYS.json has no layer type " + lt);
    json h = keys.at("layer_types").at(lt);
    h["arch"] = keys.at("arch");
    const RopeArgs a = llama_cpp_args(h, n_ctx);
    Layer L;
    L.name = lt;
    L.D = entry.at("head_dim"), L.R = entry.at("rotary_dim"), L.off = entry.at("rotary_offset");
    L.pairing = entry.at("pairing");
    L.out_half = entry.contains("output_order");
    L.af = entry.at("attention_factor");
    L.to = llama_cpp_order(keys.at("qk_order"), L.D - L.off, L.R);
    const std::vector<float>& cs = golden.data.at(lt + ".cos");
    const std::vector<float>& sn = golden.data.at(lt + ".sin");
    for (int j = 0; j < L.R / 2; ++j) L.w.push_back(std::atan2(sn[row1 * L.R + j], cs[row1 * L.R + j]));
    const auto qs = entry.at("query_scales").get<std::vector<double>>();
    for (const char* which : {"q", "k"}) {
      Sequence seq;
      seq.name = which;
      for (int64_t r = 0; r < P; ++r) seq.pos.push_back({positions[r], positions[r], positions[r]});
      seq.axis_of_freq.assign(L.R / 2, 0);
      seq.in = &golden.data.at(lt + "." + which);
      seq.gold = &golden.data.at(lt + "." + which + "_out");
      seq.scale = which[0] == 'q' ? qs : std::vector<double>(P, 1.0);  // llama.cpp scales queries outside RoPE
      std::printf("%s\n", rotate_and_compare(L, a, seq).dump().c_str());
    }
    // M-RoPE's vision sequence (golden_mrope.h): HF's 3-axis ids as ggml_rope_multi's T, H, W rows.
    const bool multi = a.mode == GGML_ROPE_TYPE_MROPE || a.mode == GGML_ROPE_TYPE_IMROPE;
    if (multi && entry.contains("vision")) {
      const json& v = entry.at("vision");
      const std::vector<float>& ids = golden.data.at(lt + ".vision.position_ids");
      const int64_t N = v.at("seq_len");
      for (const char* which : {"q", "k"}) {
        Sequence seq;
        seq.name = std::string("vision.") + which;
        for (int64_t n = 0; n < N; ++n)
          seq.pos.push_back({static_cast<int64_t>(ids[n]), static_cast<int64_t>(ids[N + n]), static_cast<int64_t>(ids[2 * N + n])});
        seq.axis_of_freq = v.at("axis_of_freq").get<std::vector<int>>();
        seq.in = &golden.data.at(lt + ".vision." + which);
        seq.gold = &golden.data.at(lt + ".vision." + which + "_out");
        seq.scale.assign(N, 1.0);
        std::printf("%s\n", rotate_and_compare(L, a, seq).dump().c_str());
      }
    }
  }
  return 0;
}
