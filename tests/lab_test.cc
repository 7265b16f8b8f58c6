// The lab on a tiny generated corpus: training lowers the loss, evaluation scores the right
// tokens, an interrupted run resumes to the same numbers, a learned table reports n/a.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"
#include "posenc/error.h"
#include "posenc_lab/sort_task.h"
#include "posenc_torch/model.h"

namespace posenc::lab {
namespace {

namespace fs = std::filesystem;

std::string tiny_corpus() {
  static const std::string path = [] {
    const std::string p = ::testing::TempDir() + "posenc_tiny_corpus.txt";
    std::ofstream out(p);
    const char* words[] = {"the", "lord", "said", "unto", "moses", "and", "they", "went", "forth", "into", "land", "of"};
    unsigned state = 12345;
    for (int i = 0; i < 6000; ++i) {
      state = state * 1103515245u + 12345u;
      out << words[(state >> 16) % 12] << ((state >> 8) % 9 == 0 ? ".\n" : " ");
    }
    return p;
  }();
  return path;
}

ExtrapolateConfig tiny(const std::string& out, std::vector<std::string> schemes) {
  ExtrapolateConfig c;
  c.corpus = tiny_corpus();
  c.schemes = std::move(schemes);
  c.extensions = {"none", "pi", "dynamic"};
  c.train_len = 16;
  c.eval_lens = {16, 32};
  c.steps = 24;
  c.batch = 8;
  c.warmup = 4;
  c.layers = 1;
  c.d_model = 32;
  c.heads = 2;
  c.eval_chars = 512;
  c.incremental_tokens = 64;
  c.checkpoint_every = 5;
  c.out_dir = ::testing::TempDir() + out;
  fs::remove_all(c.out_dir);
  return c;
}

TEST(LabCorpus, SplitAndVocabulary) {
  const Corpus c = corpus_from_text(std::string(900, 'a') + std::string(100, 'b'), 0.1);
  EXPECT_EQ(c.vocab, (std::vector<std::uint8_t>{'a', 'b'}));
  EXPECT_EQ(c.train.size(), 900u);
  EXPECT_EQ(c.valid.size(), 100u);
  EXPECT_EQ(c.valid.front(), 1);
  EXPECT_THROW(load_corpus("/nonexistent/corpus.txt"), Error);
}

TEST(Lab, TrainsEvaluatesAndReportsLengthsCorrectly) {
  const ExtrapolateConfig c = tiny("lab_basic", {"rope", "learned"});
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
    if (row.extension == "dynamic-incremental") {
      saw_incremental = true;
      EXPECT_EQ(row.tokens, std::max(1, 64 / row.eval_len) * row.eval_len);
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
  EXPECT_TRUE(fs::exists(c.out_dir + "/rope.pt")) << "the trained model, for attention maps";
  EXPECT_TRUE(fs::exists(c.out_dir + "/vocab.json"));
  // At the training length every RoPE extension is the identity.
  double none = -1, pi = -2, dynamic = -3;
  for (const ResultRow& row : r.rows) {
    if (row.scheme != "rope" || row.eval_len != 16) continue;
    if (row.extension == "none") none = row.bpc;
    if (row.extension == "pi") pi = row.bpc;
    if (row.extension == "dynamic") dynamic = row.bpc;
  }
  EXPECT_DOUBLE_EQ(none, pi);
  EXPECT_DOUBLE_EQ(none, dynamic);
  const std::string svg = results_svg(r, c);
  EXPECT_NE(svg.find("data-name=\"rope + pi\""), std::string::npos);
  EXPECT_NE(results_json(r, c).find("\"results\""), std::string::npos);
}

TEST(Lab, InterruptedRunResumesToTheSameNumbers) {
  const ExtrapolateConfig straight = tiny("lab_straight", {"alibi"});
  const ExtrapolateResult a = run_extrapolate(straight);
  ExtrapolateConfig cut = tiny("lab_cut", {"alibi"});
  cut.stop_after_steps = 7;  // killed after 7 steps (last periodic checkpoint at 5)
  const ExtrapolateResult partial = run_extrapolate(cut);
  EXPECT_FALSE(partial.complete);
  EXPECT_TRUE(fs::exists(cut.out_dir + "/alibi.ckpt"));
  EXPECT_FALSE(fs::exists(cut.out_dir + "/alibi.result.json"));
  cut.stop_after_steps = -1;
  const ExtrapolateResult b = run_extrapolate(cut);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) EXPECT_EQ(a.rows[i].bpc, b.rows[i].bpc) << i;
  // A third run reuses the finished result instead of training again.
  const ExtrapolateResult c = run_extrapolate(cut);
  EXPECT_EQ(c.rows.size(), b.rows.size());
  EXPECT_EQ(c.rows[0].bpc, b.rows[0].bpc);
  // Other settings in the same directory: an error, never a silent reuse.
  cut.steps = 30;
  EXPECT_THROW(run_extrapolate(cut), Error);
}

TEST(Lab, PiFineTuneAddsItsRows) {
  ExtrapolateConfig c = tiny("lab_pi_ft", {"rope"});
  c.extensions = {"none"};
  c.pi_finetune_steps = 6;
  const ExtrapolateResult r = run_extrapolate(c);
  int tuned = 0;
  for (const ResultRow& row : r.rows)
    if (row.extension == "pi+finetune") {
      ++tuned;
      EXPECT_TRUE(std::isfinite(row.bpc));
    }
  EXPECT_EQ(tuned, 2);
  EXPECT_TRUE(fs::exists(c.out_dir + "/rope-pi-finetune.ckpt"));
}

TEST(LabSort, ExamplesAndATinyRun) {
  const auto ex = sort_example(6, 42);
  ASSERT_EQ(ex.size(), 13u);
  EXPECT_EQ(ex[6], 10);
  std::vector<long> digits(ex.begin(), ex.begin() + 6), sorted(ex.begin() + 7, ex.end());
  std::sort(digits.begin(), digits.end());
  EXPECT_EQ(digits, sorted);
  SortConfig c;
  c.schemes = {"rope", "learned"};
  c.train_len = 4;
  c.test_lens = {4, 8};
  c.steps = 30;
  c.batch = 16;
  c.layers = 1;
  c.d_model = 32;
  c.heads = 2;
  c.test_sequences = 32;
  c.out_dir = ::testing::TempDir() + "lab_sort";
  fs::remove_all(c.out_dir);
  const auto rows = run_sort(c);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) {
    if (r.scheme == "learned" && r.length == 8) {
      EXPECT_FALSE(r.available);
      continue;
    }
    EXPECT_GE(r.token_accuracy, 0.0);
    EXPECT_LE(r.token_accuracy, 1.0);
  }
  EXPECT_NO_THROW(torch_layer::load_model(c.out_dir + "/sort-rope.pt"));
  EXPECT_NE(format_sort_table(rows, c).find("n/a"), std::string::npos);
}

}  // namespace
}  // namespace posenc::lab
