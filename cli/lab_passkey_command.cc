#include "commands.h"

#include <iostream>
#include <memory>

#include "lab_options.h"
#include "options.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/passkey.h"

namespace posenc::cli {

void add_lab_passkey_command(CLI::App& lab) {
  struct Args {
    lab::PasskeyConfig config;
    bool quick = false, full = false, json = false;
  };
  auto a = std::make_shared<Args>();
  lab::PasskeyConfig& c = a->config;
  CLI::App* cmd = lab.add_subcommand("passkey", "passkey retrieval: a key hidden at a depth of filler text, asked for at the end, per length and depth");
  add_size_flags(cmd, &a->quick, &a->full, "RoPE (zero-shot and fine-tuned PI, NTK, dynamic NTK, YaRN), ALiBi, NoPE at 1x-8x",
                 "also sinusoidal and T5, lengths to 64x, 64 sequences per cell");
  add_lab_run_options(cmd, {&c.schemes, &c.training, &c.shape, &c.seed, &c.corpus, &a->json, &c.launch}, "characters");
  // Comma-separated lists, checked with every other setting by validate_passkey.
  add_extensions_option(cmd, &c.extensions);
  add_list_option(cmd, "--multiples", c.multiples, "grid lengths as multiples of the training length")->capture_default_str();
  add_remap_options(cmd, &c.remaps);
  add_list_option(cmd, "--depths", c.depths, "depths of the key in [0, 1]")->capture_default_str();
  cmd->add_option("--finetune-steps", c.finetune_steps, "fine-tune steps per RoPE extension at 2x the training length (0: zero-shot only)")->capture_default_str();
  cmd->add_option("--batch", c.training.batch, "sequences per training step")->capture_default_str();
  cmd->add_option("--lr", c.training.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--warmup", c.training.warmup, "learning-rate warm-up steps")->capture_default_str();
  cmd->add_option("--passkey-fraction", c.passkey_fraction, "passkey sequences per training batch, the rest plain text")->capture_default_str();
  cmd->add_option("--probe-every", c.probe_every, "score exact match at the training length every N training steps (0: off)")
      ->capture_default_str();
  cmd->add_option("--samples", c.samples, "sequences per grid cell")->capture_default_str();
  cmd->add_option("--distractors", c.distractors,
                  "distractor keys (RULER's multi-key needle): training rows get 0..N of them, and the grid is also scored "
                  "among N (rows +dN); 0: one key only")
      ->capture_default_str();
  cmd->callback([a, cmd] {
    // --full: what --schemes, --multiples, --samples did not set (given as the defaults, they stay)
    lab::PasskeyConfig c =
        a->full ? a->config.full(cmd->count("--schemes") > 0, cmd->count("--multiples") > 0, cmd->count("--samples") > 0) : a->config;
    if (launched_local_ranks(&c.launch, c.training.batch, c.training.out_dir)) return;
    const lab::PasskeyResult r = lab::run_passkey(c);  // it writes results.json and the figures
    if (!lab::is_primary(c.launch)) return;  // rank 0 prints the results
    if (a->json) {
      std::cout << lab::passkey_json(r, c) << "\n";
      return;
    }
    std::cout << lab::passkey_table(r, c);
    if (!r.complete) std::cout << "(stopped early: run the same command again to resume)\n";
    std::cout << "results: " << c.training.out_dir << "/results.json, heatmap-<model>.svg (" << r.figures.size() - 1 << "), position-loss.svg\n";
  });
}

}  // namespace posenc::cli
