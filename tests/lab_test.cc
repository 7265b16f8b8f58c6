// The lab on a tiny generated corpus: training lowers the loss, evaluation scores the right
// tokens, an interrupted run resumes to the same numbers, a learned table reports n/a, the PI
// fine-tune starts from the trained weights, the sort task learns at its training length.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/passkey.h"
#include "posenc/error.h"
#include "posenc_lab/sort_task.h"
#include "posenc_torch/model.h"
#include "lab_support.h"
#include "posenc/sinusoidal.h"
#include "checkpoint.h"
#include "lm_train.h"

namespace posenc::lab {
namespace {

namespace fs = std::filesystem;
using test::tiny;

TEST(LabCorpus, SplitAndVocabularyOfTheTrainingPart) {
  const Corpus c = corpus_from_text(std::string(450, 'b') + std::string(450, 'a') + "ac" + std::string(98, 'z'), 0.1);
  EXPECT_EQ(c.vocab, (std::vector<std::uint8_t>{'a', 'b'})) << "only bytes of the training part";
  EXPECT_EQ(c.vocab_size(), 3);
  EXPECT_EQ(c.train.size(), 900u);
  EXPECT_EQ(c.valid.size(), 100u);
  EXPECT_EQ(c.valid[0], 0);                 // 'a' is known
  EXPECT_EQ(c.valid[1], c.unknown_id());    // 'c' and 'z' never occur in training: one unknown id
  EXPECT_EQ(c.valid[2], c.unknown_id());
  EXPECT_TRUE(c.ascii);
  EXPECT_EQ(std::string(c.unit()), "bits per character");
  EXPECT_THROW(load_corpus("/nonexistent/corpus.txt"), Error);
}

TEST(LabCorpus, NonAsciiTextIsScoredInBitsPerByte) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "caf\xc3\xa9 ";  // "café": 6 bytes, 5 characters
  const Corpus c = corpus_from_text(text, 0.1);
  EXPECT_FALSE(c.ascii);
  EXPECT_NE(std::string(c.unit()).find("bits per byte"), std::string::npos);
  ExtrapolateResult r;
  r.unit = c.unit();
  ExtrapolateConfig cfg;
  EXPECT_NE(format_table(r, cfg).find("bits per byte"), std::string::npos);
  EXPECT_EQ(format_table(r, cfg).find("bits per character"), std::string::npos);
}

TEST(LabCorpus, IdentityIsTheHashOfItsBytesNotItsSize) {
  const std::string a = test::slurp(test::tiny_corpus()), b = test::slurp(test::tiny_corpus(7));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(corpus_from_text(a).hash, corpus_from_text(b).hash);
  EXPECT_EQ(corpus_from_text(a).hash, corpus_from_text(a).hash);
}

TEST(LabPresets, FullAddsTheSweepsAndKeepsWhatTheUserSet) {
  const ExtrapolateConfig quick;
  const ExtrapolateConfig full = quick.full(5, false, false);
  EXPECT_EQ(full.seeds, (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(full.schemes.size(), 8u);
  EXPECT_EQ(full.training.steps, 800);
  EXPECT_EQ(full.eval_lens, kFullEvalLens);
  EXPECT_EQ(full.rope_bases, (std::vector<double>{100, 1e6}));
  EXPECT_EQ(full.sinusoidal_bases, (std::vector<double>{100, 1e6}));
  EXPECT_EQ(full.pi_finetune_steps, 200);
  ExtrapolateConfig mine;
  mine.schemes = {"rope"};
  mine.training.steps = 7;
  mine.sinusoidal_bases = {500};
  const ExtrapolateConfig kept = mine.full(0, true, true);  // --schemes, --steps and --sinusoidal-bases given
  EXPECT_EQ(kept.sinusoidal_bases, (std::vector<double>{500}));
  EXPECT_EQ(kept.schemes, mine.schemes);
  EXPECT_EQ(kept.training.steps, 7);
  PasskeyConfig passkey;
  EXPECT_EQ(passkey.full(false, false, false).multiples.back(), 64);
  EXPECT_EQ(passkey.full(false, false, false).samples, 64);
  EXPECT_EQ(passkey.full(false, false, false).schemes.size(), 5u);
  passkey.samples = 5;  // set by the user: kept
  EXPECT_EQ(passkey.full(false, false, true).samples, 5);
  // Typed as the --quick default's list, the user's schemes are still the user's (issue 33, F18).
  EXPECT_EQ(passkey.full(true, true, true).schemes, PasskeyConfig().schemes);
  EXPECT_EQ(passkey.full(true, true, true).multiples, PasskeyConfig().multiples);
}

TEST(Lab, TrainsEvaluatesAndReportsLengthsCorrectly) {
  ExtrapolateConfig c = tiny("lab_basic", {"rope", "learned"});
  c.incremental_tokens = 128;  // 'dynamic' and 'dynamic-incremental' on the first 128 tokens
  const ExtrapolateResult r = run_extrapolate(c);
  ASSERT_TRUE(r.complete);
  bool saw_na = false, saw_incremental = false;
  for (const ResultRow& row : r.rows) {
    if (row.scheme == "learned" && row.eval_len > 16) {
      EXPECT_FALSE(row.available);
      EXPECT_EQ(row.note, "n/a (cannot extrapolate)");
      saw_na = true;
      continue;
    }
    if (row.extension == "dynamic-incremental" || row.extension == "dynamic") {  // both on the same text
      saw_incremental |= row.extension == "dynamic-incremental";
      EXPECT_EQ(row.tokens, (128 / row.eval_len) * row.eval_len) << row.extension;
      continue;
    }
    EXPECT_EQ(row.tokens, (512 / row.eval_len) * row.eval_len) << row.model << " " << row.eval_len;
    EXPECT_EQ(row.tokens_beyond, row.eval_len > 16 ? (512 / row.eval_len) * (row.eval_len - 16) : 0);
    EXPECT_TRUE(std::isfinite(row.bpc));
    // 24 steps on 13 symbols: well below the 3.7 bits of a uniform guess.
    EXPECT_LT(row.bpc, 3.5) << row.model << " " << row.extension << " " << row.eval_len;
  }
  EXPECT_TRUE(saw_na);
  EXPECT_TRUE(saw_incremental);
  EXPECT_TRUE(fs::exists(c.training.out_dir + "/rope.pt")) << "the trained model, for attention maps";
  EXPECT_TRUE(fs::exists(c.training.out_dir + "/vocab.json"));
  // At the training length every RoPE extension is the identity; on the same text, token by
  // token with a KV cache gives the one-pass numbers.
  double none = -1, pi = -2, dynamic = -3, incremental = -4;
  for (const ResultRow& row : r.rows) {
    if (row.scheme != "rope" || row.eval_len != 16) continue;
    if (row.extension == "none") none = row.bpc;
    if (row.extension == "pi") pi = row.bpc;
    if (row.extension == "dynamic") dynamic = row.bpc;
    if (row.extension == "dynamic-incremental") incremental = row.bpc;
  }
  EXPECT_DOUBLE_EQ(none, pi);
  EXPECT_NEAR(dynamic, incremental, 1e-4);
  const std::string svg = results_svg(r, c);
  EXPECT_NE(svg.find("data-name=\"rope + pi\""), std::string::npos);
  EXPECT_NE(results_json(r, c).find("\"results\""), std::string::npos);
}

TEST(Lab, ASinusoidalBaseSweepTrainsModelsWithTheirOwnTables) {
  ExtrapolateConfig c = test::tiny("lab_sinusoidal_bases", {"sinusoidal"});
  c.sinusoidal_bases = {100};
  c.training.steps = 2;
  const ExtrapolateResult r = run_extrapolate(c);
  bool variant_scored = false;
  for (const ResultRow& row : r.rows) variant_scored = variant_scored || row.model == "sinusoidal-base100";
  EXPECT_TRUE(variant_scored);
  for (const std::string& note : r.notes) {  // no RoPE model: nothing about YaRN or dynamic NTK
    EXPECT_EQ(note.find("yarn"), std::string::npos) << note;
    EXPECT_EQ(note.find("dynamic"), std::string::npos) << note;
  }
  torch_layer::TransformerLM model = load_model_file(c.training.out_dir + "/sinusoidal-base100.pt");
  EXPECT_EQ(model->config().sinusoidal_base, 100);
  // Its table is the core's at base 100 (the scheme's own model keeps 10000).
  const std::vector<std::int64_t> positions = {0, 1, 7, 30};
  SinusoidalParams p;
  p.dim = model->config().d_model;
  p.base = 100;
  const std::vector<float> want = sinusoidal_table(p, positions);
  // The model's own module, by its registered name.
  auto* module = model->named_children()["sinusoidal"]->as<torch_layer::SinusoidalPositionalEncodingImpl>();
  ASSERT_NE(module, nullptr);
  const torch::Tensor got = module->forward(torch::tensor(positions)).contiguous();
  ASSERT_EQ(got.numel(), static_cast<std::int64_t>(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.data_ptr<float>()[i], want[i], 1e-6) << i;
  c.sinusoidal_bases = {100, 1e2};
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "--sinusoidal-bases: base 100 is given twice");
  c.sinusoidal_bases = {1};
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "--sinusoidal-bases: a base must be a finite number > 1, got 1");
}

// --embed-scale: one more sinusoidal model, its token embeddings times sqrt(d_model), saved so.
TEST(Lab, EmbedScaleTrainsAScaledSinusoidalModel) {
  ExtrapolateConfig c = test::tiny("lab_embed_scale", {});
  c.embed_scale = true;
  c.training.steps = 2;
  const ExtrapolateResult r = run_extrapolate(c);
  ASSERT_FALSE(r.rows.empty());
  EXPECT_EQ(r.rows.front().model, "sinusoidal-embed-scale");
  torch_layer::TransformerLM model = load_model_file(c.training.out_dir + "/sinusoidal-embed-scale.pt");
  EXPECT_TRUE(model->config().embed_scale);
  EXPECT_EQ(model->config().scheme, Scheme::kSinusoidal);
  c.embed_scale = false;
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "--schemes is empty");
}

TEST(Lab, FromItsLengthTrainingRunsThroughTheFusedKernel) {
  // Below kFusedTrainingMinLen the materialising path, as before; from it, the fused kernel's
  // backward, which the checkpoint's key records.
  for (int len : {16, kFusedTrainingMinLen}) {
    ExtrapolateConfig c = test::tiny("lab_fused_training_" + std::to_string(len), {"alibi"});
    c.training.train_len = len;
    c.training.steps = 2;
    c.training.batch = 2;
    c.eval_lens = {len};
    const ExtrapolateResult r = run_extrapolate(c);
    ASSERT_FALSE(r.rows.empty());
    EXPECT_TRUE(std::isfinite(r.rows[0].bpc));
    const CheckpointHeader h = read_checkpoint_header(c.training.out_dir + "/alibi.ckpt");
    EXPECT_EQ(h.train_key.value("fused_training", false), len >= kFusedTrainingMinLen) << len;
  }
}

TEST(Lab, TransformerXlTrainsAndReadsWithItsMemory) {
  // The xl row trains on pairs of segments and is scored segment by segment with memory: its
  // windows past the training length are read as segments of 16, and the note says its reach.
  ExtrapolateConfig c = tiny("lab_xl", {"xl"});
  c.shape.layers = 2;
  const ExtrapolateResult r = run_extrapolate(c);
  ASSERT_TRUE(r.complete);
  ASSERT_EQ(r.rows.size(), 2u);
  for (const ResultRow& row : r.rows) {
    EXPECT_TRUE(row.available);
    EXPECT_LT(row.bpc, 3.5) << row.eval_len;
    EXPECT_NE(row.note.find("memory 16"), std::string::npos) << row.note;
    EXPECT_NE(row.note.find("47 tokens back"), std::string::npos) << row.note;  // 2 layers x 16 + 16 - 1
  }
  // The saved model keeps its memory length, and reading in segments is what scored it.
  torch_layer::TransformerLM model = torch_layer::load_model(c.training.out_dir + "/xl.pt");
  EXPECT_EQ(model->config().xl_mem_len, 16);
}

TEST(Lab, InterruptedRunResumesToTheSameNumbers) {
  const ExtrapolateConfig straight = tiny("lab_straight", {"alibi"});
  const ExtrapolateResult a = run_extrapolate(straight);
  ExtrapolateConfig cut = tiny("lab_cut", {"alibi"});
  cut.stop_after_steps = 7;  // killed after 7 steps (last periodic checkpoint at 5)
  const ExtrapolateResult partial = run_extrapolate(cut);
  EXPECT_FALSE(partial.complete);
  EXPECT_TRUE(fs::exists(cut.training.out_dir + "/alibi.ckpt"));
  EXPECT_FALSE(fs::exists(cut.training.out_dir + "/alibi.result.json"));
  cut.stop_after_steps = -1;
  const ExtrapolateResult b = run_extrapolate(cut);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) EXPECT_EQ(a.rows[i].bpc, b.rows[i].bpc) << i;
  // A third run reuses the finished result instead of training again.
  const ExtrapolateResult c = run_extrapolate(cut);
  EXPECT_EQ(c.rows.size(), b.rows.size());
  EXPECT_EQ(c.rows[0].bpc, b.rows[0].bpc);
  // Other settings in the same directory: an error, never a silent reuse.
  cut.training.steps = 30;
  EXPECT_THROW(run_extrapolate(cut), Error);
}

TEST(Lab, PiFineTuneStartsFromTheTrainedWeights) {
  ExtrapolateConfig c = tiny("lab_pi_ft", {"rope"});
  c.extensions = {RopeExtension::kNone};
  c.training.steps = 80;
  c.pi_finetune_steps = 4;
  const ExtrapolateResult r = run_extrapolate(c);
  double base = -1, tuned = -1;
  int rows = 0;
  for (const ResultRow& row : r.rows) {
    if (row.eval_len != 16) continue;
    if (row.extension == "none") base = row.bpc;
    if (row.extension == "pi+finetune") tuned = row.bpc;
    rows += row.extension == "pi+finetune";
  }
  EXPECT_EQ(rows, 1);
  EXPECT_TRUE(fs::exists(c.training.out_dir + "/rope-pi-finetune.ckpt"));
  // Four steps from random weights stay near the 3.8 bits of a uniform guess over 14 ids; from
  // the trained weights (positions divided by 4) they stay near the trained model's score.
  EXPECT_LT(base, 3.0);
  EXPECT_LT(tuned, base + 0.6) << "base " << base;
}

TEST(LabSort, ExamplesAndATinyRun) {
  const auto ex = sort_example(6, 42);
  ASSERT_EQ(ex.size(), 13u);
  EXPECT_EQ(ex[6], 10);
  std::vector<long> digits(ex.begin(), ex.begin() + 6), sorted(ex.begin() + 7, ex.end());
  std::sort(digits.begin(), digits.end());
  EXPECT_EQ(digits, sorted);
  SortConfig c = test::tiny_sort("lab_sort");  // long enough to learn: 200 steps, batch 32, width 32
  c.schemes = {"rope", "learned"};
  c.training.steps = 200;
  c.training.batch = 32;
  c.shape.d_model = 32;
  c.test_sequences = 128;
  fs::remove_all(c.training.out_dir);
  const auto rows = run_sort(c);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) {
    if (r.scheme == "learned" && r.length == 8) {
      EXPECT_FALSE(r.available);
      continue;
    }
    // Means over the 128 test sequences: a whole sequence right has every token right, and the
    // token accuracy counts the len x 128 tokens of the sorted halves.
    EXPECT_LE(r.sequence_accuracy, r.token_accuracy) << r.scheme << " " << r.length;
    const double correct = r.token_accuracy * 128 * r.length;
    EXPECT_DOUBLE_EQ(correct, std::round(correct)) << r.scheme << " " << r.length;
    if (r.length == 4) {  // learned at the training length, on a fixed seed (1 step: 11%; 30 steps: 64% / 9%)
      EXPECT_GT(r.token_accuracy, 0.9) << r.scheme;
      EXPECT_GT(r.sequence_accuracy, 0.5) << r.scheme;
    }
  }
  EXPECT_NO_THROW(torch_layer::load_model(c.training.out_dir + "/sort-rope.pt"));
  EXPECT_NE(format_sort_table(rows, c).find("n/a"), std::string::npos);
}

// Clipped RoPE (Li et al. 2026): rope-clip<n> models train with their n lowest frequencies softly
// clipped (the lowest to 0) and are scored beside rope; n outside [2, head_dim / 2] is refused.
TEST(Lab, ClippedRopeModelsTrainWithTheirScheduleAndAreRowsOfTheirOwn) {
  ExtrapolateConfig c = tiny("lab_rope_clip", {"rope"});
  c.extensions = {RopeExtension::kNone};
  c.rope_clips = {4};
  const ExtrapolateResult r = run_extrapolate(c);
  double rope = -1, clipped = -1;
  for (const ResultRow& row : r.rows) {
    if (row.eval_len != 32) continue;
    if (row.model == "rope") rope = row.bpc;
    if (row.model == "rope-clip4") clipped = row.bpc;
  }
  ASSERT_GT(rope, 0);
  ASSERT_GT(clipped, 0);
  EXPECT_NE(rope, clipped);
  const std::string key = test::slurp(c.training.out_dir + "/rope-clip4.result.json");
  EXPECT_NE(key.find("\"clip_low\": 4"), std::string::npos) << key.substr(0, 400);
  c.rope_clips = {9};  // head_dim 16: 8 frequencies
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "--rope-clips must be in [2, 8], got 9");
  c.rope_clips = {1};
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "--rope-clips must be in [2, 8], got 1");
}

}  // namespace
}  // namespace posenc::lab
