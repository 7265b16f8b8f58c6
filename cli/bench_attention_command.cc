// posenc bench attention: the fused kernel vs the materialising libtorch path vs BLAS, one run.
#include "commands.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "posenc_bench/attention_bench.h"
#include "options.h"

namespace posenc::cli {

void add_bench_attention_command(CLI::App* bench) {
  struct Args {
    bench::AttentionBenchConfig config;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  bench::AttentionBenchConfig& c = a->config;
  CLI::App* cmd = bench->add_subcommand(
      "attention", "fused attention (positions on the fly) vs libtorch's scores + bias + softmax, and vs BLAS of equal FLOPs");
  cmd->add_option("--seq", c.seq, "tokens (S = T, prefill)")->capture_default_str();
  add_heads_option(cmd, c.heads, "query heads")->capture_default_str();
  add_kv_heads_option(cmd, c.kv_heads, "key/value heads (0: --heads)")->capture_default_str();
  add_head_dim_option(cmd, c.head_dim, "head dimension")->capture_default_str();
  add_scheme_option(cmd, c.scheme, "none, rope, alibi or t5")->capture_default_str();
  cmd->add_option("--causal", c.causal, "causal mask (true/false)")->capture_default_str();
  add_repeats_option(cmd, c.repeats, "timed runs each (median)")->capture_default_str();
  add_threads_option(cmd, c.threads, "threads for posenc and libtorch (0: torch's default)");
  cmd->add_flag("--backward", c.backward,
                "also time forward + backward: posenc's autograd op against libtorch autograd through the materialising path");
  add_json_flag(cmd, a->json);
  cmd->callback([a] {
    const bench::AttentionBenchConfig& c = a->config;
    const auto r = bench::run_attention_bench(c);
    if (a->json) {
      const nlohmann::json j = {{"seq", c.seq}, {"heads", c.heads}, {"kv_heads", c.kv_heads > 0 ? c.kv_heads : c.heads},
                                {"head_dim", c.head_dim}, {"scheme", c.scheme}, {"causal", c.causal}, {"threads", r.threads},
                                {"target", r.target}, {"posenc_seconds", r.posenc_seconds}, {"torch_seconds", r.torch_seconds},
                                {"speedup", r.speedup}, {"posenc_gflops", r.posenc_gflops}, {"gemm_gflops", r.gemm_gflops},
                                {"fraction_of_gemm", r.fraction_of_gemm}, {"extra_bytes", r.extra_bytes},
                                {"torch_extra_bytes", r.torch_extra_bytes}, {"max_rel_error", r.max_rel_error}};
      nlohmann::json out = j;
      if (!r.torch_skipped.empty()) {
        out["torch_seconds"] = nullptr;
        out["speedup"] = nullptr;
        out["torch_skipped"] = r.torch_skipped;
      }
      if (c.backward) {
        const bench::AttentionBackwardResult& b = r.backward;
        nlohmann::json back = {{"posenc_seconds", b.posenc_seconds}, {"torch_seconds", b.torch_seconds}, {"speedup", b.speedup},
                               {"max_rel_error", b.max_rel_error}};
        if (!b.torch_skipped.empty()) {
          back["torch_seconds"] = back["speedup"] = back["max_rel_error"] = nullptr;
          back["torch_skipped"] = b.torch_skipped;
        }
        out["backward"] = back;  // forward + backward
      }
      std::cout << out.dump() << "\n";
      return;
    }
    std::printf("attention %s%s: [%d tokens, %d heads (%d kv), %d] threads %d, target %s, median of %d\n", c.scheme.c_str(),
                c.causal ? " causal" : "", c.seq, c.heads, c.kv_heads > 0 ? c.kv_heads : c.heads, c.head_dim, r.threads,
                r.target.c_str(), c.repeats);
    std::printf("  posenc  %9.3f ms  %6.1f GFLOP/s  extra memory %.2f MiB\n", r.posenc_seconds * 1e3, r.posenc_gflops,
                r.extra_bytes / 1048576.0);
    if (r.torch_skipped.empty())
      std::printf("  libtorch%9.3f ms  (scores, bias, softmax: %.0f MiB)  speed-up %.2fx\n", r.torch_seconds * 1e3,
                  r.torch_extra_bytes / 1048576.0, r.speedup);
    else
      std::printf("  libtorch: %s\n", r.torch_skipped.c_str());
    std::printf("  gemm    %6.1f GFLOP/s  fraction_of_gemm %.2f\n", r.gemm_gflops, r.fraction_of_gemm);
    std::printf("  max_rel_error %.2e (last 8 queries against the reference)\n", r.max_rel_error);
    if (!c.backward) return;
    const bench::AttentionBackwardResult& b = r.backward;
    std::printf("forward + backward (dq, dk, dv%s):\n", c.scheme == "t5" ? ", T5 table" : "");
    std::printf("  posenc  %9.3f ms\n", b.posenc_seconds * 1e3);
    if (b.torch_skipped.empty())
      std::printf("  libtorch%9.3f ms  (autograd through scores, bias, softmax)  speed-up %.2fx  max_rel_error %.2e vs libtorch\n",
                  b.torch_seconds * 1e3, b.speedup, b.max_rel_error);
    else
      std::printf("  libtorch: %s\n", b.torch_skipped.c_str());
  });
}

}  // namespace posenc::cli
