#include "commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc_bench/rope_bench.h"
#include "options.h"
#ifdef POSENC_WITH_TORCH
#include "lab_options.h"
#include "posenc_bench/train_bench.h"
#endif

namespace posenc::cli {
#ifdef POSENC_WITH_TORCH
namespace {

// `bench train --nproc N`: rank 0 prints, the other ranks stay silent.
void print_data_parallel(const bench::DataParallelResult& r, const bench::TrainBenchConfig& c, const lab::LaunchConfig& launch,
                         bool json) {
  if (!lab::is_primary(launch)) return;
  if (json) {
    nlohmann::json j = {{"world_size", r.world_size}, {"threads_per_rank", r.threads_per_rank}, {"single_process_threads", r.single_threads},
                        {"steps", c.steps}, {"model", {{"layers", c.layers}, {"d_model", c.d_model}, {"heads", c.heads}, {"seq", c.seq},
                                                       {"batch", c.batch}}}};
    for (const auto& s : r.schemes)
      j["schemes"].push_back({{"scheme", s.scheme}, {"tokens_per_second", s.tokens_per_second},
                              {"single_process_tokens_per_second", s.single_tokens_per_second}, {"ratio", s.ratio},
                              {"step_seconds", s.step_seconds}, {"single_process_step_seconds", s.single_step_seconds},
                              {"allreduce_seconds_per_step", s.allreduce_seconds_per_step}});
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("data parallel training step, %d layers, d_model %d, %d heads, seq %d, global batch %d, %d steps:\n", c.layers,
              c.d_model, c.heads, c.seq, c.batch, c.steps);
  std::printf("  %d ranks x %d thread%s vs one process with %d threads\n", r.world_size, r.threads_per_rank,
              r.threads_per_rank > 1 ? "s" : "", r.single_threads);
  for (const auto& s : r.schemes)
    std::printf("  %-11s %9.0f tokens/s on %d ranks  %9.0f tokens/s in one process  ratio %.2f  all-reduce %.2f ms/step\n",
                s.scheme.c_str(), s.tokens_per_second, r.world_size, s.single_tokens_per_second, s.ratio,
                s.allreduce_seconds_per_step * 1e3);
}

}  // namespace
#endif  // POSENC_WITH_TORCH

void add_bench_command(CLI::App& app) {
  struct Args {
    bench::RopeBenchConfig config;
    std::string memory = "bshd";
    bool table = false, on_the_fly = false, json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* bench = app.add_subcommand("bench", "benchmarks (median of interleaved runs, ratios measured in the same run)");
  bench->require_subcommand(1);
  CLI::App* rope = bench->add_subcommand("rope", "rotate q and k in place: GB/s against the memory ceiling");
  bench::RopeBenchConfig& c = a->config;
  add_tokens_option(rope, c.tokens, "tokens")->capture_default_str();
  add_heads_option(rope, c.heads, "q heads")->capture_default_str();
  add_kv_heads_option(rope, c.kv_heads, "k heads")->capture_default_str();
  add_head_dim_option(rope, c.head_dim, "head dimension")->capture_default_str();
  add_enum_option(rope, "--dtype", c.dtype, "storage dtype of q and k");
  add_enum_option(rope, "--layout", c.layout, "channel pairing");
  add_threads_option(rope, c.threads, "threads (0: all)");
  rope->add_option("--memory", a->memory, "storage order of q and k: bshd or bhsd")->capture_default_str();
  add_repeats_option(rope, c.repeats, "interleaved runs; the median is reported (>= 7)")->capture_default_str();
  rope->add_flag("--table", a->table, "cos/sin from a precomputed table (default)");
  rope->add_flag("--on-the-fly", a->on_the_fly, "cos/sin computed per token (accurate angles)");
  rope->add_option("--target", c.target, "SIMD target for the kernel and the ceiling, one of: " + bench::available_targets() +
                                             " (default: the best)");
  rope->add_flag("--xpos", c.xpos, "also time xPos (scale_base 512, centre tokens/2) in the same run: its time over plain RoPE's");
  add_json_flag(rope, a->json);
  rope->callback([a] {
    bench::RopeBenchConfig c = a->config;
    if (a->table && a->on_the_fly) throw Error("--table and --on-the-fly exclude each other");
    if (a->memory != "bshd" && a->memory != "bhsd") throw Error("--memory must be bshd or bhsd, got '" + a->memory + "'");
    c.head_major = a->memory == "bhsd";
    c.table = !a->on_the_fly;
    if (c.repeats < 7) throw Error("--repeats must be >= 7 (the median of at least 7 runs), got " + std::to_string(c.repeats));
    const bench::RopeBenchResult r = bench::run_rope_bench(c);
    if (a->json) {
      nlohmann::json j = {{"tokens", c.tokens}, {"heads", c.heads}, {"kv_heads", c.kv_heads}, {"head_dim", c.head_dim},
                          {"dtype", to_string(c.dtype)}, {"layout", to_string(c.layout)}, {"memory", a->memory}, {"mode", c.table ? "table" : "on-the-fly"},
                          {"threads", r.threads}, {"ceiling_threads", r.ceiling_threads}, {"target", r.target}, {"repeats", c.repeats},
                          {"seconds", r.seconds}, {"gbps", r.gbps}, {"ceiling_gbps", r.ceiling_gbps},
                          {"fraction_of_ceiling", r.fraction_of_ceiling}, {"ns_per_element", r.ns_per_element},
                          {"elements_per_second", 1e9 / r.ns_per_element},
                          {"f32_ns_per_element", r.f32_ns_per_element}, {"rate_vs_f32", r.rate_vs_f32}};
      if (c.dtype == DType::kBF16) j["bf16_narrowing"] = r.native_bf16 ? "instruction" : "emulated";
      j["prefetch"] = r.prefetch;
      j["prefetch_settled"] = r.prefetch_settled;
      j["prefetch_measured_from_bytes"] = r.prefetch_measured_from_bytes;
      if (c.xpos) {
        j["xpos_seconds"] = r.xpos_seconds;
        j["xpos_over_rope"] = r.xpos_over_rope;
      }
      std::cout << j.dump() << "\n";
    } else {
      std::printf("rope %s %s %s %s: [%d tokens, %d + %d heads, %d] threads %d, target %s, median of %d\n", to_string(c.dtype),
                  to_string(c.layout), a->memory.c_str(), c.table ? "table" : "on-the-fly", c.tokens, c.heads, c.kv_heads,
                  c.head_dim, r.threads, r.target.c_str(), c.repeats);
      std::printf("  kernel   %8.3f ms  %7.2f GB/s  %.3f ns/element\n", r.seconds * 1e3, r.gbps, r.ns_per_element);
      std::printf("  ceiling  %8.3f ms  %7.2f GB/s  (in-place read-modify-write of the same bytes, %d thread%s)\n",
                  r.ceiling_seconds * 1e3, r.ceiling_gbps, r.ceiling_threads, r.ceiling_threads > 1 ? "s" : "");
      std::printf("  fraction_of_ceiling %.3f\n", r.fraction_of_ceiling);
      if (r.prefetch_settled)
        std::printf("  prefetch %s (measured on this run's first calls, or POSENC_ROPE_PREFETCH)\n", r.prefetch.c_str());
      else
        std::printf("  prefetch %s (the default: calls under %.0f MiB are not measured)\n", r.prefetch.c_str(),
                    static_cast<double>(r.prefetch_measured_from_bytes) / (1 << 20));
      if (c.dtype != DType::kF32)
        std::printf("  float32  %.3f ns/element (same shape, same run): %s is %.2fx its element rate%s\n", r.f32_ns_per_element,
                    to_string(c.dtype), r.rate_vs_f32,
                    c.dtype == DType::kBF16 ? (r.native_bf16 ? "; bf16 narrowed by the CPU's instruction" : "; bf16 narrowing emulated") : "");
      if (c.xpos)
        std::printf("  xPos     %8.3f ms  %.3fx plain RoPE's time (same run, interleaved)\n", r.xpos_seconds * 1e3,
                    r.xpos_over_rope);
    }
  });

#ifdef POSENC_WITH_TORCH
  struct TrainArgs {
    bench::TrainBenchConfig config;
    lab::LaunchConfig launch;
    std::string schemes;
    CLI::Option* schemes_option = nullptr;
    bool json = false;
  };
  auto t = std::make_shared<TrainArgs>();
  CLI::App* train = bench->add_subcommand("train", "training step tokens/s per scheme; fused RoPE forward+backward vs eager");
  t->schemes_option = add_schemes_option(train, t->schemes, "comma-separated schemes (default: all language-model schemes)");
  add_steps_option(train, t->config.steps, "timed steps per scheme (median)")->capture_default_str();
  add_tokens_option(train, t->config.seq, "tokens per training row")->capture_default_str();
  train->add_option("--batch", t->config.batch, "rows per step")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  add_threads_option(train, t->config.threads, "torch threads (0: default; with --nproc, per rank, 0: one)");
  add_json_flag(train, t->json);
  add_launch_options(train, &t->launch);
  train->callback([t] {
    if (t->launch.distribute == "models")
      throw Error("bench train times data parallelism; --distribute models has no training step to time (leave it out)");
    if (t->launch.nproc > t->config.batch)  // refused here, before --nproc starts a rank for each
      throw Error("bench train: --nproc " + std::to_string(t->launch.nproc) + " ranks cannot share --batch " +
                  std::to_string(t->config.batch) + " rows; give --nproc <= --batch");
    if (launched_local_ranks(&t->launch, t->config.batch, "")) return;
    bench::TrainBenchConfig c = t->config;
    if (t->schemes_option->count() > 0) {  // given but empty ('' or 'rope,,alibi') is a mistake, not "all"
      c.schemes.clear();
      std::size_t start = 0;
      while (start <= t->schemes.size()) {
        const auto comma = t->schemes.find(',', start);
        c.schemes.push_back(t->schemes.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (c.schemes.back().empty())
          throw Error("--schemes '" + t->schemes + "' has an empty name; give comma-separated schemes, or leave --schemes out for all");
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
    if (lab::world_size_of(t->launch) > 1) {
      if (t->schemes_option->count() == 0) c.schemes = {"rope"};
      print_data_parallel(bench::run_data_parallel_bench(c, t->launch), c, t->launch, t->json);
      return;
    }
    const auto r = bench::run_train_bench(c);
    if (t->json) {
      nlohmann::json j = {{"threads", r.threads}, {"model", {{"layers", c.layers}, {"d_model", c.d_model}, {"heads", c.heads},
                                                           {"seq", c.seq}, {"batch", c.batch}}}};
      for (const auto& s : r.schemes)
        j["schemes"].push_back({{"scheme", s.scheme}, {"step_seconds", s.step_seconds}, {"tokens_per_second", s.tokens_per_second},
                                {"fused_step_seconds", s.fused_step_seconds}, {"fused_speedup", s.fused_speedup}});
      for (const auto& s : r.rope)
        j["rope_forward_backward"].push_back({{"shape", s.shape}, {"fused_seconds", s.fused_seconds},
                                              {"eager_seconds", s.eager_seconds}, {"speedup", s.speedup}});
      std::cout << j.dump() << "\n";
      return;
    }
    std::printf("training step, %d layers, d_model %d, %d heads, seq %d, batch %d, %d threads (median of %d)\n", c.layers,
                c.d_model, c.heads, c.seq, c.batch, r.threads, c.steps);
    for (const auto& s : r.schemes)
      if (s.fused_step_seconds > 0)
        std::printf("  %-11s %8.1f ms/step  %9.0f tokens/s   fused attention %8.1f ms/step  speed-up %.2fx\n", s.scheme.c_str(),
                    s.step_seconds * 1e3, s.tokens_per_second, s.fused_step_seconds * 1e3, s.fused_speedup);
      else
        std::printf("  %-11s %8.1f ms/step  %9.0f tokens/s\n", s.scheme.c_str(), s.step_seconds * 1e3, s.tokens_per_second);
    std::printf("RoPE forward + backward, fused kernel vs libtorch eager (x*cos + rotate_half(x)*sin):\n");
    for (const auto& s : r.rope)
      std::printf("  %-20s fused %8.3f ms  eager %8.3f ms  speed-up %.1fx\n", s.shape.c_str(), s.fused_seconds * 1e3,
                  s.eager_seconds * 1e3, s.speedup);
  });
  add_bench_attention_command(bench);
#endif  // POSENC_WITH_TORCH
}

}  // namespace posenc::cli
