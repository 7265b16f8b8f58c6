// posenc bench attention: the fused kernel vs the materialising libtorch path vs BLAS, one run.
#include "commands.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "posenc_bench/attention_bench.h"
#include "posenc_bench/attention_decode_bench.h"
#include "posenc_bench/attention_positions.h"
#include "options.h"

namespace posenc::cli {

namespace {

struct BenchAttentionArgs {
  bench::AttentionBenchConfig config;
  bool json = false;
  bool decode = false;
  int keys = bench::DecodeBenchConfig{}.keys;
};

// --decode: the prefill options that mean the same (heads, kv heads, head dim, scheme, dtype,
// threads, repeats) and --keys.
void print_decode(const BenchAttentionArgs& a) {
  const bench::AttentionBenchConfig& c = a.config;
  bench::DecodeBenchConfig d;
  d.keys = a.keys;
  d.heads = c.heads;
  d.kv_heads = c.kv_heads;
  d.head_dim = c.head_dim;
  d.dtype = c.dtype;
  d.scheme = c.scheme;
  d.threads = c.threads;
  d.repeats = c.repeats;
  const bench::DecodeBenchResult r = bench::run_decode_bench(d);
  const int kv_heads = c.kv_heads > 0 ? c.kv_heads : c.heads;
  if (a.json) {
    nlohmann::json j = {{"decode", true}, {"keys", d.keys}, {"heads", c.heads}, {"kv_heads", kv_heads}, {"head_dim", c.head_dim},
                        {"scheme", c.scheme}, {"dtype", to_string(c.dtype)}, {"threads", r.threads}, {"target", r.target},
                        {"posenc_seconds", r.seconds}, {"kv_bytes", r.kv_bytes}, {"kv_gbps", r.kv_gbps}, {"read_gbps", r.read_gbps},
                        {"cache_flush_bytes", r.cache_flush_bytes},
                        {"fraction_of_memory_ceiling", r.fraction_of_memory_ceiling}, {"extra_bytes", r.extra_bytes},
                        {"max_rel_error", r.max_rel_error}};
    if (c.dtype != DType::kF32) {
      j["f32_seconds"] = r.f32_seconds;
      j["rate_vs_f32"] = r.rate_vs_f32;
    }
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("attention decode %s %s: 1 query over %d keys, %d heads (%d kv), %d; threads %d, target %s, median of %d\n",
              to_string(c.dtype), c.scheme.c_str(), d.keys, c.heads, kv_heads, c.head_dim, r.threads, r.target.c_str(), c.repeats);
  std::printf("  posenc  %9.3f ms  K and V %.1f MiB at %.1f GB/s  extra memory %.2f MiB\n", r.seconds * 1e3, r.kv_bytes / 1048576.0,
              r.kv_gbps, r.extra_bytes / 1048576.0);
  std::printf("  read    %.1f GB/s (a streaming read of the same bytes)  fraction_of_memory_ceiling %.2f\n", r.read_gbps,
              r.fraction_of_memory_ceiling);
  std::printf("  each timed call started cold: %.0f MiB read before it\n", r.cache_flush_bytes / 1048576.0);
  if (c.dtype != DType::kF32) std::printf("  f32     %9.3f ms  rate_vs_f32 %.2f\n", r.f32_seconds * 1e3, r.rate_vs_f32);
  std::printf("  max_rel_error %.2e (against the reference)\n", r.max_rel_error);
}

}  // namespace

void add_bench_attention_command(CLI::App* bench) {
  auto a = std::make_shared<BenchAttentionArgs>();
  bench::AttentionBenchConfig& c = a->config;
  CLI::App* cmd = bench->add_subcommand(
      "attention", "fused attention (positions on the fly) vs libtorch's scores + bias + softmax, and vs BLAS of equal FLOPs");
  cmd->add_option("--seq", c.seq, "tokens (S = T, prefill)")->capture_default_str();
  add_heads_option(cmd, c.heads, "query heads")->capture_default_str();
  add_kv_heads_option(cmd, c.kv_heads, "key/value heads (0: --heads)")->capture_default_str();
  add_head_dim_option(cmd, c.head_dim, "head dimension")->capture_default_str();
  add_scheme_option(cmd, c.scheme, "none, rope, alibi, t5, or a learned bias: kerple, sandwich, dpb, fire, fox (forward and "
                    "--backward; with ALiBi's time in the same run: rate_vs_alibi)")->capture_default_str();
  add_causal_flag(cmd, c.causal, "causal mask (default: bidirectional)");
  add_enum_option(cmd, "--dtype", c.dtype, "posenc's q, k, v storage; bf16/f16 also time f32 on the same shape (rate_vs_f32)");
  cmd->add_flag("--decode", a->decode,
                "one decode step: 1 query per sequence over --keys cached keys, K and V bytes/s against a streaming read of the "
                "same bytes with the same threads (fraction_of_memory_ceiling); core only, no libtorch");
  cmd->add_option("--keys", a->keys, "--decode: keys in the cache (T)")->capture_default_str();
  add_repeats_option(cmd, c.repeats, "timed runs each (median)")->capture_default_str();
  add_threads_option(cmd, c.threads, "threads for posenc and libtorch (0: torch's default)");
  cmd->add_flag("--backward", c.backward,
                "also time forward + backward: posenc's autograd op against libtorch autograd through the materialising path");
  add_json_flag(cmd, a->json);
  cmd->callback([a] {
    if (a->decode) return print_decode(*a);
    const bench::AttentionBenchConfig& c = a->config;
    const auto r = bench::run_attention_bench(c);
    if (a->json) {
      const nlohmann::json j = {{"seq", c.seq}, {"heads", c.heads}, {"kv_heads", c.kv_heads > 0 ? c.kv_heads : c.heads},
                                {"head_dim", c.head_dim}, {"scheme", c.scheme}, {"causal", c.causal}, {"threads", r.threads},
                                {"target", r.target}, {"posenc_seconds", r.posenc_seconds}, {"torch_seconds", r.torch_seconds},
                                {"speedup", r.speedup}, {"posenc_gflops", r.posenc_gflops}, {"gemm_gflops", r.gemm_gflops},
                                {"fraction_of_gemm", r.fraction_of_gemm}, {"square_gemm_gflops", r.square_gemm_gflops},
                                {"fraction_of_square_gemm", r.fraction_of_square_gemm}, {"blas_threads", r.blas_threads}, {"dtype", to_string(c.dtype)}, {"extra_bytes", r.extra_bytes},
                                {"torch_extra_bytes", r.torch_extra_bytes}, {"max_rel_error", r.max_rel_error}};
      nlohmann::json out = j;
      if (c.dtype != DType::kF32) {
        out["f32_seconds"] = r.f32_seconds;
        out["rate_vs_f32"] = r.rate_vs_f32;
      }
      if (r.alibi_seconds > 0) {
        out["alibi_seconds"] = r.alibi_seconds;
        out["rate_vs_alibi"] = r.rate_vs_alibi;
      }
      if (!r.torch_skipped.empty()) {
        out["torch_seconds"] = nullptr;
        out["speedup"] = nullptr;
        out["torch_skipped"] = r.torch_skipped;
      }
      if (c.backward) {
        const bench::AttentionBackwardResult& b = r.backward;
        nlohmann::json back = {{"posenc_seconds", b.posenc_seconds}, {"torch_seconds", b.torch_seconds}, {"speedup", b.speedup},
                               {"max_rel_error", b.max_rel_error}, {"backward_gflops", b.backward_gflops},
                               {"fraction_of_square_gemm", b.fraction_of_square_gemm}};
        if (b.alibi_seconds > 0) {
          back["alibi_seconds"] = b.alibi_seconds;
          back["rate_vs_alibi"] = b.rate_vs_alibi;
        }
        if (!b.torch_skipped.empty()) {
          back["torch_seconds"] = back["speedup"] = back["max_rel_error"] = nullptr;
          back["torch_skipped"] = b.torch_skipped;
        }
        out["backward"] = back;  // forward + backward
      }
      std::cout << out.dump() << "\n";
      return;
    }
    std::printf("attention %s %s%s: [%d tokens, %d heads (%d kv), %d] threads %d, target %s, median of %d\n", to_string(c.dtype), c.scheme.c_str(),
                c.causal ? " causal" : "", c.seq, c.heads, c.kv_heads > 0 ? c.kv_heads : c.heads, c.head_dim, r.threads,
                r.target.c_str(), c.repeats);
    std::printf("  posenc  %9.3f ms  %6.1f GFLOP/s  extra memory %.2f MiB\n", r.posenc_seconds * 1e3, r.posenc_gflops,
                r.extra_bytes / 1048576.0);
    if (r.torch_skipped.empty())
      std::printf("  libtorch%9.3f ms  (scores, bias, softmax: %.0f MiB)  speed-up %.2fx\n", r.torch_seconds * 1e3,
                  r.torch_extra_bytes / 1048576.0, r.speedup);
    else
      std::printf("  libtorch: %s\n", r.torch_skipped.c_str());
    if (c.dtype != DType::kF32)
      std::printf("  f32     %9.3f ms  rate_vs_f32 %.2f\n", r.f32_seconds * 1e3, r.rate_vs_f32);
    if (r.alibi_seconds > 0)
      std::printf("  alibi   %9.3f ms  rate_vs_alibi %.2f  (ALiBi's kernel, same tensors, same run)\n", r.alibi_seconds * 1e3,
                  r.rate_vs_alibi);
    std::printf("  gemm    %6.1f GFLOP/s  fraction_of_gemm %.2f  (q k^T and p v as batched products)\n", r.gemm_gflops, r.fraction_of_gemm);
    std::printf("  square gemm %6.1f GFLOP/s  fraction_of_square_gemm %.2f  (2048^3 float32; BLAS threads %d)\n", r.square_gemm_gflops,
                r.fraction_of_square_gemm, r.blas_threads);
    std::printf("  max_rel_error %.2e (last 8 queries against the reference)\n", r.max_rel_error);
    if (!c.backward) return;
    const bench::AttentionBackwardResult& b = r.backward;
    const char* bias_gradient = c.scheme == "t5" ? ", T5 table" : c.scheme == "fox" ? ", FoX's c" : bench::is_learned_bias_scheme(c.scheme) ? ", the distance table" : "";
    std::printf("forward + backward (dq, dk, dv%s):\n", bias_gradient);
    std::printf("  posenc  %9.3f ms  backward alone %.1f GFLOP/s  fraction_of_square_gemm %.2f  (2.5x the forward's FLOPs)\n",
                b.posenc_seconds * 1e3, b.backward_gflops, b.fraction_of_square_gemm);
    if (b.alibi_seconds > 0)
      std::printf("  alibi   %9.3f ms  rate_vs_alibi %.2f  (ALiBi's forward + backward, same tensors, same run)\n",
                  b.alibi_seconds * 1e3, b.rate_vs_alibi);
    if (b.torch_skipped.empty())
      std::printf("  libtorch%9.3f ms  (autograd through scores, bias, softmax)  speed-up %.2fx  max_rel_error %.2e vs libtorch\n",
                  b.torch_seconds * 1e3, b.speedup, b.max_rel_error);
    else
      std::printf("  libtorch: %s\n", b.torch_skipped.c_str());
  });
}

}  // namespace posenc::cli
