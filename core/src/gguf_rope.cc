// llama.cpp's RoPE schedule from GGUF metadata, and its comparison with HF's.
#include <algorithm>
#include <cmath>

#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

struct Keys {
  const GgufFile& f;
  std::string arch;
  GgufRope& out;

  const GgufValue* find(const std::string& suffix) {
    const std::string key = arch + "." + suffix;
    const GgufValue* v = f.find(key);
    if (v) out.keys.emplace_back(key, v->to_string());
    return v;
  }
  std::optional<double> number(const std::string& suffix) {
    const GgufValue* v = find(suffix);
    if (!v) return std::nullopt;
    if (v->type == 8 || v->type == 9)
      throw Error("GGUF: " + arch + "." + suffix + " must be a number, got " + v->to_string());
    if (!std::isfinite(v->number)) throw Error("GGUF: " + arch + "." + suffix + " must be finite, got " + v->to_string());
    return v->number;
  }
};

// ggml_rope_yarn_corr_dim: the dimension whose wavelength fits n_rot rotations in n_ctx_orig.
double corr_dim(int n_dims, std::int64_t n_ctx_orig, double n_rot, double base) {
  return n_dims * std::log(static_cast<double>(n_ctx_orig) / (n_rot * 2 * M_PI)) / (2 * std::log(base));
}

std::string relative(double a, double b) { return format_number(std::abs(a - b) / std::max(std::abs(b), 1e-300)); }

bool close(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b)); }

}  // namespace

GgufRope gguf_rope(const GgufFile& f) {
  GgufRope r;
  const GgufValue* arch = f.find("general.architecture");
  if (!arch || arch->type != 8) throw Error("GGUF: general.architecture (a string) is missing");
  r.arch = arch->text;
  Keys k{f, r.arch, r};
  // llama-model.cpp load_hparams: n_rot defaults to the head size.
  const auto n_embd = k.number("embedding_length");
  const auto n_head = k.number("attention.head_count");
  const auto key_length = k.number("attention.key_length");
  if (auto d = k.number("rope.dimension_count")) r.n_rot = static_cast<int>(*d);
  else if (key_length) r.n_rot = static_cast<int>(*key_length);
  else if (n_embd && n_head && *n_head > 0) r.n_rot = static_cast<int>(*n_embd / *n_head);
  if (r.n_rot < 2 || r.n_rot > 65536 || r.n_rot % 2)
    throw Error("GGUF: " + r.arch + ".rope.dimension_count must be even, in [2, 65536], got " + std::to_string(r.n_rot));
  r.freq_base = k.number("rope.freq_base").value_or(10000.0);
  if (!(r.freq_base > 1)) throw Error("GGUF: " + r.arch + ".rope.freq_base must be > 1, got " + format_number(r.freq_base));
  if (const GgufValue* t = k.find("rope.scaling.type")) r.scaling_type = t->text;
  if (auto s = k.number("rope.scaling.factor")) r.factor = *s;
  else if (auto lin = k.number("rope.scale_linear")) r.factor = *lin, r.scaling_type = "linear";
  if (r.factor == 0) r.factor = 1;  // llama.cpp: 0 means no scaling
  if (!(r.factor > 0)) throw Error("GGUF: " + r.arch + ".rope.scaling.factor must be > 0, got " + format_number(r.factor));
  const auto ctx = k.number("context_length");
  r.n_ctx_orig = static_cast<std::int64_t>(k.number("rope.scaling.original_context_length").value_or(ctx.value_or(0)));
  r.ext_factor = k.number("rope.scaling.yarn_ext_factor").value_or(r.scaling_type == "yarn" ? 1.0 : 0.0);
  r.attn_factor = k.number("rope.scaling.yarn_attn_factor").value_or(k.number("rope.scaling.attn_factor").value_or(1.0));
  r.beta_fast = k.number("rope.scaling.yarn_beta_fast").value_or(32.0);
  r.beta_slow = k.number("rope.scaling.yarn_beta_slow").value_or(1.0);
  k.find("rope.dimension_sections");
  k.find("attention.sliding_window");
  k.find("rope.scaling.yarn_log_multiplier");

  // Per-frequency divisors: llama3's rope_freqs, LongRoPE's short factors (the schedule at init).
  const std::vector<float>* ff = nullptr;
  for (const char* name : {"rope_freqs.weight", "rope_factors_short.weight"}) {
    auto it = f.positional_tensors.find(name);
    if (it == f.positional_tensors.end()) continue;
    ff = &it->second;
    r.freq_factors_tensor = name;
    break;
  }
  const int n = r.n_rot / 2;
  if (ff && static_cast<int>(ff->size()) != n)
    throw Error("GGUF: tensor " + r.freq_factors_tensor + " has " + std::to_string(ff->size()) + " values; n_rot / 2 = " +
                std::to_string(n) + " expected");
  const double freq_scale = 1.0 / r.factor;
  double low = 0, high = 0;
  if (r.ext_factor != 0) {
    if (r.n_ctx_orig <= 0) throw Error("GGUF: YaRN needs " + r.arch + ".rope.scaling.original_context_length or context_length");
    low = std::max(0.0, std::floor(corr_dim(r.n_rot, r.n_ctx_orig, r.beta_fast, r.freq_base)));
    high = std::min(r.n_rot - 1.0, std::ceil(corr_dim(r.n_rot, r.n_ctx_orig, r.beta_slow, r.freq_base)));
  }
  for (int i = 0; i < n; ++i) {
    double extrap = std::pow(r.freq_base, -2.0 * i / r.n_rot);
    if (ff) extrap /= (*ff)[i];
    double inv = extrap * freq_scale;
    if (r.ext_factor != 0) {  // rope_yarn: theta_interp (1 - ramp_mix) + theta_extrap ramp_mix
      const double y = (i - low) / std::max(0.001, high - low);
      const double ramp = 1 - std::min(1.0, std::max(0.0, y));
      const double mix = ramp * r.ext_factor;
      inv = inv * (1 - mix) + extrap * mix;
    }
    r.inv_freq.push_back(static_cast<float>(inv));
  }
  r.attention_factor = r.attn_factor * (r.ext_factor != 0 ? 1 + 0.1 * std::log(1 / freq_scale) : 1.0);
  return r;
}

std::vector<GgufMismatch> compare_with_hf(const GgufRope& g, const ModelRope& hf) {
  const RopeParams& p = hf.select().params;
  const RopeSchedule s = compute_schedule(p);
  std::vector<GgufMismatch> out;
  const std::string a = g.arch + ".";
  auto differ = [&](const std::string& key, const std::string& msg) { out.push_back({key, msg}); };
  if (g.n_rot != s.rotary_dim)
    differ(a + "rope.dimension_count", "GGUF " + std::to_string(g.n_rot) + ", HF rotary_dim " + std::to_string(s.rotary_dim));
  if (!close(g.freq_base, p.theta))
    differ(a + "rope.freq_base", "GGUF " + format_number(g.freq_base) + ", HF rope_theta " + format_number(p.theta));
  const bool hf_scales = p.type == RopeType::kLinear || p.type == RopeType::kYarn;
  if (hf_scales && !close(g.factor, resolved_factor(p)))
    differ(a + "rope.scaling.factor", "GGUF " + format_number(g.factor) + ", HF factor " + format_number(resolved_factor(p)));
  if (!hf_scales && g.factor != 1 && g.freq_factors_tensor.empty())
    differ(a + "rope.scaling.factor", "GGUF " + format_number(g.factor) + ", HF rope_type '" + to_string(p.type) +
                                          "' has no such global factor");
  if (p.type == RopeType::kYarn) {
    if (g.scaling_type != "yarn") differ(a + "rope.scaling.type", "GGUF \"" + g.scaling_type + "\", HF \"yarn\"");
    if (g.n_ctx_orig != resolved_original_max(p))
      differ(a + "rope.scaling.original_context_length", "GGUF " + std::to_string(g.n_ctx_orig) + ", HF " +
                                                             std::to_string(resolved_original_max(p)));
    if (g.beta_fast != p.beta_fast) differ(a + "rope.scaling.yarn_beta_fast", "GGUF " + format_number(g.beta_fast) + ", HF " + format_number(p.beta_fast));
    if (g.beta_slow != p.beta_slow) differ(a + "rope.scaling.yarn_beta_slow", "GGUF " + format_number(g.beta_slow) + ", HF " + format_number(p.beta_slow));
    if (!p.truncate)
      differ(a + "rope.scaling.type", "HF truncate: false keeps the correction range fractional; llama.cpp's "
                                      "ggml_rope_yarn_corr_dims always floors and ceils it");
  }
  if (p.type == RopeType::kLlama3 && g.freq_factors_tensor != "rope_freqs.weight")
    differ("rope_freqs.weight", "HF rope_type llama3 needs the per-frequency factors; the GGUF file has no rope_freqs.weight");
  if (p.type == RopeType::kLongRope && g.freq_factors_tensor != "rope_factors_short.weight")
    differ("rope_factors_short.weight", "HF rope_type longrope needs the short factors; the GGUF file has none");
  const std::size_t n = std::min(g.inv_freq.size(), s.inv_freq.size());
  const std::string freq_key = g.freq_factors_tensor.empty() ? a + "rope.freq_base" : g.freq_factors_tensor;
  for (std::size_t i = 0; i < n; ++i)
    if (!close(g.inv_freq[i], s.inv_freq[i]))
      differ(freq_key, "inv_freq[" + std::to_string(i) + "]: llama.cpp " + format_number(g.inv_freq[i]) + ", HF " +
                           format_number(s.inv_freq[i]) + " (relative " + relative(g.inv_freq[i], s.inv_freq[i]) + ")");
  if (!close(g.attention_factor, s.attention_factor))
    differ(a + "rope.scaling.attn_factor", "attention factor on cos/sin: llama.cpp " + format_number(g.attention_factor) +
                                               ", HF " + format_number(s.attention_factor));
  return out;
}

}  // namespace posenc
