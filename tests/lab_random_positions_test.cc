// Randomized positions in the lab (Ruoss et al. 2023): each training row at a sorted random
// subset of 0 .. L-1, drawn from the row itself (the same on any rank and on resume); a learned
// table of L rows, so the model is scored past its training length; the training key records it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "lab_support.h"
#include "lm_train.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/sort_task.h"

namespace posenc::lab {
namespace {

TEST(RandomPositions, SortedDistinctInRangeAndAFunctionOfTheRow) {
  torch::manual_seed(3);
  const torch::Tensor rows = torch::randint(0, 40, {64, 16}, torch::TensorOptions().dtype(torch::kInt64));
  const torch::Tensor p = random_positions(rows, 100, 7);
  ASSERT_EQ(p.sizes(), rows.sizes());
  std::set<std::int64_t> seen;
  for (std::int64_t b = 0; b < p.size(0); ++b) {
    for (std::int64_t i = 0; i < p.size(1); ++i) {
      const std::int64_t v = p[b][i].item<std::int64_t>();
      EXPECT_GE(v, 0);
      EXPECT_LT(v, 100);
      if (i > 0) EXPECT_GT(v, p[b][i - 1].item<std::int64_t>()) << "row " << b;
      seen.insert(v);
    }
  }
  EXPECT_GT(*seen.rbegin(), 90) << "the draws reach the end of the range";
  // A row's draw is its own: the second half of the batch alone (another rank's shard) draws the same.
  EXPECT_TRUE(torch::equal(random_positions(rows.narrow(0, 32, 32), 100, 7), p.narrow(0, 32, 32)));
  EXPECT_FALSE(torch::equal(random_positions(rows, 100, 8), p)) << "another seed, other positions";
  EXPECT_TRUE(torch::equal(random_positions(rows, 16, 7), torch::arange(16, torch::kInt64).expand({64, 16})));  // all of them
  EXPECT_THROW(random_positions(rows, 15, 7), Error);
}

// Learned absolute positions at train_len 16: without randomization no row past 16 exists; with
// positions drawn from 0 .. 63 the table has 64 rows and 32 is scored.
TEST(RandomPositions, ALearnedTableCoversTheRangeAndTheKeyRecordsIt) {
  ExtrapolateConfig plain = test::tiny("lab_random_plain", {"learned", "alibi"});
  ExtrapolateConfig randomized = test::tiny("lab_random_on", {"learned", "alibi"});
  randomized.training.randomize_positions = 64;
  const ExtrapolateResult a = run_extrapolate(plain), b = run_extrapolate(randomized);
  const auto row = [](const ExtrapolateResult& r, const std::string& model, int len) {
    return *std::find_if(r.rows.begin(), r.rows.end(), [&](const ResultRow& x) { return x.model == model && x.eval_len == len; });
  };
  EXPECT_FALSE(row(a, "learned", 32).available);
  EXPECT_TRUE(row(b, "learned", 32).available);
  EXPECT_NE(row(a, "alibi", 16).bpc, row(b, "alibi", 16).bpc) << "the positions trained on differ";
  const std::string saved = test::slurp(randomized.training.out_dir + "/alibi.result.json");
  EXPECT_NE(saved.find("\"randomize_positions\": 64"), std::string::npos) << saved.substr(0, 300);
  EXPECT_NE(test::slurp(randomized.training.out_dir + "/results.json").find("randomized positions (Ruoss et al. 2023)"), std::string::npos);
  // Another range into the same directory: refused, naming each setting that changed by its path.
  randomized.training.randomize_positions = 32;
  const std::string e = test::error_of([&] { run_extrapolate(randomized); });
  EXPECT_HAS(e, "model.learned_positions 64 then, 32 now");
  EXPECT_HAS(e, "randomize_positions 64 then, 32 now");
}

TEST(RandomPositions, ARangeShorterThanAForwardIsRefused) {
  ExtrapolateConfig c = test::tiny("lab_random_short", {"alibi"});
  c.training.randomize_positions = 15;  // train_len 16
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "--randomize-positions must be in [16, ");
  c.training.randomize_positions = 64;
  c.schemes = {"xl"};
  EXPECT_HAS(test::error_of([&] { run_extrapolate(c); }), "--randomize-positions: xl's segments carry their own positions");
  SortConfig s = test::tiny_sort("lab_random_sort");
  s.training.randomize_positions = 2 * s.training.train_len - 1;  // a forward reads 2n tokens
  EXPECT_HAS(test::error_of([&] { run_sort(s); }), "--randomize-positions must be in [" + std::to_string(2 * s.training.train_len));
  s.training.randomize_positions = 4 * s.training.train_len;
  const std::vector<SortRow> rows = run_sort(s);
  EXPECT_FALSE(rows.empty());
}

}  // namespace
}  // namespace posenc::lab
