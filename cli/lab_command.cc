#include "commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <nlohmann/json.hpp>

#include "options.h"

#include "lab_options.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/sort_task.h"
#include "ranges.h"

namespace posenc::cli {

namespace {

// `lab heads`: which heads of a sort model attend to the previous token, measured.
void add_lab_heads_command(CLI::App& lab_cmd) {
  struct HeadsArgs {
    lab::HeadOffsetsRequest request;
    double threshold = 0.5;
    bool json = false;
  };
  auto h = std::make_shared<HeadsArgs>();
  CLI::App* cmd = lab_cmd.add_subcommand("heads", "a sort model's heads by where they look: mean attention mass per offset, "
                                                  "previous-token heads named by measurement");
  cmd->add_option("--model", h->request.model_path, "a model `lab sort` saved (<out>/sort-<scheme>.pt)")->required();
  cmd->add_option("--digits", h->request.digits, "digits per test sequence")->capture_default_str();
  cmd->add_option("--sequences", h->request.sequences, "test sequences averaged over")->capture_default_str();
  cmd->add_option("--threshold", h->threshold, "mass on offset -1 that names a previous-token head")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  add_json_flag(cmd, h->json);
  cmd->callback([h] {
    if (!(h->threshold >= 0 && h->threshold <= 1))  // CLI::Range lets NaN through
      throw Error("--threshold must be in [0, 1], got " + format_number(h->threshold));
    const auto heads = lab::sort_head_offsets(h->request);
    if (h->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& x : heads)
        j.push_back({{"layer", x.layer}, {"head", x.head}, {"previous", x.previous()}, {"top_offset", -x.top_offset}, {"top_mass", x.top_mass},
                     {"previous_token_head", x.previous() >= h->threshold}, {"mass_by_offset", x.mass}});
      std::cout << j.dump(1) << "\n";
      return;
    }
    std::printf("%s: attention mass by offset (key - query), mean over %d sequences of %d digits\n", h->request.model_path.c_str(),
                h->request.sequences, h->request.digits);
    std::printf("layer  head   self (0)   previous (-1)   most at\n");
    for (const auto& x : heads)
      std::printf("%5d  %4d   %8.2f   %13.2f   %4d (%.2f)%s\n", x.layer, x.head, x.mass[0], x.previous(), -x.top_offset, x.top_mass,
                  x.previous() >= h->threshold ? "   previous-token head" : "");
  });
}

}  // namespace

void add_lab_command(CLI::App& app) {
  struct Args {
    lab::ExtrapolateConfig config;
    int seed = 0;  // --full trains 3 seeds from it
    std::string eval_lens;
    bool quick = false, full = false, json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* lab_cmd = app.add_subcommand("lab", "experiments that train small transformers on this machine");
  lab_cmd->require_subcommand(1);
  CLI::App* ex = lab_cmd->add_subcommand("extrapolate", "train short, test long: bits per character per scheme and RoPE extension");
  lab::ExtrapolateConfig& ec = a->config;
  add_size_flags(ex, &a->quick, &a->full, "the demo: nope, sinusoidal, rope (+ extensions), alibi; a few minutes",
                 "every scheme, 3 seeds, RoPE and sinusoidal base sweeps, sinusoidal fusion modes, scored to 16384");
  add_lab_run_options(ex, {&ec.schemes, &ec.training, &ec.shape, &a->seed, &ec.corpus, &a->json, &ec.launch}, "characters");
  add_extensions_option(ex, &ec.extensions);
  add_remap_options(ex, &ec.remaps);
  ex->add_flag("--stream", ec.stream.on,
               "also stream the RoPE model token by token over --stream-multiple x train-len through a sink cache "
               "(StreamingLLM), keys re-rotated on eviction and not, and the window alone");
  ex->add_option("--stream-sinks", ec.stream.sinks, "the sink tokens of --stream")->capture_default_str();
  ex->add_option("--stream-window", ec.stream.window, "the recent tokens of --stream (0: train-len - sinks)")->capture_default_str();
  ex->add_option("--stream-multiple", ec.stream.multiple, "each stream's length over the training length")->capture_default_str();
  add_list_option(ex, "--rope-bases", ec.rope_bases, "extra RoPE models with these bases (rope-base<B>; the rope scheme keeps 10000)");
  add_list_option(ex, "--rope-clips", ec.rope_clips,
                  "extra RoPE models with the n lowest frequencies softly clipped (rope-clip<n>; Li et al. 2026), each n in "
                  "[2, head_dim / 2]");
  add_list_option(ex, "--sinusoidal-bases", ec.sinusoidal_bases,
                  "extra sinusoidal models with these table bases (sinusoidal-base<B>; the sinusoidal scheme keeps 10000)");
  add_fusions_option(ex, "--fusion", &ec.fusions,
                     "extra sinusoidal models fused into the embedding this way (sinusoidal-concat, sinusoidal-multiply; "
                     "add is the sinusoidal scheme itself)");
  add_fusions_option(ex, "--raw-index", &ec.raw_index,
                     "extra models whose position is the raw index p in every channel, the tutorials' pitfall (raw-index "
                     "for add, raw-index-concat, ...)");
  ex->add_flag("--embed-scale", ec.embed_scale,
               "an extra sinusoidal model whose token embeddings are multiplied by sqrt(d_model) before the table is "
               "added (Vaswani et al. 2017, 3.4): sinusoidal-embed-scale");
  std::string default_lens, full_lens;
  for (int len : ec.eval_lens) default_lens += (default_lens.empty() ? "" : ",") + std::to_string(len);
  for (int len : lab::kFullEvalLens)
    if (std::find(ec.eval_lens.begin(), ec.eval_lens.end(), len) == ec.eval_lens.end()) full_lens += "," + std::to_string(len);
  ex->add_option("--eval-lens", a->eval_lens,
                 "evaluation lengths, each in [2, " + std::to_string(lab::kMaxEvalLen) + "] (default " + default_lens +
                     "; --full: on to " + full_lens.substr(1) + ")");
  ex->callback([a, ex] {
    lab::ExtrapolateConfig c = a->config;
    if (launched_local_ranks(&c.launch, c.training.batch, c.training.out_dir)) return;
    if (a->full) c = c.full(a->seed, ex->count("--schemes") > 0, ex->count("--steps") > 0);  // what the flags given did not set
    else c.seeds = {a->seed};
    if (ex->count("--eval-lens") > 0) {  // given but empty ('') is refused by the list's reader, not the defaults
      c.eval_lens.clear();
      for (auto v : parse_int_list(a->eval_lens, "--eval-lens", 2, lab::kMaxEvalLen)) c.eval_lens.push_back(static_cast<int>(v));
    }
    const lab::ExtrapolateResult r = lab::run_extrapolate(c);  // it writes results.json, results.csv, chart.svg
    if (!lab::is_primary(c.launch)) return;  // rank 0 prints the results
    if (a->json) {
      std::cout << lab::results_json(r, c) << "\n";
    } else {
      std::cout << lab::format_table(r, c);
      std::cout << "results: " << c.training.out_dir << "/results.json, results.csv, chart.svg\n";
    }
  });

  struct SortArgs {
    lab::SortConfig config;
    std::string test_lens;
    bool json = false;
  };
  auto sa = std::make_shared<SortArgs>();
  CLI::App* sort = lab_cmd->add_subcommand("sort", "the sorting task: train on n digits, test on longer sequences");
  lab::SortConfig& sc = sa->config;
  add_lab_run_options(sort, {&sc.schemes, &sc.training, &sc.shape, &sc.seed, nullptr, &sa->json, &sc.launch}, "digits");
  sort->add_option("--test-lens", sa->test_lens, "digits per test sequence (default 16,24,32)");
  sort->callback([sa, sort] {
    lab::SortConfig c = sa->config;
    if (launched_local_ranks(&c.launch, c.training.batch, c.training.out_dir)) return;
    if (sort->count("--test-lens") > 0) {  // given, even as "": parse_int_list refuses an empty list
      c.test_lens.clear();
      for (auto v : parse_int_list(sa->test_lens, "--test-lens", 1, lab::kMaxSortTestLen)) c.test_lens.push_back(static_cast<int>(v));
    }
    const auto rows = lab::run_sort(c);  // it writes results.json
    if (!lab::is_primary(c.launch)) return;  // rank 0 prints the results
    if (sa->json)
      std::cout << lab::sort_json(rows, c) << "\n";
    else
      std::cout << lab::format_sort_table(rows, c) << "models: " << c.training.out_dir << "/sort-<scheme>.pt\n";
  });
  add_lab_heads_command(*lab_cmd);
  add_lab_passkey_command(*lab_cmd);
  add_lab_vision_command(*lab_cmd);
  add_lab_leaderboard_command(*lab_cmd);
}

}  // namespace posenc::cli
