// `lab passkey` end to end on a tiny corpus and tiny models (seconds): the grid it fills, the
// JSON it prints, the files it keys and resumes from, and the settings it refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lab_support.h"
#include "posenc/error.h"
#include "posenc_lab/passkey.h"
#include "posenc_lab/result_cache.h"

namespace posenc::lab {
namespace {

PasskeyConfig tiny_passkey(const std::string& out) {
  PasskeyConfig c;
  c.corpus = test::tiny_corpus();
  c.schemes = {"rope", "alibi"};
  c.extensions = {RopeExtension::kNone, RopeExtension::kPi};
  c.training = {32, 6, 4, 3e-3, 2, 2, test::fresh_dir(out)};  // train_len, steps, batch, lr, warm-up, checkpoints, out
  c.multiples = {1, 2};
  c.depths = {0, 1};
  c.shape = {1, 32, 2};  // layers, d_model, heads
  c.finetune_steps = 2;
  c.samples = 3;
  c.curve_chars = 256;
  return c;
}

std::string error_of(const PasskeyConfig& c) {
  try {
    run_passkey(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PasskeyRun, FillsEveryCellOfEveryVariant) {
  const PasskeyConfig c = tiny_passkey("passkey_grid");
  const PasskeyResult r = run_passkey(c);
  ASSERT_TRUE(r.complete);
  // rope: none, pi zero-shot, pi fine-tuned; alibi: none; each 2 lengths x 2 depths
  ASSERT_EQ(r.rows.size(), 4u * 4u);
  int finetuned = 0;
  for (const PasskeyRow& row : r.rows) {
    EXPECT_TRUE(row.length == 32 || row.length == 64);
    EXPECT_TRUE(row.depth == 0 || row.depth == 1);
    EXPECT_GE(row.accuracy, 0);
    EXPECT_LE(row.accuracy, 1);
    EXPECT_LT(row.logprob, 0);
    EXPECT_EQ(row.samples, 3);
    finetuned += row.finetune;
    if (row.finetune) {
      EXPECT_EQ(row.extension, "pi");
    }
  }
  EXPECT_EQ(finetuned, 4);
  ASSERT_EQ(r.curves.size(), 4u);
  for (const PositionCurve& cv : r.curves) EXPECT_EQ(cv.bits.size(), 64u) << "the curve spans the longest grid length";
  const nlohmann::json j = nlohmann::json::parse(passkey_json(r, c));
  EXPECT_EQ(j.at("train_len"), 32);
  ASSERT_EQ(j.at("results").size(), 16u);
  for (const char* field : {"scheme", "extension", "finetune", "length", "depth", "accuracy", "logprob"})
    EXPECT_TRUE(j["results"][0].contains(field)) << field;
  const auto files = write_passkey_figures(r, c);
  EXPECT_EQ(files.size(), 5u);  // four heatmaps and the position chart
  EXPECT_TRUE(std::filesystem::exists(c.training.out_dir + "/heatmap-rope+pi+ft.png"));
  EXPECT_NE(test::slurp(c.training.out_dir + "/position-loss.svg").find("training length"), std::string::npos);
}

TEST(PasskeyRun, AnInterruptedRunResumesToTheSameNumbers) {
  const PasskeyResult whole = run_passkey(tiny_passkey("passkey_whole"));
  PasskeyConfig c = tiny_passkey("passkey_resumed");
  c.stop_after_steps = 3;  // mid-way through the rope model
  EXPECT_FALSE(run_passkey(c).complete);
  c.stop_after_steps = 5;  // through rope, into its fine-tune
  EXPECT_FALSE(run_passkey(c).complete);
  c.stop_after_steps = -1;
  const PasskeyResult resumed = run_passkey(c);
  ASSERT_EQ(resumed.rows.size(), whole.rows.size());
  for (std::size_t i = 0; i < whole.rows.size(); ++i) {
    EXPECT_DOUBLE_EQ(resumed.rows[i].logprob, whole.rows[i].logprob) << i;
    EXPECT_DOUBLE_EQ(resumed.rows[i].accuracy, whole.rows[i].accuracy) << i;
  }
}

// The probe trains in runs of probe_every steps, each resumed from the last one's checkpoint:
// the weights (so every grid row) must be those of one uninterrupted run.
TEST(PasskeyRun, TheProbeScoresEveryFewStepsAndLeavesTheWeightsAsTheyWere) {
  PasskeyConfig plain = tiny_passkey("passkey_unprobed");
  plain.probe_every = 0;
  const PasskeyResult unprobed = run_passkey(plain);
  EXPECT_TRUE(unprobed.probes.empty());
  PasskeyConfig c = tiny_passkey("passkey_probed");
  c.probe_every = 4;  // steps 4 and 6 of 6
  const PasskeyResult probed = run_passkey(c);
  ASSERT_EQ(probed.probes.size(), 4u);  // rope and alibi
  EXPECT_EQ(probed.probes[0].model, "rope");
  EXPECT_EQ(probed.probes[0].step, 4);
  EXPECT_EQ(probed.probes[1].step, 6);
  EXPECT_EQ(probed.probes[3].model, "alibi");
  for (const ProbePoint& p : probed.probes) {
    EXPECT_GE(p.accuracy, 0);
    EXPECT_LT(p.logprob, 0);
  }
  ASSERT_EQ(probed.rows.size(), unprobed.rows.size());
  for (std::size_t i = 0; i < probed.rows.size(); ++i) EXPECT_DOUBLE_EQ(probed.rows[i].logprob, unprobed.rows[i].logprob) << i;
  // The probe points are kept with the rows: a finished run reports them again.
  EXPECT_EQ(run_passkey(c).probes.size(), 4u);
  EXPECT_NE(passkey_table(probed, c).find("exact match at 32 during training, rope: 4:"), std::string::npos) << passkey_table(probed, c);
}

// RoPE probed every 4 of 6 steps, stopped after `stop` steps and resumed: its probe points,
// which an uninterrupted run has at 4 and 6.
std::vector<long> probe_steps_after_a_stop(const std::string& out, long stop) {
  PasskeyConfig c = tiny_passkey(out);
  c.schemes = {"rope"};
  c.probe_every = 4;
  c.stop_after_steps = stop;
  EXPECT_FALSE(run_passkey(c).complete);
  c.stop_after_steps = -1;
  std::vector<long> steps;
  for (const ProbePoint& p : run_passkey(c).probes) steps.push_back(p.step);
  return steps;
}

// A run stopped after the first probe and resumed reports every probe point, as an
// uninterrupted run does (the points live beside the checkpoint, not only in memory).
TEST(PasskeyRun, AResumedRunKeepsTheProbePointsMeasuredBeforeTheStop) {
  EXPECT_EQ(probe_steps_after_a_stop("passkey_probe_resumed", 4), (std::vector<long>{4, 6}));
}

// Killed after the checkpoint at a probe step but before that point was written (no
// probes.json yet): the resumed run measures it on the checkpoint's weights before training on.
TEST(PasskeyRun, AKillBeforeAProbePointIsWrittenLosesNoPoint) {
  PasskeyConfig c = tiny_passkey("passkey_probe_killed");
  c.schemes = {"rope"};
  c.probe_every = 4;  // steps 4 and 6 of 6
  c.stop_after_steps = 4;
  run_passkey(c);
  const nlohmann::json written = read_json_file(c.training.out_dir + "/rope.probes.json");
  std::filesystem::remove(c.training.out_dir + "/rope.probes.json");
  c.stop_after_steps = -1;
  const PasskeyResult resumed = run_passkey(c);
  ASSERT_EQ(resumed.probes.size(), 2u);
  EXPECT_EQ(resumed.probes[0].step, 4);
  EXPECT_EQ(resumed.probes[0].accuracy, written.at("probes").at(0).at("accuracy").get<double>());
  EXPECT_EQ(resumed.probes[0].logprob, written.at("probes").at(0).at("logprob").get<double>());  // the same weights
  EXPECT_EQ(resumed.probes[1].step, 6);
}

// Stopped between two probe steps (at 2 of probe_every 4): no point at 2, and the resumed runs
// end on 4 and 6 as an uninterrupted run's do (it probed at 2, then ran 4 steps to 6).
TEST(PasskeyRun, AStopBetweenProbeStepsKeepsTheProbeGrid) {
  EXPECT_EQ(probe_steps_after_a_stop("passkey_probe_unaligned", 2), (std::vector<long>{4, 6}));
}

TEST(PasskeyRun, ResultsAreKeyedByEverySetting) {
  PasskeyConfig c = tiny_passkey("passkey_keyed");
  const PasskeyResult first = run_passkey(c);
  // Same settings: reused (the result file is not rewritten).
  const auto stamp = std::filesystem::last_write_time(c.training.out_dir + "/rope.passkey.json");
  const PasskeyResult again = run_passkey(c);
  EXPECT_EQ(std::filesystem::last_write_time(c.training.out_dir + "/rope.passkey.json"), stamp);
  EXPECT_DOUBLE_EQ(again.rows[0].logprob, first.rows[0].logprob);
  // Other evaluation settings: re-scored from the saved weights.
  c.depths = {0.5};
  EXPECT_EQ(run_passkey(c).rows.size(), 4u * 2u);
  // Another training setting: an error naming it, nothing overwritten.
  c.passkey_fraction = 0.5;
  EXPECT_NE(error_of(c).find("passkey_fraction"), std::string::npos) << error_of(c);
}

TEST(PasskeyRun, BadSettingsNameTheValueAndWhatWasExpected) {
  PasskeyConfig c = tiny_passkey("passkey_bad");
  c.depths = {0, 1.5};
  EXPECT_NE(error_of(c).find("[0, 1], got 1.5"), std::string::npos) << error_of(c);
  c = tiny_passkey("passkey_bad");
  c.schemes = {"rope", "bogus"};
  EXPECT_NE(error_of(c).find("'bogus'"), std::string::npos);
  c = tiny_passkey("passkey_bad");
  c.extensions.clear();
  EXPECT_NE(error_of(c).find("--extensions is empty"), std::string::npos) << error_of(c);
  // A name outside the extensions' table (the CLI's --extensions reads it) is an Error naming it.
  EXPECT_EQ(test::error_of([] { from_name<RopeExtension>("longrope"); }),
            "--extensions must be one of none|pi|ntk|dynamic|yarn|self-extend|rerope|leaky-rerope|dual-chunk, got 'longrope'");
  c = tiny_passkey("passkey_bad");
  c.shape.heads = 0;
  EXPECT_NE(error_of(c).find("--heads must be in [1, 256], got 0"), std::string::npos) << error_of(c);
  c = tiny_passkey("passkey_bad");
  c.training.out_dir = test::tiny_corpus() + "/inside-a-file";
  EXPECT_NE(error_of(c).find("--out"), std::string::npos) << error_of(c);
  c = tiny_passkey("passkey_bad");
  c.multiples = {1, 1000};
  EXPECT_NE(error_of(c).find("--multiples"), std::string::npos);
}

}  // namespace
}  // namespace posenc::lab
