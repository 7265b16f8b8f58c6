// `posenc tour` end to end (issue 32): every step runs and every claim it measures passes, in both
// languages with the same numbers; the pictures are drawn; docs/tour.md and docs/tour.zh.md are
// the tour's own output.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.h"
#include "golden.h"
#include "tiny_corpus.h"

namespace {

using posenc::testing::run;

// Built with libtorch, the tour's lab steps train (tiny models on the tiny corpus, in a folder of
// the test's own: ctest runs the tests at once, and a test's second tour reuses its models);
// without, they say they cannot.
bool has_lab() { return run("lab --help").code == 0; }

std::string tour(const std::string& args) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return "tour " + args + " --corpus " + posenc::lab::test::tiny_corpus() + " --lab-dir " + posenc::testing::temp_path("tour_lab_" + test);
}

// The markdown without the lab steps' numbers (between the two comments): what depends on this
// machine's training.
std::string without_lab_runs(std::string text) {
  const std::string begin = "<!-- lab run:", end = "<!-- end of lab run -->\n";
  for (std::size_t at = text.find(begin); at != std::string::npos; at = text.find(begin, at)) {
    const std::size_t stop = text.find(end, at);
    if (stop == std::string::npos) break;
    text.erase(at, stop + end.size() - at);
  }
  return text;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliTour, EveryStepRunsAndEveryClaimPasses) {
  const std::string dir = posenc::testing::temp_path("tour");
  const auto en = run(tour("--out " + dir));
  ASSERT_EQ(en.code, 0) << en.out << en.err;
  EXPECT_EQ(count(en.out, "FAIL "), 0) << en.out;
  // 37 claims of the steps without training, 6 of the five lab steps.
  EXPECT_GE(count(en.out, "PASS "), has_lab() ? 37 + 6 : 37) << en.out;
  EXPECT_EQ(count(en.out, "[20/20]"), 1);
  std::vector<std::string> pictures = {"sinusoidal-table.svg", "sinusoidal-dot.svg", "erratum-base.svg", "float32-angles.svg",
                                       "cross-terms.svg", "rope-sine-term.svg", "alibi-head0.svg", "rope-2d.svg", "raw-integer.svg",
                                       "learned-16.svg", "learned-resized-32.svg", "deberta-buckets.svg",
                                       "heatmap-bug-no-position.svg"};
  if (has_lab())
    pictures.insert(pictures.end(), {"raw-integer-loss.svg", "learned-trained.svg", "learned-trained-interpolated.svg",
                                     "sort-heads-attention.svg"});
  else
    EXPECT_EQ(count(en.out, "built without (libtorch)"), 5) << en.out;
  for (const std::string& picture : pictures) {
    const std::string path = dir + "/" + picture;
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_NE(posenc::testing::read_file(path).find("<svg"), std::string::npos) << path;
  }
  const auto zh = run(tour("--lang zh"));
  ASSERT_EQ(zh.code, 0) << zh.err;
  EXPECT_NE(zh.out.find("没有位置的注意力看到的是集合"), std::string::npos);
  EXPECT_EQ(count(zh.out, "PASS "), count(en.out, "PASS "));
}

TEST(CliTour, OneStepListAndBadInput) {
  const auto one = run(tour("erratum-base"));
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("erratum.is_base_1e8"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("permutation"), std::string::npos) << one.out;
  const auto list = run("tour --list");
  EXPECT_EQ(list.code, 0);
  EXPECT_EQ(count(list.out, "\n"), 20);
  EXPECT_CLEAN_ERROR(run("tour no-such-step"), "no tour step 'no-such-step'", "permutation");
  EXPECT_EQ(run("tour --lang fr").code, 2);
}

// The closing table of docs/tour.md: every audit item of issue 32 with the step that shows it, as
// measured in the same run (a row naming a step that does not exist stops the tour).
TEST(CliTour, CoverageNamesStepsThatRunAndPass) {
  const auto r = run(tour("--markdown"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::size_t at = r.out.find("## Coverage");
  ASSERT_NE(at, std::string::npos);
  const std::string table = r.out.substr(at);
  EXPECT_EQ(count(table, "\n| "), 1 + 21) << table;  // the header and the items, one row each
  EXPECT_NE(table.find("`posenc tour padding` (4/4 PASS)"), std::string::npos) << table;
  EXPECT_NE(table.find("`posenc tour sort-heads` (a training run)"), std::string::npos) << table;
  EXPECT_NE(table.find("21 shown whole, 0 in part, 0 not yet"), std::string::npos) << table;
  EXPECT_EQ(run("tour padding --markdown").out.find("## Coverage"), std::string::npos);  // only with every step
}

TEST(CliTour, CommittedDocsAreTheToursOwnOutput) {
  for (const auto& [lang, file] : {std::pair{"en", "tour.md"}, std::pair{"zh", "tour.zh.md"}}) {
    SCOPED_TRACE(file);
    const auto r = run(tour(std::string("--markdown --lang ") + lang));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string docs = posenc::testing::read_file(std::string(POSENC_DOCS_DIR) + "/" + file);
    EXPECT_EQ(count(docs, "<!-- lab run:"), 5) << "the five lab steps, each between its two comments";
    EXPECT_EQ(count(docs, "<!-- end of lab run -->"), 5);
    EXPECT_EQ(without_lab_runs(docs), without_lab_runs(r.out)) << "regenerate with scripts/make-tour-docs.sh";
  }
}

}  // namespace
