// A leaderboard of tiny models on the tiny corpus (seconds): the end-to-end tests' board.
#pragma once

#include <string>

#include "lab_support.h"
#include "posenc_lab/leaderboard.h"

namespace posenc::lab::test {

// In <TempDir>/<out>, emptied first unless !fresh (a rank joining a run another process began).
inline LeaderboardConfig tiny_board(const std::string& out, bool fresh = true) {
  LeaderboardConfig c;
  c.schemes = {"nope", "alibi", "rope"};
  c.seeds = {0, 1};
  c.corpora = {tiny_corpus()};
  c.out_dir = fresh ? fresh_dir(out) : ::testing::TempDir() + out;
  c.command = "tiny";
  c.extrapolate = tiny("unused", {});
  c.extrapolate.training.steps = 6;
  c.extrapolate.eval_lens = {16, 32, 64};
  c.extrapolate.eval_chars = 256;
  c.extrapolate.incremental_tokens = 0;
  c.extrapolate.extensions = {RopeExtension::kNone, RopeExtension::kPi, RopeExtension::kYarn};
  c.passkey.training = {40, 6, 4, 3e-3, 2, 3, ""};  // train_len, steps, batch, lr, warm-up, checkpoints
  c.passkey.shape = {1, 32, 2};
  c.passkey.schemes = {"rope", "alibi"};
  c.passkey.extensions = {RopeExtension::kNone, RopeExtension::kPi};
  c.passkey.multiples = {1, 2};
  c.passkey.depths = {0, 1};
  c.passkey.samples = 2;
  c.passkey.finetune_steps = 0;
  c.passkey.probe_every = 3;
  c.passkey.distractors = 1;
  c.passkey.curve_chars = 256;
  c.sort = tiny_sort("unused");
  c.sort.schemes = c.schemes;
  c.sort.training.steps = 6;
  c.sort.test_lens = {4, 6, 8};
  c.sort.test_sequences = 8;
  return c;
}

}  // namespace posenc::lab::test
