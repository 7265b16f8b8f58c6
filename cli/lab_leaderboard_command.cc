#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "commands.h"
#include "lab_options.h"
#include "options.h"
#include "posenc_lab/leaderboard.h"

namespace posenc::cli {

void add_lab_leaderboard_command(CLI::App& lab) {
  struct Args {
    bool quick = false, full = false;
    std::vector<std::string> schemes, corpora;
    int seeds = 0, steps = 0, threads = 0;
    std::string out;
    lab::LaunchConfig launch;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = lab.add_subcommand("leaderboard",
                                     "every scheme on the same footing: bits per character 1x-64x, passkey retrieval, sorting, "
                                     "training speed, over seeds; report.html, leaderboard.md, results.json/.csv");
  add_size_flags(cmd, &a->quick, &a->full,
                 "nope, sinusoidal, rope, alibi, kerple, fox, fire, xpos; 2 seeds; 2 x 64 models: language models 400 "
                 "steps scored 1x-64x (RoPE with pi, ntk, yarn), passkey on rope, alibi, nope only (1200 steps, zero-shot, "
                 "one key and among 2 distractor keys), sorting 400 steps; 14 min 48 s in one process on an idle 2-core "
                 "Zen 4 host (--nproc 2 --distribute models shares the models out)",
                 "every scheme, 3 seeds, both corpora, each experiment at its own defaults (passkey fine-tunes too): hours");
  add_schemes_option(cmd, a->schemes, "schemes (default: the size's)");
  cmd->add_option("--seeds", a->seeds, "seeds 0 .. N-1 (default: --quick 2, --full 3)")->check(CLI::Range(1, 100));
  add_list_option(cmd, "--corpora", a->corpora, "UTF-8 texts (default: data/kjv.txt; --full adds data/fortunes.txt)");
  add_steps_option(cmd, a->steps, "training steps of every model (default: each experiment's)")->check(CLI::Range(1, 1000000));
  add_threads_option(cmd, a->threads, "torch threads (0: one)", 0, lab::max_lab_threads());
  add_out_option(cmd, a->out, "output directory (default: out/lab-leaderboard-quick or -full)");
  add_launch_options(cmd, &a->launch);
  cmd->callback([a, cmd] {
    lab::LeaderboardConfig c = a->full ? lab::LeaderboardConfig::full() : lab::LeaderboardConfig::quick();
    if (!a->schemes.empty()) c.schemes = c.passkey.schemes = c.sort.schemes = a->schemes;
    if (a->seeds > 0) {
      c.seeds.clear();
      for (int s = 0; s < a->seeds; ++s) c.seeds.push_back(s);
    }
    if (!a->corpora.empty()) c.corpora = a->corpora;
    if (a->steps > 0) c.extrapolate.training.steps = c.passkey.training.steps = c.sort.training.steps = a->steps;
    c.extrapolate.training.threads = c.passkey.training.threads = c.sort.training.threads = a->threads;
    if (cmd->count("--out")) c.out_dir = a->out;  // '' too: refused as the other lab commands refuse it
    c.command = "posenc lab leaderboard " + std::string(a->full ? "--full" : "--quick");
    const auto joined = [](const std::vector<std::string>& items) {
      std::string s;
      for (const auto& i : items) s += (s.empty() ? "" : ",") + i;
      return s;
    };
    if (!a->schemes.empty()) c.command += " --schemes " + joined(a->schemes);
    if (a->seeds > 0) c.command += " --seeds " + std::to_string(a->seeds);
    if (!a->corpora.empty()) c.command += " --corpora " + joined(a->corpora);
    if (a->steps > 0) c.command += " --steps " + std::to_string(a->steps);
    if (cmd->count("--out")) c.command += " --out " + a->out;
    if (a->threads > 0) c.command += " --threads " + std::to_string(a->threads);
    c.launch = a->launch;
    lab::validate_leaderboard(c);  // once, before --nproc starts the ranks
    if (launched_local_ranks(&c.launch, lab::leaderboard_min_batch(c), c.out_dir)) return;
    if (lab::world_size_of(c.launch) > 1)
      c.command += " (" + std::to_string(lab::world_size_of(c.launch)) + " ranks" + (lab::distributes_models(c.launch) ? ", --distribute models" : "") + ")";
    const lab::LeaderboardResult r = lab::run_leaderboard(c);
    if (!lab::is_primary(c.launch)) return;  // rank 0 prints the board
    std::cout << lab::leaderboard_markdown(r, c) << "\nreport: " << c.out_dir << "/report.html (also leaderboard.md, results.json, results.csv)\n";
  });
}

}  // namespace posenc::cli
