// llama.cpp's RoPE schedule from GGUF metadata, and its comparison with HF's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/rope_schedule.h"

namespace posenc {
namespace {

enum : std::uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kString = 8, kArray = 9 };

const char* type_name(std::uint32_t t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  return t < 13 ? names[t] : "unknown";
}

// llama.cpp reads every key with one exact type (llama-model-loader.cpp, GGUFMeta::GKV::get_kv:
// "key %s has wrong type %s but expected type %s"): a file that stores rope.freq_base as f64 or
// context_length as u64 does not load there, so it is an error here too, not a silent conversion.
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
  std::optional<double> typed(const std::string& suffix, std::uint32_t type) {
    const GgufValue* v = find(suffix);
    if (!v) return std::nullopt;
    if (v->type != type)
      throw Error("GGUF: " + arch + "." + suffix + " must be " + type_name(type) + " (as llama.cpp reads it), got " +
                  type_name(v->type) + " " + v->to_string());
    if (!std::isfinite(v->number)) throw Error("GGUF: " + arch + "." + suffix + " must be finite, got " + v->to_string());
    return v->number;
  }
  std::optional<double> f32(const std::string& suffix) { return typed(suffix, kF32); }
  // An f32 that must satisfy `ok`; else an error naming the key, the value and `expected`.
  template <typename Ok>
  std::optional<double> f32(const std::string& suffix, Ok ok, const char* expected) {
    const auto v = typed(suffix, kF32);
    if (v && !ok(*v)) throw Error("GGUF: " + arch + "." + suffix + " must be " + expected + ", got " + format_number(*v));
    return v;
  }
  std::optional<double> u32(const std::string& suffix) { return typed(suffix, kU32); }
  // attention.head_count: llama-model.cpp reads it with get_key_or_arr (one u32, or one per layer).
  std::optional<double> u32_or_first(const std::string& suffix) {
    const GgufValue* v = f.find(arch + "." + suffix);
    if (v && v->type == kArray) {
      find(suffix);
      if (v->elem_type != kU32 && v->elem_type != kI32)
        throw Error("GGUF: " + arch + "." + suffix + " must be u32 or an array of u32, got an array of " + type_name(v->elem_type));
      if (v->numbers.empty()) throw Error("GGUF: " + arch + "." + suffix + " is an empty array");
      if (v->numbers[0] < 0)  // an i32 array: llama.cpp would read -32 as 4294967264
        throw Error("GGUF: " + arch + "." + suffix + "[0] is " + format_number(v->numbers[0]) + "; expected a count >= 0");
      return v->numbers[0];
    }
    return u32(suffix);
  }
};

// ggml_rope_yarn_corr_dim (ggml.c; ggml_rope_yarn_corr_dims floors the start and ceils the end): the dimension whose wavelength fits n_rot rotations in n_ctx_orig.
double corr_dim(int n_dims, std::int64_t n_ctx_orig, double n_rot, double base) {
  return n_dims * std::log(static_cast<double>(n_ctx_orig) / (n_rot * 2 * M_PI)) / (2 * std::log(base));
}

std::string relative(double a, double b) { return format_number(std::abs(a - b) / std::max(std::abs(b), 1e-300)); }

bool close(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b)); }

}  // namespace

GgufRope gguf_rope(const GgufFile& f) {
  GgufRope r;
  const GgufValue* arch = f.find("general.architecture");
  if (!arch) throw Error("GGUF: general.architecture (a string) is missing");
  if (arch->type != kString)
    throw Error("GGUF: general.architecture must be string, got " + std::string(type_name(arch->type)) + " " + arch->to_string());
  r.arch = arch->text;
  // Every key is named "<arch>.<suffix>" and printed: a name of at most 64 printable characters
  // without spaces (llama.cpp's are like "llama", "gpt-oss", "qwen2vl"; a 250 MiB name grew every
  // lookup and message, a control character reached the terminal).
  const bool printable = std::all_of(r.arch.begin(), r.arch.end(), [](char c) { return c > ' ' && c < 127; });
  if (r.arch.empty() || r.arch.size() > 64 || !printable)
    throw Error("GGUF: general.architecture must be 1 to 64 printable characters without spaces (as \"llama\"), got " +
                std::to_string(r.arch.size()) + " bytes" + (printable ? " starting \"" + r.arch.substr(0, 64) + "\"" : std::string(" with a control or non-ASCII byte")));
  Keys k{f, r.arch, r};
  // llama-model.cpp load_hparams: the head size n_embd_head_k is attention.key_length, else
  // n_embd / n_head (unsigned division); n_rot is rope.dimension_count, else that head size.
  const auto n_embd = k.u32("embedding_length");
  const auto n_head = k.u32_or_first("attention.head_count");
  const auto key_length = k.u32("attention.key_length");
  std::optional<double> head_size;
  std::string head_size_from;
  if (key_length) head_size = *key_length, head_size_from = r.arch + ".attention.key_length";
  else if (n_embd && n_head && *n_head > 0)
    head_size = std::floor(*n_embd / *n_head), head_size_from = r.arch + ".embedding_length / attention.head_count";
  std::optional<double> n_rot = k.u32("rope.dimension_count");
  std::string n_rot_from = r.arch + ".rope.dimension_count";
  if (!n_rot) n_rot = head_size, n_rot_from = "the head size, " + head_size_from;
  if (!n_rot)
    throw Error("GGUF: no rotary dimension: " + r.arch + ".rope.dimension_count, " + r.arch + ".attention.key_length and " +
                r.arch + ".embedding_length / attention.head_count (head_count > 0) are each missing" +
                (n_head && *n_head == 0 ? " (head_count is 0)" : ""));
  if (*n_rot < 2 || *n_rot > 65536 || std::fmod(*n_rot, 2) != 0)
    throw Error("GGUF: n_rot (" + n_rot_from + ") must be even, in [2, 65536], got " + format_number(*n_rot));
  r.n_rot = static_cast<int>(*n_rot);
  // ggml's rope asserts n_dims <= the head's channels; load_hparams refuses n_rot != the head
  // size for llama, mllama, deci, falcon and llama-embed ("invalid n_rot: %u, expected %u").
  if (head_size && *n_rot > *head_size)
    throw Error("GGUF: " + r.arch + ".rope.dimension_count " + format_number(*n_rot) + " is more than the head size " +
                format_number(*head_size) + " (" + head_size_from + "): a head cannot rotate more channels than it has");
  const bool whole_head = r.arch == "llama" || r.arch == "mllama" || r.arch == "deci" || r.arch == "falcon" || r.arch == "llama-embed";
  if (head_size && whole_head && *n_rot != *head_size)
    throw Error("GGUF: " + r.arch + ".rope.dimension_count " + format_number(*n_rot) + " must equal the head size " +
                format_number(*head_size) + " (" + head_size_from + ") for " + r.arch +
                ": llama.cpp's load_hparams refuses it (\"invalid n_rot\")");
  r.freq_base = k.f32("rope.freq_base").value_or(10000.0);
  if (!(r.freq_base > 1)) throw Error("GGUF: " + r.arch + ".rope.freq_base must be > 1, got " + format_number(r.freq_base));
  // load_hparams: rope.scaling.type defaults to "linear"; llama_rope_scaling_type_from_string knows
  // four names and llama.cpp asserts (aborts) on any other.
  r.scaling_type = "linear";
  if (const GgufValue* t = k.find("rope.scaling.type")) {
    if (t->type != kString)
      throw Error("GGUF: " + r.arch + ".rope.scaling.type must be string, got " + type_name(t->type) + " " + t->to_string());
    r.scaling_type = t->text;
  }
  if (r.scaling_type != "none" && r.scaling_type != "linear" && r.scaling_type != "yarn" && r.scaling_type != "longrope")
    throw Error("GGUF: " + r.arch + ".rope.scaling.type must be one of none, linear, yarn, longrope, got \"" +
                r.scaling_type + "\"");
  // load_hparams: rope_freq_scale_train = 1 / rope.scaling.factor (else the old rope.scale_linear),
  // 0 or absent meaning 1; llama_context then forces freq_scale = 1 when the type is "none".
  if (auto s = k.f32("rope.scaling.factor")) r.factor = *s;
  else if (auto lin = k.f32("rope.scale_linear")) r.factor = *lin;
  if (r.factor == 0) r.factor = 1;
  if (!(r.factor > 0)) throw Error("GGUF: " + r.arch + ".rope.scaling.factor must be > 0, got " + format_number(r.factor));
  if (r.scaling_type == "none") r.factor = 1;
  // llama_context: n_ctx_orig_yarn = rope.scaling.original_context_length, else context_length.
  const auto ctx = k.u32("context_length");
  r.n_ctx_orig = static_cast<std::int64_t>(k.u32("rope.scaling.original_context_length").value_or(ctx.value_or(0)));
  // llama_hparams defaults (llama-hparams.h): ext_factor -1 ("not set": 1 for yarn, else 0 in
  // llama_context), yarn_attn_factor 1, beta_fast 32, beta_slow 1, rope_attn_factor 1, log_mul 0.
  // Each value in the range an engine can use (issue 33: 1e30, negatives and zeros were taken).
  const auto positive = [](double v) { return v > 0; };
  r.ext_factor = k.f32("rope.scaling.yarn_ext_factor", [](double v) { return v <= 1; },
                       "in [0, 1] (the YaRN mix; negative: unset)").value_or(-1.0);
  if (r.ext_factor < 0) r.ext_factor = r.scaling_type == "yarn" ? 1.0 : 0.0;
  const double yarn_attn_factor = k.f32("rope.scaling.yarn_attn_factor", positive, "> 0").value_or(1.0);
  const double rope_attn_factor = k.f32("rope.scaling.attn_factor", positive, "> 0").value_or(1.0);
  const double log_mul = k.f32("rope.scaling.yarn_log_multiplier", [](double v) { return v >= 0; }, ">= 0").value_or(0.0);
  r.beta_fast = k.f32("rope.scaling.yarn_beta_fast", positive, "> 0").value_or(32.0);
  r.beta_slow = k.f32("rope.scaling.yarn_beta_slow", positive, "> 0").value_or(1.0);
  // Listed, so checked as llama.cpp reads them: n_swa a u32 (load_hparams' get_key); M-RoPE's
  // rope_sections up to four ints (get_key_or_arr into std::array<int, 4>) of the n_rot / 2 pairs.
  k.u32("attention.sliding_window");
  if (const GgufValue* sections = k.find("rope.dimension_sections")) {
    const std::string key = r.arch + ".rope.dimension_sections";
    if (sections->type != kArray || (sections->elem_type != kI32 && sections->elem_type != kU32) || std::max<std::uint64_t>(sections->count, sections->numbers.size()) > 4)
      throw Error("GGUF: " + key + " must be an array of at most 4 i32, got " + sections->to_string());
    double pairs = 0;
    for (const double x : sections->numbers) {
      if (x < 0) throw Error("GGUF: " + key + " holds " + format_number(x) + "; expected sections >= 0");
      pairs += x;
    }
    if (pairs > r.n_rot / 2)
      throw Error("GGUF: " + key + " " + sections->to_string() + " sums to " + format_number(pairs) + " pairs; n_rot / 2 = " +
                  std::to_string(r.n_rot / 2) + " at most");
  }

  // Per-frequency divisors: llama3's rope_freqs, LongRoPE's short factors (the schedule at init)
  // and long factors (llama.cpp's build_rope_factors divides by them past n_ctx_orig). Every one
  // present is checked alike, whether or not the schedule below uses it (issue 33, gguf-090: all-NaN
  // long factors were accepted): n_rot / 2 values, each a positive finite divisor — a zero gave
  // inv_freq inf, a NaN nan, a negative a reversed turn.
  const int n = r.n_rot / 2;
  const std::vector<float>* ff = nullptr;
  for (const char* name : {"rope_freqs.weight", "rope_factors_short.weight", "rope_factors_long.weight"}) {
    auto it = f.positional_tensors.find(name);
    if (it == f.positional_tensors.end()) continue;
    const std::vector<float>& v = it->second;
    if (static_cast<int>(v.size()) != n)
      throw Error("GGUF: tensor " + std::string(name) + " has " + std::to_string(v.size()) + " values; n_rot / 2 = " +
                  std::to_string(n) + " expected");
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!(v[i] > 0) || !std::isfinite(v[i]))
        throw Error("GGUF: tensor " + std::string(name) + " entry " + std::to_string(i) + " is " + format_number(v[i]) +
                    "; expected a finite divisor > 0");
    if (!ff && std::string(name) != "rope_factors_long.weight") {
      ff = &v;
      r.freq_factors_tensor = name;
    }
  }
  const double freq_scale = 1.0 / r.factor;
  double low = 0, high = 0;
  if (r.ext_factor != 0) {
    if (r.n_ctx_orig <= 0) throw Error("GGUF: YaRN needs " + r.arch + ".rope.scaling.original_context_length or context_length");
    low = std::max(0.0, std::floor(corr_dim(r.n_rot, r.n_ctx_orig, r.beta_fast, r.freq_base)));
    high = std::min(r.n_rot - 1.0, std::ceil(corr_dim(r.n_rot, r.n_ctx_orig, r.beta_slow, r.freq_base)));
  }
  for (int i = 0; i < n; ++i) {
    double extrap = std::pow(r.freq_base, -2.0 * i / r.n_rot);
    if (ff) extrap /= (*ff)[i];  // ggml_rope_cache_init: rope_yarn(theta / freq_factors[i0 / 2], ...)
    double inv = extrap * freq_scale;
    if (r.ext_factor != 0) {  // ggml-cpu ops.cpp rope_yarn / rope_yarn_ramp (y from the pair index i0 / 2): theta_interp (1 - ramp_mix) + theta_extrap ramp_mix
      const double y = (i - low) / std::max(0.001, high - low);
      const double ramp = 1 - std::min(1.0, std::max(0.0, y));
      const double mix = ramp * r.ext_factor;
      inv = inv * (1 - mix) + extrap * mix;
    }
    // Beyond pi radians per position consecutive positions alias (the angle of p + 1 reads as a
    // turn backwards): no engine can use such a frequency (rope.scaling.factor 1e-30 made 1e30).
    // Below float's normal range (llama.cpp computes theta in float) a frequency is 0 or a
    // subnormal: rope.scaling.factor 3e38 gave every frequency 0.
    if (!(inv >= std::numeric_limits<float>::min() && inv <= M_PI))
      throw Error("GGUF: frequency " + std::to_string(i) + " is " + format_number(inv) + " radians per position (from " +
                  r.arch + ".rope.freq_base, rope.scaling.factor " + format_number(r.factor) +
                  (ff ? " and " + r.freq_factors_tensor : std::string()) +
                  "); expected a value in [1.1754943508222875e-38, pi] (float32's normal range, llama.cpp's precision)");
    r.inv_freq.push_back(static_cast<float>(inv));
  }
  // The multiplier on cos and sin. ggml's rope_yarn multiplies attn_factor by 1 + 0.1 ln(1 / freq_scale)
  // whenever ext_factor != 0; the llama_context constructor replaces a YaRN model's attn_factor
  // (the yarn_attn_factor key is then unused) by get_mscale(factor, mscale) / get_mscale(factor,
  // mscale_all_dim) and divides ggml's term back out, then multiplies by rope.scaling.attn_factor.
  // mscale_all_dim is rope.scaling.yarn_log_multiplier; mscale is 1, except for deepseek2 with a
  // multiplier != 1, where it equals the multiplier (the converter writes 0.1 * mscale_all_dim there:
  // TAG_DEEPSEEK2_YARN_LOG_MUL_FIX). get_mscale(s, m) = s <= 1 ? 1 : 1 + 0.1 m ln s.
  if (r.ext_factor != 0) {
    auto get_mscale = [](double s, double m) { return s <= 1 ? 1.0 : 1 + 0.1 * m * std::log(s); };
    double yarn = get_mscale(r.factor, 1.0);
    if (log_mul != 0) {
      const double mscale = r.arch == "deepseek2" && log_mul != 1 ? log_mul : 1.0;
      yarn = get_mscale(r.factor, mscale) / get_mscale(r.factor, log_mul);
    }
    r.attention_factor = yarn * rope_attn_factor;
  } else {
    r.attention_factor = yarn_attn_factor * rope_attn_factor;
  }
  // Each factor is finite and > 0, their product need not be (attn_factor 3e38 was accepted). The
  // product multiplies cos and sin, hence every rotated q and k; llama.cpp keeps the rotated K in
  // its KV cache, F16 by default (llama_context_default_params: type_k GGML_TYPE_F16), so the
  // factor must lie in float16's normal range [2^-14, 65504]: above it every |k| >= 1 is inf
  // there, below it every |k| <= 1 is subnormal or 0 (issue 33, gguf-070).
  if (!(r.attention_factor >= 0x1p-14 && r.attention_factor <= 65504))
    throw Error("GGUF: the attention factor on cos/sin is " + format_number(r.attention_factor) + " (" + r.arch +
                ".rope.scaling.attn_factor " + format_number(rope_attn_factor) +
                (r.ext_factor != 0 ? " times the YaRN mscale" : " times yarn_attn_factor " + format_number(yarn_attn_factor)) +
                "); expected a value in [6.103515625e-05, 65504], float16's normal range (llama.cpp's default KV cache "
                "holds the rotated K in F16)");
  r.attn_factor = rope_attn_factor;
  r.log_multiplier = log_mul;
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
    differ(a + (g.ext_factor != 0 && g.log_multiplier != 0 ? "rope.scaling.yarn_log_multiplier" : "rope.scaling.attn_factor"),
           "attention factor on cos/sin: llama.cpp " + format_number(g.attention_factor) +
                                               ", HF " + format_number(s.attention_factor));
  return out;
}

}  // namespace posenc
