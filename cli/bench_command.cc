#include "bench_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc/rope_bench.h"

namespace posenc::cli {

void add_bench_command(CLI::App& app) {
  struct Args {
    RopeBenchConfig config;
    std::string dtype = "f32", layout = "half";
    bool table = false, on_the_fly = false, json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* bench = app.add_subcommand("bench", "benchmarks (median of interleaved runs, ratios measured in the same run)");
  bench->require_subcommand(1);
  CLI::App* rope = bench->add_subcommand("rope", "rotate q and k in place: GB/s against the memory ceiling");
  RopeBenchConfig& c = a->config;
  rope->add_option("--tokens", c.tokens, "tokens")->capture_default_str();
  rope->add_option("--heads", c.heads, "q heads")->capture_default_str();
  rope->add_option("--kv-heads", c.kv_heads, "k heads")->capture_default_str();
  rope->add_option("--head-dim", c.head_dim, "head dimension")->capture_default_str();
  rope->add_option("--dtype", a->dtype, "storage: f32, bf16 or f16")->capture_default_str();
  rope->add_option("--layout", a->layout, "half or interleaved")->capture_default_str();
  rope->add_option("--threads", c.threads, "threads (0: all)")->capture_default_str();
  rope->add_option("--repeats", c.repeats, "interleaved runs; the median is reported (>= 7)")->capture_default_str();
  rope->add_flag("--table", a->table, "cos/sin from a precomputed table (default)");
  rope->add_flag("--on-the-fly", a->on_the_fly, "cos/sin computed per token (accurate angles)");
  rope->add_flag("--json", a->json, "one JSON object on stdout");
  rope->callback([a] {
    RopeBenchConfig c = a->config;
    if (a->dtype == "f32") c.dtype = DType::kF32;
    else if (a->dtype == "bf16") c.dtype = DType::kBF16;
    else if (a->dtype == "f16") c.dtype = DType::kF16;
    else throw Error("--dtype must be f32, bf16 or f16, got '" + a->dtype + "'");
    if (a->layout == "half") c.layout = RopeLayout::kHalfSplit;
    else if (a->layout == "interleaved") c.layout = RopeLayout::kInterleaved;
    else throw Error("--layout must be half or interleaved, got '" + a->layout + "'");
    if (a->table && a->on_the_fly) throw Error("--table and --on-the-fly exclude each other");
    c.table = !a->on_the_fly;
    if (c.repeats < 7) throw Error("--repeats must be >= 7 (the median of at least 7 runs), got " + std::to_string(c.repeats));
    const RopeBenchResult r = run_rope_bench(c);
    if (a->json) {
      nlohmann::json j = {{"tokens", c.tokens}, {"heads", c.heads}, {"kv_heads", c.kv_heads}, {"head_dim", c.head_dim},
                          {"dtype", a->dtype}, {"layout", a->layout}, {"mode", c.table ? "table" : "on-the-fly"},
                          {"threads", r.threads}, {"target", r.target}, {"repeats", c.repeats},
                          {"seconds", r.seconds}, {"gbps", r.gbps}, {"ceiling_gbps", r.ceiling_gbps},
                          {"fraction_of_ceiling", r.fraction_of_ceiling}, {"ns_per_element", r.ns_per_element},
                          {"elements_per_second", 1e9 / r.ns_per_element}};
      std::cout << j.dump() << "\n";
    } else {
      std::printf("rope %s %s %s: [%d tokens, %d + %d heads, %d] threads %d, target %s, median of %d\n", a->dtype.c_str(),
                  a->layout.c_str(), c.table ? "table" : "on-the-fly", c.tokens, c.heads, c.kv_heads, c.head_dim, r.threads,
                  r.target.c_str(), c.repeats);
      std::printf("  kernel   %8.3f ms  %7.2f GB/s  %.3f ns/element\n", r.seconds * 1e3, r.gbps, r.ns_per_element);
      std::printf("  ceiling  %8.3f ms  %7.2f GB/s  (in-place read-modify-write of the same bytes)\n",
                  r.ceiling_seconds * 1e3, r.ceiling_gbps);
      std::printf("  fraction_of_ceiling %.3f\n", r.fraction_of_ceiling);
    }
  });
}

}  // namespace posenc::cli
