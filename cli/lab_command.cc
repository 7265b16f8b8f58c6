#include "lab_command.h"
#include "lab_passkey_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "launch_options.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/sort_task.h"
#include "ranges.h"

namespace posenc::cli {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

void add_lab_command(CLI::App& app) {
  struct Args {
    bool quick = false, full = false, json = false;
    std::optional<std::string> schemes, extensions;
    std::string eval_lens, out = "out/lab", corpus = lab::kDefaultCorpus;
    std::optional<int> train_len, steps, seed, threads;
    lab::LaunchConfig launch;
  };
  auto a = std::make_shared<Args>();
  CLI::App* lab_cmd = app.add_subcommand("lab", "experiments that train small transformers on this machine");
  lab_cmd->require_subcommand(1);
  CLI::App* ex = lab_cmd->add_subcommand("extrapolate", "train short, test long: bits per character per scheme and RoPE extension");
  ex->add_flag("--quick", a->quick, "the demo: nope, sinusoidal, rope (+ extensions), alibi; a few minutes (default)");
  ex->add_flag("--full", a->full, "every scheme, 3 seeds, RoPE base sweep, sinusoidal fusion modes");
  ex->add_option("--schemes", a->schemes, "comma-separated: nope, sinusoidal, learned, rope, alibi, t5, xl, deberta");
  ex->add_option("--extensions", a->extensions, "RoPE extensions: none, pi, ntk, dynamic, yarn");
  ex->add_option("--train-len", a->train_len, "training length (default 64)");
  ex->add_option("--eval-lens", a->eval_lens, "evaluation lengths (default 64,128,256,512,1024,2048,4096)");
  ex->add_option("--steps", a->steps, "training steps per model");
  ex->add_option("--seed", a->seed, "seed (--full uses 3 seeds from it)");
  ex->add_option("--threads", a->threads, "torch threads (default 1: measured faster than 2 for these small models; at most this machine's hardware threads)")
      ->check(CLI::Range(0, lab::max_lab_threads()));
  ex->add_option("--out", a->out, "output directory (checkpoints, results.json/.csv, chart.svg)")->capture_default_str();
  ex->add_option("--corpus", a->corpus, "UTF-8 text (default: the King James Bible made by `make corpus`)")->capture_default_str();
  ex->add_flag("--json", a->json, "one JSON object on stdout");
  add_launch_options(ex, &a->launch);
  ex->callback([a] {
    if (a->quick && a->full) throw Error("--quick and --full exclude each other");
    if (launched_local_ranks(&a->launch)) return;
    lab::ExtrapolateConfig c;
    c.launch = a->launch;
    c.out_dir = a->out;
    c.corpus = a->corpus;
    if (a->full) {
      c.schemes = {"nope", "sinusoidal", "learned", "rope", "alibi", "t5", "xl", "deberta"};
      c.rope_bases = {100, 1e6};  // with the default rope (base 10000): the base sweep
      c.fusions = {"concat", "multiply"};
      c.pi_finetune_steps = 200;
      c.steps = 800;
      c.eval_chars = 16384;
    }
    const int seed = a->seed.value_or(0);
    c.seeds = a->full ? std::vector<int>{seed, seed + 1, seed + 2} : std::vector<int>{seed};
    if (a->schemes) c.schemes = split(*a->schemes);  // given but empty: an error in run_extrapolate
    if (a->extensions) c.extensions = split(*a->extensions);
    if (a->train_len) c.train_len = *a->train_len;
    if (!a->eval_lens.empty()) {
      c.eval_lens.clear();
      for (auto v : parse_int_list(a->eval_lens, "--eval-lens", 2, lab::kMaxEvalLen)) c.eval_lens.push_back(static_cast<int>(v));
    }
    if (a->steps) c.steps = *a->steps;
    if (a->threads) c.threads = *a->threads;
    const lab::ExtrapolateResult r = lab::run_extrapolate(c);
    if (!lab::is_primary(c.launch)) return;  // rank 0 writes and prints the results
    lab::write_file_atomic(c.out_dir + "/results.json", lab::results_json(r, c));
    lab::write_file_atomic(c.out_dir + "/results.csv", lab::results_csv(r));
    lab::write_file_atomic(c.out_dir + "/chart.svg", lab::results_svg(r, c));
    if (a->json) {
      std::cout << lab::results_json(r, c) << "\n";
    } else {
      std::cout << lab::format_table(r, c);
      std::cout << "results: " << c.out_dir << "/results.json, results.csv, chart.svg\n";
    }
  });

  struct SortArgs {
    lab::SortConfig config;
    std::optional<std::string> schemes;
    std::string test_lens;
    bool json = false;
  };
  auto sa = std::make_shared<SortArgs>();
  CLI::App* sort = lab_cmd->add_subcommand("sort", "the sorting task: train on n digits, test on longer sequences");
  sort->add_option("--schemes", sa->schemes, "comma-separated schemes (default: nope, sinusoidal, learned, rope, alibi, t5)");
  sort->add_option("--train-len", sa->config.train_len, "digits per training sequence")->capture_default_str();
  sort->add_option("--test-lens", sa->test_lens, "digits per test sequence (default 16,24,32)");
  sort->add_option("--steps", sa->config.steps, "training steps per scheme")->capture_default_str();
  sort->add_option("--seed", sa->config.seed, "seed")->capture_default_str();
  sort->add_option("--threads", sa->config.threads, "torch threads (default 1; at most this machine's hardware threads)")->capture_default_str()->check(CLI::Range(0, lab::max_lab_threads()));
  sort->add_option("--out", sa->config.out_dir, "output directory (models for attention maps, results)")->capture_default_str();
  sort->add_flag("--json", sa->json, "one JSON object on stdout");
  add_launch_options(sort, &sa->config.launch);
  sort->callback([sa] {
    if (launched_local_ranks(&sa->config.launch)) return;
    lab::SortConfig c = sa->config;
    if (sa->schemes) c.schemes = split(*sa->schemes);
    if (!sa->test_lens.empty()) {
      c.test_lens.clear();
      for (auto v : parse_int_list(sa->test_lens, "--test-lens", 1, lab::kMaxSortTestLen)) c.test_lens.push_back(static_cast<int>(v));
    }
    const auto rows = lab::run_sort(c);
    if (!lab::is_primary(c.launch)) return;  // rank 0 writes and prints the results
    lab::write_file_atomic(c.out_dir + "/results.json", lab::sort_json(rows, c));
    if (sa->json)
      std::cout << lab::sort_json(rows, c) << "\n";
    else
      std::cout << lab::format_sort_table(rows, c) << "models: " << c.out_dir << "/sort-<scheme>.pt\n";
  });
  add_lab_passkey_command(*lab_cmd);
}

}  // namespace posenc::cli
