// `lab leaderboard` end to end on a tiny corpus and tiny models (seconds): the three experiments
// over two seeds, the files it writes, a second run that reuses every model, the settings it
// refuses, and the report rendered by a real browser (Debian's chromium, headless): a picture
// that is not blank, no console message, and its script run to the end.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "lab_leaderboard_tiny.h"
#include "lab_support.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/leaderboard.h"
#include "posenc_plot/heatmap.h"

namespace posenc::lab {
namespace {

using test::tiny_board;

std::set<std::string> rows_of(const nlohmann::json& results, const std::string& metric) {
  std::set<std::string> rows;
  for (const auto& a : results["aggregates"])
    if (a["metric"] == metric) rows.insert(a["row"].get<std::string>());
  return rows;
}

TEST(LeaderboardRun, RunsEveryExperimentPerSeedAndAggregatesThem) {
  const LeaderboardConfig c = tiny_board("leaderboard-run");
  const LeaderboardResult r = run_leaderboard(c);
  for (const char* f : {"results.json", "results.csv", "leaderboard.md", "report.html"}) EXPECT_TRUE(std::filesystem::exists(c.out_dir + "/" + f)) << f;
  test::expect_no_tmp(c.out_dir);
  const nlohmann::json j = nlohmann::json::parse(test::slurp(c.out_dir + "/results.json"));
  EXPECT_FALSE(j["commit"].get<std::string>().empty());
  EXPECT_EQ(rows_of(j, "bpc"), (std::set<std::string>{"nope", "alibi", "rope", "rope+pi", "rope+yarn"}));
  EXPECT_EQ(rows_of(j, "passkey"), (std::set<std::string>{"alibi", "rope", "rope+pi"}));  // passkey's own subset
  EXPECT_EQ(rows_of(j, "multikey"), rows_of(j, "passkey"));
  EXPECT_EQ(rows_of(j, "sort_tokens"), (std::set<std::string>{"nope", "alibi", "rope"}));
  EXPECT_EQ(rows_of(j, "train_tokens_per_s"), (std::set<std::string>{"nope", "alibi", "rope"}));
  EXPECT_EQ(rows_of(j, "retrieval_step"), (std::set<std::string>{"alibi", "rope"}));
  for (const auto& a : j["aggregates"]) {
    EXPECT_EQ(a["seeds"].get<int>() + a["missing"].get<int>(), 2) << a;  // every number over both seeds
    if (a["metric"] == "bpc") {
      EXPECT_GT(a["mean"].get<double>(), 0) << a;
      EXPECT_DOUBLE_EQ(a["multiple"].get<double>() * 16, std::round(a["multiple"].get<double>() * 16));
    }
  }
  for (const auto& a : r.aggregates) {
    if (a.metric == "train_tokens_per_s") {
      EXPECT_GT(a.mean, 0) << a.row;
    }
  }
  EXPECT_EQ(j["claims"].size(), 8u);
  // The seeds trained different weights: some bpc differs between them.
  bool differs = false;
  for (const auto& a : r.aggregates) differs = differs || (a.metric == "bpc" && a.spread > 0);
  EXPECT_TRUE(differs);
  // The sorting task ran once per seed, whatever the corpora.
  EXPECT_TRUE(std::filesystem::exists(c.out_dir + "/digits/seed-1/sort/sort-rope.pt"));

  // Again: every model is found cached, and the numbers are the same.
  const auto stamp = std::filesystem::last_write_time(c.out_dir + "/posenc_tiny_corpus0/seed-0/extrapolate/rope.ckpt");
  const LeaderboardResult again = run_leaderboard(c);
  EXPECT_EQ(std::filesystem::last_write_time(c.out_dir + "/posenc_tiny_corpus0/seed-0/extrapolate/rope.ckpt"), stamp);
  ASSERT_EQ(again.observations.size(), r.observations.size());
  for (std::size_t i = 0; i < r.observations.size(); ++i) {
    if (r.observations[i].metric == "train_tokens_per_s" || r.observations[i].metric == "train_s") continue;
    EXPECT_TRUE(again.observations[i].value == r.observations[i].value ||
                  (std::isnan(again.observations[i].value) && std::isnan(r.observations[i].value)))
          << r.observations[i].row << " " << r.observations[i].metric;
  }
}

// Runs chromium headless on file; its stderr goes to log. The exit status.
int chromium(const std::string& flags, const std::string& file, const std::string& out, const std::string& log) {
  const std::string cmd = "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr --v=0 " + flags +
                          " 'file://" + file + "' > '" + out + "' 2> '" + log + "'";
  return std::system(cmd.c_str());
}

TEST(LeaderboardRun, TheReportRendersInABrowser) {
  ASSERT_EQ(std::system("command -v chromium > /dev/null"), 0) << "chromium is missing: run scripts/install-deps.sh (Debian's chromium)";
  const LeaderboardConfig c = tiny_board("leaderboard-render");
  run_leaderboard(c);
  const std::string report = std::filesystem::absolute(c.out_dir + "/report.html").string();
  const std::string png = c.out_dir + "/report.png", log = c.out_dir + "/chromium.log", dom = c.out_dir + "/dom.html";
  ASSERT_EQ(chromium("--window-size=1280,1600 --screenshot='" + png + "'", report, "/dev/null", log), 0) << test::slurp(log);
  EXPECT_EQ(test::slurp(log).find("CONSOLE"), std::string::npos) << test::slurp(log);
  int w = 0, h = 0;
  std::vector<std::uint8_t> rgb;
  const std::string bytes = test::slurp(png);
  plot::decode_png(std::vector<std::uint8_t>(bytes.begin(), bytes.end()), &w, &h, &rgb);
  EXPECT_EQ(w, 1280);
  std::set<std::uint32_t> colours;
  std::size_t inked = 0;
  for (std::size_t i = 0; i + 2 < rgb.size(); i += 3) {
    colours.insert(rgb[i] << 16 | rgb[i + 1] << 8 | rgb[i + 2]);
    inked += rgb[i] < 200 || rgb[i + 1] < 200 || rgb[i + 2] < 200;
  }
  EXPECT_GT(colours.size(), 50u);               // text, tables, charts, heatmap colours
  EXPECT_GT(inked, rgb.size() / 3 / 100);       // more than 1% of the page is drawn on
  // The page's script ran to its end (it marks the body), and the charts are in the DOM.
  ASSERT_EQ(chromium("--dump-dom", report, dom, log), 0) << test::slurp(log);
  EXPECT_EQ(test::slurp(log).find("CONSOLE"), std::string::npos) << test::slurp(log);
  const std::string d = test::slurp(dom);
  EXPECT_NE(d.find("data-ready=\"1\""), std::string::npos);
  EXPECT_NE(d.find("<svg"), std::string::npos);
  // Every column of every table sorts on a click, both ways, without an error (a copy of the
  // report with a script that clicks each header twice, then marks the body).
  std::string page = test::slurp(report);
  const std::string clicks =
      "<script>document.querySelectorAll('table.board th').forEach(function(th){th.click();th.click();});"
      "document.body.dataset.clicked='1';</script></body>";
  page.replace(page.rfind("</body>"), 7, clicks);
  const std::string clicked = c.out_dir + "/clicked.html";
  std::ofstream(clicked) << page;
  ASSERT_EQ(chromium("--dump-dom", std::filesystem::absolute(clicked).string(), dom, log), 0) << test::slurp(log);
  EXPECT_EQ(test::slurp(log).find("CONSOLE"), std::string::npos) << test::slurp(log);
  EXPECT_NE(test::slurp(dom).find("data-clicked=\"1\""), std::string::npos);
}

TEST(LeaderboardRun, BadSettingsNameTheValueAndWhatWasExpected) {
  LeaderboardConfig c = tiny_board("leaderboard-bad");
  c.seeds = {0, 0};
  EXPECT_HAS(test::error_of([&] { run_leaderboard(c); }), "--seeds: seed 0 is given twice");
  c.seeds = {0};
  c.schemes = {"rope", "roap"};
  EXPECT_HAS(test::error_of([&] { run_leaderboard(c); }), "'roap'");
  c.schemes.clear();
  EXPECT_HAS(test::error_of([&] { run_leaderboard(c); }), "--schemes is empty");
  EXPECT_FALSE(std::filesystem::exists(c.out_dir + "/results.json"));  // nothing written
}

// Every corpus is read and checked, and a corpus given twice refused, before the output
// directory is made or a model trains (a missing second corpus was found after the first was done).
TEST(LeaderboardRun, EveryCorpusIsCheckedBeforeAnythingIsMade) {
  LeaderboardConfig c = tiny_board("leaderboard-corpora");
  c.seeds = {0};
  const std::string tiny = test::tiny_corpus(), other_dir = ::testing::TempDir() + "leaderboard-corpora-other";
  std::filesystem::create_directories(other_dir);
  std::ofstream(other_dir + "/" + std::filesystem::path(tiny).filename().string()) << "another text of the same file name";
  const std::string too_short = ::testing::TempDir() + "leaderboard-short.txt";
  std::ofstream(too_short) << std::string(300, 'a');
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{tiny, tiny}, "--corpora: " + tiny + " is given twice"},
      {{tiny, other_dir + "/" + std::filesystem::path(tiny).filename().string()}, "would share the name"},
      {{tiny, ::testing::TempDir() + "leaderboard-missing.txt"}, "leaderboard-missing.txt' not found"},
      {{tiny, too_short}, "leaderboard-short.txt"},
      {{::testing::TempDir() + "digits.txt"}, "would be named 'digits', the sorting task's rows"},
  };
  for (const auto& [corpora, says] : cases) {
    c.corpora = corpora;
    EXPECT_HAS(test::error_of([&] { run_leaderboard(c); }), says);
    EXPECT_FALSE(std::filesystem::exists(c.out_dir)) << says << ": made before every corpus was checked";
  }
}

// A bad --out is the lab's usage error naming it (it was an internal filesystem error).
TEST(LeaderboardRun, AnOutputDirectoryItCannotUseIsNamed) {
  const std::string base = ::testing::TempDir() + "leaderboard-bad-out";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  std::ofstream(base + "/file") << "a file";
  std::filesystem::create_symlink(base + "/nothing/here", base + "/dangling");
  std::filesystem::create_symlink(base + "/loop2", base + "/loop1");
  std::filesystem::create_symlink(base + "/loop1", base + "/loop2");
  LeaderboardConfig c = tiny_board("leaderboard-bad-out-unused");
  for (const std::string& out : {base + "/file", base + "/file/sub", base + "/dangling", base + "/loop1", std::string("/dev/null"),
                                 base + "/" + std::string(300, 'n'), std::string()}) {
    c.out_dir = out;
    EXPECT_HAS(test::error_of([&] { run_leaderboard(c); }), "--out: cannot use '" + out + "' as the output directory (");
  }
}

// Two runs into one directory: the second waits for the first, then reuses its models (both
// wrote <out>/results.json.tmp at once, and one failed after all its work).
TEST(LeaderboardRun, ASecondRunIntoTheSameDirectoryWaitsThenFinishes) {
  LeaderboardConfig c = tiny_board("leaderboard-concurrent");
  c.seeds = {0};
  std::filesystem::create_directories(c.out_dir);
  std::optional<DirLock> first(std::in_place, c.out_dir);  // a run in progress
  std::string error = "(not finished)";
  std::thread second([&] { error = test::error_of([&] { run_leaderboard(c); }); });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto entries = std::distance(std::filesystem::directory_iterator(c.out_dir), std::filesystem::directory_iterator());
  EXPECT_EQ(entries, 1) << "wrote beside the .lock while another run held the directory";
  first.reset();
  second.join();
  EXPECT_EQ(error, "(no error)");
  EXPECT_TRUE(std::filesystem::exists(c.out_dir + "/results.json"));
}

}  // namespace
}  // namespace posenc::lab
