// llama.cpp's CPU attention, ggml_flash_attn_ext, on the shapes of `posenc bench attention`:
// prefill S = T, H query heads, Hk kv heads (GQA), head dim D, causal, ALiBi through max_bias,
// scale 1/sqrt(D). Prints one JSON object. Optional: built by run.sh against a llama.cpp tree,
// never by the posenc build.
//
// How llama.cpp calls it (src/llama-graph.cpp, src/llama-kv-cache.cpp), and so how this does:
//   q, k, v are [B, S, H, D] in memory (as posenc's) and reach the op as permuted views
//   (ggml ne = [D, S, H, 1]); the output is [D, H, S, 1] contiguous, i.e. [B, S, H, D] again.
//   The mask is an F16 tensor [T, S] (ggml ne order; broadcast over heads) holding, for query i
//   and key j, -INF where j may not be seen and otherwise 0, or the ALiBi position term
//   -|i - j| when ALiBi is on; the kernel multiplies the mask value by the head's slope
//   (ggml-cpu/ops.cpp), so max_bias = 8 with that mask is ALiBi with slopes
//   h < n: m0^(h+1), else m1^(2(h-n)+1), n = 2^floor(log2 H), m0 = 2^(-8/n), m1 = 2^(-4/n),
//   which is 2^(-8(h+1)/H) for power-of-two H and the paper's rule otherwise (posenc alibi.h).
//   llama.cpp itself casts F32 K/V to F16 before the op (build_attn_mha); the CPU kernel also
//   takes F32 K/V, so --kv-type f32 gives it posenc's inputs and --kv-type f16 what llama.cpp runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"

#ifndef LLAMA_CPP_COMMIT
#define LLAMA_CPP_COMMIT "unknown"
#endif
#ifndef LLAMA_CPP_TAG
#define LLAMA_CPP_TAG ""
#endif

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "flash_attn_bench: %s\n", message.c_str());
  std::exit(2);
}

struct Config {
  int seq = 4096, heads = 8, kv_heads = 0, head_dim = 64;
  int threads = 0;  // 0: std::thread::hardware_concurrency()
  int repeats = 3;
  bool alibi = true, causal = false;  // posenc bench attention's defaults: ALiBi, bidirectional
  ggml_type kv_type = GGML_TYPE_F32;
};

const char* usage =
    "usage: flash_attn_bench [--seq S] [--heads H] [--kv-heads K] [--head-dim D] [--threads T]\n"
    "                        [--repeats R] [--kv-type f32|f16] [--no-alibi] [--scheme alibi|none]\n"
    "                        [--causal [true|false]] [--json]\n"
    "  ggml_flash_attn_ext on the CPU, S = T (prefill), f32 q, K/V as --kv-type; prints JSON.\n"
    "  Defaults: S 4096, H 8, K = H, D 64, T = hardware threads, R 3, f32, ALiBi, bidirectional\n"
    "  (posenc bench attention's; --causal alone is its flag, true or false may follow).\n";

int parse_int(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < -1000000000L || v > 1000000000L)
    fail(flag + " needs an integer, got '" + value + "'");
  return static_cast<int>(v);
}

bool parse_bool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  fail(flag + " needs true or false, got '" + value + "'");
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag.rfind("-", 0) != 0) {
      const bool after_causal = i > 1 && std::string(argv[i - 1]) == "--causal";
      fail("unexpected argument '" + flag + "'" + (after_causal ? " (--causal takes true or false, or nothing)" : "") + "\n" + usage);
    }
    bool has_value = false;
    // --causal is a flag, as in posenc bench attention; "--causal true|false" (this harness's
    // earlier form) is still read.
    const std::string next = i + 1 < argc ? argv[i + 1] : "";
    const bool bool_next = next == "true" || next == "false" || next == "1" || next == "0";
    const bool takes_value = flag != "--no-alibi" && flag != "--json" && flag != "--help" && flag != "-h" && (flag != "--causal" || bool_next);
    if (const auto eq = flag.find('='); eq != std::string::npos && flag.rfind("--", 0) == 0) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    } else if (takes_value) {
      if (i + 1 >= argc) fail(flag + " needs a value\n" + usage);
      value = argv[++i];
      has_value = true;
    }
    if (has_value && (flag == "--no-alibi" || flag == "--json" || flag == "--help" || flag == "-h"))
      fail(flag + " takes no value, got '" + value + "'");
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else if (flag == "--seq") {
      c.seq = parse_int(flag, value);
    } else if (flag == "--heads") {
      c.heads = parse_int(flag, value);
    } else if (flag == "--kv-heads") {
      c.kv_heads = parse_int(flag, value);
    } else if (flag == "--head-dim") {
      c.head_dim = parse_int(flag, value);
    } else if (flag == "--threads") {
      c.threads = parse_int(flag, value);
    } else if (flag == "--repeats") {
      c.repeats = parse_int(flag, value);
    } else if (flag == "--kv-type") {
      if (value == "f32") c.kv_type = GGML_TYPE_F32;
      else if (value == "f16") c.kv_type = GGML_TYPE_F16;
      else fail("--kv-type must be f32 or f16, got '" + value + "'");
    } else if (flag == "--no-alibi") {
      c.alibi = false;
    } else if (flag == "--scheme") {  // posenc's flag; ggml's kernel has no RoPE or T5 inside
      if (value == "alibi") c.alibi = true;
      else if (value == "none") c.alibi = false;
      else fail("--scheme must be alibi or none here (flash_attn_ext has no RoPE or T5 inside), got '" + value + "'");
    } else if (flag == "--causal") {
      c.causal = has_value ? parse_bool(flag, value) : true;
    } else if (flag == "--json") {
      // always JSON; accepted so that posenc's arguments can be passed unchanged
    } else {
      fail("unknown argument '" + flag + "'\n" + usage);
    }
  }
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.threads == 0) c.threads = std::max(1u, std::thread::hardware_concurrency());
  if (c.seq < 8 || c.seq > 65536) fail("--seq must be in [8, 65536], got " + std::to_string(c.seq));
  if (c.heads < 1 || c.heads > 256 || c.kv_heads < 1 || c.heads % c.kv_heads != 0)
    fail("--heads (1..256) must be a multiple of --kv-heads, got " + std::to_string(c.heads) + " and " +
         std::to_string(c.kv_heads));
  if (c.head_dim < 2 || c.head_dim > 512 || c.head_dim % 2)
    fail("--head-dim must be even, in [2, 512], got " + std::to_string(c.head_dim));
  if (c.threads < 1 || c.threads > 1024) fail("--threads must be in [1, 1024]");
  if (c.repeats < 1 || c.repeats > 100) fail("--repeats must be in [1, 100]");
  return c;
}

// The ALiBi paper's slopes in double, as posenc's alibi_slopes (core/src/alibi.cc).
std::vector<double> paper_slopes(int heads) {
  int c = 1;
  while (c * 2 <= heads) c *= 2;
  std::vector<double> s;
  for (int h = 1; h <= c; ++h) s.push_back(std::exp2(-8.0 * h / c));
  for (int h = 1; static_cast<int>(s.size()) < heads; h += 2) s.push_back(std::exp2(-8.0 * h / (2 * c)));
  return s;
}

// ggml's slopes, its float arithmetic copied from ggml-cpu/ops.cpp (flash_attn_ext).
std::vector<float> ggml_slopes(int heads, float max_bias) {
  const uint32_t n_head_log2 = 1u << static_cast<uint32_t>(std::floor(std::log2(heads)));
  const float m0 = powf(2.0f, -(max_bias) / n_head_log2);
  const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
  std::vector<float> s;
  for (uint32_t h = 0; h < static_cast<uint32_t>(heads); ++h)
    s.push_back(max_bias > 0.0f ? h < n_head_log2 ? powf(m0, h + 1) : powf(m1, 2 * (h - n_head_log2) + 1) : 1.0f);
  return s;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// softmax(q k^T * scale + bias + mask) v in double for the last `tail` queries, into ref
// ([tail, H, D]). bias(h, i, j) returns the additive term, -INFINITY for a masked pair.
template <typename Bias>
void reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int S, int H,
               int Hk, int D, int tail, Bias bias, std::vector<double>& ref) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  ref.assign(static_cast<std::size_t>(tail) * H * D, 0.0);
  std::vector<double> p(static_cast<std::size_t>(S));
  for (int t = 0; t < tail; ++t) {
    const int i = S - tail + t;
    for (int h = 0; h < H; ++h) {
      const int hk = h / (H / Hk);
      const float* qi = &q[(static_cast<std::size_t>(i) * H + h) * D];
      double m = -INFINITY;
      for (int j = 0; j < S; ++j) {
        const double b = bias(h, i, j);
        if (b == -INFINITY) {
          p[j] = -INFINITY;
          continue;
        }
        const float* kj = &k[(static_cast<std::size_t>(j) * Hk + hk) * D];
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += static_cast<double>(qi[d]) * kj[d];
        p[j] = dot * scale + b;
        m = std::max(m, p[j]);
      }
      double sum = 0;
      for (int j = 0; j < S; ++j) sum += p[j] = p[j] == -INFINITY ? 0.0 : std::exp(p[j] - m);
      double* out = &ref[(static_cast<std::size_t>(t) * H + h) * D];
      for (int j = 0; j < S; ++j) {
        if (p[j] == 0.0) continue;
        const float* vj = &v[(static_cast<std::size_t>(j) * Hk + hk) * D];
        for (int d = 0; d < D; ++d) out[d] += p[j] / sum * vj[d];
      }
    }
  }
}

// posenc's measure: max |got - ref| / max |ref| over the tail.
double max_rel_error(const float* got, const std::vector<double>& ref) {
  double err = 0, mag = 0;
  for (std::size_t n = 0; n < ref.size(); ++n) {
    err = std::max(err, std::abs(got[n] - ref[n]));
    mag = std::max(mag, std::abs(ref[n]));
  }
  return err / mag;
}

std::string cpu_features() {
  std::string s;
  const auto add = [&](int has, const char* name) {
    if (has) s += (s.empty() ? "" : " ") + std::string(name);
  };
  add(ggml_cpu_has_avx2(), "AVX2");
  add(ggml_cpu_has_fma(), "FMA");
  add(ggml_cpu_has_f16c(), "F16C");
  add(ggml_cpu_has_avx512(), "AVX512");
  add(ggml_cpu_has_avx512_bf16(), "AVX512_BF16");
  add(ggml_cpu_has_neon(), "NEON");
  add(ggml_cpu_has_sve(), "SVE");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = parse(argc, argv);
  const int S = c.seq, H = c.heads, Hk = c.kv_heads, D = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float max_bias = c.alibi ? 8.0f : 0.0f;
  const bool use_mask = c.alibi || c.causal;  // no ALiBi, not causal: nothing to mask, no mask

  // Inputs as posenc's bench draws them: standard normal, [1, S, heads, D].
  std::mt19937_64 rng(0);
  std::normal_distribution<float> normal;
  std::vector<float> q(static_cast<std::size_t>(S) * H * D), k(static_cast<std::size_t>(S) * Hk * D),
      v(static_cast<std::size_t>(S) * Hk * D);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = normal(rng);

  const std::size_t kv_size = ggml_type_size(c.kv_type);
  const std::size_t mask_bytes = use_mask ? static_cast<std::size_t>(S) * S * sizeof(ggml_fp16_t) : 0;
  const std::size_t mem = q.size() * 4 * 2 + k.size() * kv_size * 2 + mask_bytes + 16 * ggml_tensor_overhead() +
                          ggml_graph_overhead() + (1 << 20);
  ggml_init_params init{mem, nullptr, false};
  ggml_context* ctx = ggml_init(init);
  if (!ctx) fail("ggml_init failed for " + std::to_string(mem >> 20) + " MiB");

  ggml_tensor* q3 = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, H, S);  // [S, H, D] in memory
  ggml_tensor* k3 = ggml_new_tensor_3d(ctx, c.kv_type, D, Hk, S);
  ggml_tensor* v3 = ggml_new_tensor_3d(ctx, c.kv_type, D, Hk, S);
  std::memcpy(q3->data, q.data(), q.size() * 4);
  // The K/V the kernel reads, back in f32 (what the second reference sees).
  std::vector<float> k_seen = k, v_seen = v;
  if (c.kv_type == GGML_TYPE_F16) {
    ggml_fp32_to_fp16_row(k.data(), static_cast<ggml_fp16_t*>(k3->data), static_cast<int64_t>(k.size()));
    ggml_fp32_to_fp16_row(v.data(), static_cast<ggml_fp16_t*>(v3->data), static_cast<int64_t>(v.size()));
    ggml_fp16_to_fp32_row(static_cast<ggml_fp16_t*>(k3->data), k_seen.data(), static_cast<int64_t>(k.size()));
    ggml_fp16_to_fp32_row(static_cast<ggml_fp16_t*>(v3->data), v_seen.data(), static_cast<int64_t>(v.size()));
  } else {
    std::memcpy(k3->data, k.data(), k.size() * 4);
    std::memcpy(v3->data, v.data(), v.size() * 4);
  }

  // The mask as llama.cpp's KV cache writes it (llama_kv_cache::set_input_kq_mask): one
  // [T, S] F16 matrix for all heads; -INF hides a key, the ALiBi position term is -|i - j|.
  ggml_tensor* mask = nullptr;
  double mask_build_seconds = 0;
  if (use_mask) {
    mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, S, S);
    const double t0 = now_seconds();
    auto* m = static_cast<ggml_fp16_t*>(mask->data);
    for (int i = 0; i < S; ++i)
      for (int j = 0; j < S; ++j)
        m[static_cast<std::size_t>(i) * S + j] =
            ggml_fp32_to_fp16(c.causal && j > i ? -INFINITY : c.alibi ? -static_cast<float>(std::abs(i - j)) : 0.0f);
    mask_build_seconds = now_seconds() - t0;
  }

  ggml_tensor* qp = ggml_permute(ctx, q3, 0, 2, 1, 3);  // ne [D, S, H]: llama.cpp's build_attn_mha
  ggml_tensor* kp = ggml_permute(ctx, k3, 0, 2, 1, 3);
  ggml_tensor* vp = ggml_permute(ctx, v3, 0, 2, 1, 3);
  ggml_tensor* out = ggml_flash_attn_ext(ctx, qp, kp, vp, mask, scale, max_bias, 0.0f);  // ne [D, H, S]
  ggml_prec_set_acc(out, GGML_PREC_F32);  // as llama.cpp does; the CPU kernel accumulates in f32 either way
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);

  ggml_cplan plan = ggml_graph_plan(graph, c.threads, nullptr);
  std::vector<uint8_t> work(plan.work_size);
  plan.work_data = work.data();
  const auto run = [&] {
    const double t0 = now_seconds();
    if (ggml_graph_compute(graph, &plan) != GGML_STATUS_SUCCESS) fail("ggml_graph_compute failed");
    return now_seconds() - t0;
  };
  run();  // warm-up
  std::vector<double> times;
  for (int r = 0; r < c.repeats; ++r) times.push_back(run());
  std::sort(times.begin(), times.end());
  const double seconds = c.repeats % 2 ? times[c.repeats / 2] : 0.5 * (times[c.repeats / 2 - 1] + times[c.repeats / 2]);
  const double flops = 4.0 * H * static_cast<double>(S) * S * D * (c.causal ? 0.5 : 1.0);  // posenc's count

  // Accuracy on the last 8 queries. max_rel_error: against the exact definition with f32 inputs
  // (posenc's reference: bias -slope (i - j) causal, -slope |i - j| otherwise, the paper's slopes
  // in double). max_rel_error_same_inputs: against the inputs the kernel holds (f16-rounded K/V for
  // --kv-type f16, the f16 mask's distances, ggml's float slopes): the kernel's own arithmetic.
  const int tail = std::min(8, S);
  const auto* got = static_cast<const float*>(out->data) + static_cast<std::size_t>(S - tail) * H * D;
  const std::vector<double> slopes = paper_slopes(H);
  const std::vector<float> slopes_ggml = ggml_slopes(H, max_bias);
  std::vector<double> ref, ref_same;
  reference(q, k, v, S, H, Hk, D, tail,
            [&](int h, int i, int j) -> double {
              if (c.causal && j > i) return -INFINITY;
              return c.alibi ? -slopes[h] * std::abs(i - j) : 0.0;
            },
            ref);
  const auto* m = mask ? static_cast<const ggml_fp16_t*>(mask->data) : nullptr;
  reference(q, k_seen, v_seen, S, H, Hk, D, tail,
            [&](int h, int i, int j) -> double {
              if (!m) return 0.0;
              const float mv = ggml_fp16_to_fp32(m[static_cast<std::size_t>(i) * S + j]);
              return mv == -INFINITY ? -INFINITY : static_cast<double>(slopes_ggml[h] * mv);
            },
            ref_same);
  double slope_rel_diff = 0;
  if (c.alibi)
    for (int h = 0; h < H; ++h) slope_rel_diff = std::max(slope_rel_diff, std::abs(slopes_ggml[h] - slopes[h]) / slopes[h]);

  std::printf(
      "{\"seq\": %d, \"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, \"scheme\": \"%s\", \"causal\": %s, "
      "\"threads\": %d, \"kv_type\": \"%s\", \"q_type\": \"f32\", \"repeats\": %d, \"ggml_seconds\": %.6g, "
      "\"gflops\": %.4g, \"max_rel_error\": %.3g, \"max_rel_error_same_inputs\": %.3g, \"alibi_slope_max_rel_diff\": "
      "%.3g, \"mask_bytes\": %zu, \"mask_build_seconds\": %.4g, \"work_bytes\": %zu, \"llama_cpp_commit\": \"%s\", "
      "\"llama_cpp_tag\": \"%s\", \"ggml_version\": \"%s\", \"ggml_commit\": \"%s\", \"cpu_features\": \"%s\"}\n",
      S, H, Hk, D, c.alibi ? "alibi" : "none", c.causal ? "true" : "false", c.threads,
      c.kv_type == GGML_TYPE_F16 ? "f16" : "f32", c.repeats, seconds, flops / seconds / 1e9, max_rel_error(got, ref),
      max_rel_error(got, ref_same), slope_rel_diff, mask_bytes, mask_build_seconds, plan.work_size, LLAMA_CPP_COMMIT,
      LLAMA_CPP_TAG, ggml_version(), ggml_commit(), cpu_features().c_str());
  ggml_free(ctx);
  return 0;
}
