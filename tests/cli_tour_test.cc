// `posenc tour` end to end (issue 32): every step runs and every claim it measures passes, in both
// languages with the same numbers; the pictures are drawn; docs/tour.md and docs/tour.zh.md are
// the tour's own output.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_run.h"
#include "golden.h"

namespace {

using posenc::testing::run;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliTour, EveryStepRunsAndEveryClaimPasses) {
  const std::string dir = posenc::testing::temp_path("tour");
  const auto en = run("tour --out " + dir);
  ASSERT_EQ(en.code, 0) << en.out << en.err;
  EXPECT_EQ(count(en.out, "FAIL "), 0) << en.out;
  EXPECT_GE(count(en.out, "PASS "), 18) << en.out;
  EXPECT_EQ(count(en.out, "[9/9]"), 1);
  for (const char* picture : {"sinusoidal-table.svg", "sinusoidal-dot.svg", "erratum-base.svg", "float32-angles.svg",
                              "cross-terms.svg", "rope-sine-term.svg", "alibi-head0.svg", "rope-2d.svg"}) {
    const std::string path = dir + "/" + picture;
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_NE(posenc::testing::read_file(path).find("<svg"), std::string::npos) << path;
  }
  const auto zh = run("tour --lang zh");
  ASSERT_EQ(zh.code, 0) << zh.err;
  EXPECT_NE(zh.out.find("没有位置的注意力看到的是集合"), std::string::npos);
  EXPECT_EQ(count(zh.out, "PASS "), count(en.out, "PASS "));
}

TEST(CliTour, OneStepListAndBadInput) {
  const auto one = run("tour erratum-base");
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("erratum.is_base_1e8"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("permutation"), std::string::npos) << one.out;
  const auto list = run("tour --list");
  EXPECT_EQ(list.code, 0);
  EXPECT_EQ(count(list.out, "\n"), 9);
  EXPECT_CLEAN_ERROR(run("tour no-such-step"), "no tour step 'no-such-step'", "permutation");
  EXPECT_EQ(run("tour --lang fr").code, 2);
}

TEST(CliTour, CommittedDocsAreTheToursOwnOutput) {
  for (const auto& [lang, file] : {std::pair{"en", "tour.md"}, std::pair{"zh", "tour.zh.md"}}) {
    SCOPED_TRACE(file);
    const auto r = run(std::string("tour --markdown --lang ") + lang);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(posenc::testing::read_file(std::string(POSENC_DOCS_DIR) + "/" + file), r.out)
        << "regenerate with scripts/make-tour-docs.sh";
  }
}

}  // namespace
