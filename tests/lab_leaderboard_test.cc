// The leaderboard's arithmetic and text (milliseconds): aggregation over seeds, the experiments'
// results as observations, the literature's claims judged from measured numbers, and the report's
// content and self-containment.
#include <gtest/gtest.h>

#include <tuple>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc_lab/train_timing.h"

#include "leaderboard_files.h"
#include "posenc_lab/leaderboard.h"

namespace posenc::lab {
namespace {

Aggregate at(const std::vector<Aggregate>& all, const std::string& row, const std::string& metric, double multiple, double depth = -1) {
  for (const Aggregate& a : all)
    if (a.row == row && a.metric == metric && a.multiple == multiple && a.depth == depth) return a;
  ADD_FAILURE() << "no aggregate " << row << " " << metric << " " << multiple << " " << depth;
  return {};
}

TEST(Leaderboard, AggregatesTheMeanAndTheSampleStandardDeviationOverSeeds) {
  const std::vector<Observation> obs = {{"kjv", "rope", "bpc", 2, -1, 0, 2.0},      {"kjv", "rope", "bpc", 2, -1, 1, 3.0},
                                        {"kjv", "rope", "bpc", 2, -1, 2, 4.0},      {"kjv", "alibi", "bpc", 2, -1, 0, 2.5},
                                        {"kjv", "rope", "retrieval_step", 0, -1, 0, 500}, {"kjv", "rope", "retrieval_step", 0, -1, 1, NAN}};
  const std::vector<Aggregate> all = aggregate(obs);
  ASSERT_EQ(all.size(), 3u);
  const Aggregate rope = at(all, "rope", "bpc", 2);
  EXPECT_DOUBLE_EQ(rope.mean, 3.0);
  EXPECT_DOUBLE_EQ(rope.spread, 1.0);  // sqrt(((-1)^2 + 0 + 1^2) / (3 - 1))
  EXPECT_EQ(rope.seeds, 3);
  const Aggregate alibi = at(all, "alibi", "bpc", 2);
  EXPECT_DOUBLE_EQ(alibi.spread, 0.0);  // one seed: no spread
  const Aggregate step = at(all, "rope", "retrieval_step", 0);
  EXPECT_DOUBLE_EQ(step.mean, 500);  // the seed that never switched on is counted apart
  EXPECT_EQ(step.seeds, 1);
  EXPECT_EQ(step.missing, 1);
  EXPECT_EQ(cell_text(&step), "500 (1 never)");
  EXPECT_EQ(cell_text(&rope), "3.00 ± 1.00");
  EXPECT_EQ(cell_text(nullptr), "—");
}

TEST(Leaderboard, ObservesEachExperimentsRowsByLengthMultiple) {
  ExtrapolateConfig ec;
  ec.training.train_len = 64;
  ExtrapolateResult er;
  auto row = [](const std::string& model, const std::string& extension, int len, bool available, double bpc) {
    ResultRow r;
    r.model = r.scheme = model;
    r.extension = extension;
    r.eval_len = len;
    r.available = available;
    r.bpc = bpc;
    return r;
  };
  er.rows = {row("rope", "yarn", 256, true, 2.5), row("learned", "none", 256, false, NAN), row("rope", "none", 64, true, 2.0),
             row("rope", "pi+finetune", 256, true, 2.2)};
  std::vector<Observation> obs;
  observe_extrapolate(er, ec, "kjv", &obs);
  ASSERT_EQ(obs.size(), 3u);  // the learned table's n/a row has no number
  EXPECT_EQ(obs[0].row, "rope+yarn");
  EXPECT_DOUBLE_EQ(obs[0].multiple, 4);
  EXPECT_EQ(obs[1].row, "rope");
  EXPECT_EQ(obs[2].row, "rope+pi+ft");  // passkey's name for the fine-tuned variant

  PasskeyConfig pc;
  pc.training.train_len = 64;
  pc.seed = 3;
  PasskeyResult pr;
  pr.rows = {{"rope", "rope", "pi", true, 128, 0.0, 1.0, 0, 2, 0}, {"rope", "rope", "pi", true, 128, 1.0, 0.5, 0, 2, 0},
             {"rope", "rope", "pi", true, 128, 0.0, 0.25, 0, 2, 2}};
  pr.probes = {{"rope", 100, 0.1, 0}, {"rope", 200, 0.6, 0}, {"rope", 300, 0.9, 0}, {"nope", 100, 0.2, 0}};
  obs.clear();
  observe_passkey(pr, pc, "kjv", &obs);
  // Three cells, the means over depths of the one-key and the multi-key grid, each model's retrieval step.
  ASSERT_EQ(obs.size(), 7u);
  EXPECT_EQ(obs[0].row, "rope+pi+ft");
  EXPECT_DOUBLE_EQ(obs[0].multiple, 2);
  EXPECT_DOUBLE_EQ(obs[1].depth, 1.0);
  EXPECT_EQ(obs[2].metric, "multikey");  // the row with distractors
  EXPECT_DOUBLE_EQ(obs[3].depth, -1);
  EXPECT_EQ(obs[3].metric, "passkey");
  EXPECT_DOUBLE_EQ(obs[3].value, 0.75);
  EXPECT_EQ(obs[3].seed, 3);
  EXPECT_EQ(obs[4].metric, "multikey");
  EXPECT_DOUBLE_EQ(obs[4].value, 0.25);
  EXPECT_EQ(obs[5].metric, "retrieval_step");
  EXPECT_DOUBLE_EQ(obs[5].value, 200);  // the first probe at or above one half
  EXPECT_TRUE(std::isnan(obs[6].value));  // nope never reached it

  SortConfig sc;
  sc.training.train_len = 16;
  obs.clear();
  observe_sort({{"nope", 24, true, 0.9, 0.4}, {"learned", 24, false, 0, 0}}, sc, kSortCorpus, &obs);
  ASSERT_EQ(obs.size(), 2u);
  EXPECT_DOUBLE_EQ(obs[0].multiple, 1.5);
  EXPECT_EQ(obs[1].metric, "sort_sequences");
}

// A board with ALiBi, sinusoidal and the RoPE extensions at 1x and 8x over two seeds.
LeaderboardResult board(double alibi_8x, double spread) {
  LeaderboardResult r;
  auto add = [&](const std::string& row, double multiple, double mean) {
    r.observations.push_back({"kjv", row, "bpc", multiple, -1, 0, mean - spread});
    r.observations.push_back({"kjv", row, "bpc", multiple, -1, 1, mean + spread});
  };
  add("alibi", 1, 2.2);
  add("alibi", 8, alibi_8x);
  add("sinusoidal", 1, 2.2);
  add("sinusoidal", 8, 4.4);
  add("rope+yarn", 4, 2.3);
  add("rope+ntk", 4, 2.5);
  add("rope+pi", 4, 4.3);
  r.aggregates = aggregate(r.observations);
  return r;
}

const ClaimCheck& claim(const std::vector<ClaimCheck>& all, const std::string& source_prefix) {
  for (const ClaimCheck& c : all)
    if (c.source.rfind(source_prefix, 0) == 0) return c;
  throw std::runtime_error("no claim from " + source_prefix);
}

TEST(Leaderboard, JudgesTheLiteraturesClaimsFromTheMeasuredMeans) {
  const auto flat = check_claims(board(2.21, 0.01), "kjv");
  EXPECT_EQ(claim(flat, "Press").verdict, "agrees");
  EXPECT_NE(claim(flat, "Press").measured.find("ALiBi 2.20 → 2.21"), std::string::npos) << claim(flat, "Press").measured;
  EXPECT_EQ(claim(flat, "Peng").verdict, "agrees");  // 2.3 < 2.5 < 4.3
  EXPECT_EQ(claim(flat, "Kazemnejad").verdict, "not measured");
  EXPECT_EQ(claim(flat, "Chen et al. 2023 (PI)").verdict, "not measured");
  LeaderboardResult tuned = board(2.21, 0.01);
  tuned.observations.push_back({"kjv", "rope+pi+ft", "bpc", 4, -1, 0, 2.6});
  tuned.observations.push_back({"kjv", "rope+pi+ft", "bpc", 4, -1, 1, 2.62});
  tuned.aggregates = aggregate(tuned.observations);
  EXPECT_EQ(claim(check_claims(tuned, "kjv"), "Chen et al. 2023 (PI)").verdict, "agrees");  // 2.61 against PI's 4.3
  EXPECT_EQ(claim(flat, "Li et al.").verdict, "not measured");
  // ALiBi growing by a bit past its length: the claim is not what this run saw.
  EXPECT_EQ(claim(check_claims(board(3.2, 0.01), "kjv"), "Press").verdict, "disagrees");
  // Differences within the seeds' spread are called neither way.
  EXPECT_EQ(claim(check_claims(board(2.21, 0.2), "kjv"), "Peng").verdict, "within the seeds' spread");
  EXPECT_EQ(claim(check_claims(board(2.25, 0.05), "kjv"), "Press").verdict, "within the seeds' spread");  // +0.05 ± 0.1
}

// FIRE against ALiBi and Kerple at the longest length; xPos's rise from 1x against 0.1 bit.
TEST(Leaderboard, JudgesFireAndXPosFromTheirRows) {
  const auto with = [](double fire_8x, double xpos_8x) {
    LeaderboardResult r = board(2.21, 0.01);
    for (const auto& [row, multiple, mean] : {std::tuple{"fire", 8.0, fire_8x}, std::tuple{"kerple", 8.0, 2.5}, std::tuple{"xpos", 1.0, 2.3},
                                              std::tuple{"xpos", 8.0, xpos_8x}, std::tuple{"rope", 1.0, 2.3}, std::tuple{"rope", 8.0, 4.0}})
      for (int seed : {0, 1}) r.observations.push_back({"kjv", row, "bpc", multiple, -1, seed, mean + (seed ? 0.01 : -0.01)});
    r.aggregates = aggregate(r.observations);
    return check_claims(r, "kjv");
  };
  EXPECT_EQ(claim(with(2.0, 2.35), "Li et al. 2023 (FIRE)").verdict, "agrees");  // 2.0 below ALiBi's 2.21 and Kerple's 2.5
  EXPECT_NE(claim(with(2.0, 2.35), "Li et al. 2023 (FIRE)").measured.find("fire 2.00"), std::string::npos);
  EXPECT_EQ(claim(with(2.3, 2.35), "Li et al. 2023 (FIRE)").verdict, "disagrees");  // above ALiBi
  EXPECT_EQ(claim(with(2.0, 2.35), "Sun et al.").verdict, "agrees");  // +0.05
  EXPECT_NE(claim(with(2.0, 2.35), "Sun et al.").measured.find("RoPE 2.30 → 4.00 (+1.70)"), std::string::npos)
      << claim(with(2.0, 2.35), "Sun et al.").measured;
  EXPECT_EQ(claim(with(2.0, 3.3), "Sun et al.").verdict, "disagrees");  // +1.0
  EXPECT_EQ(claim(with(2.0, 2.41), "Sun et al.").verdict, "within the seeds' spread");  // +0.11, spread 0.02
  EXPECT_EQ(claim(check_claims(board(2.21, 0.01), "kjv"), "Sun et al.").verdict, "not measured");
}

TEST(Leaderboard, TheReportIsOneSelfContainedPageWithEveryPart) {
  LeaderboardResult r = board(2.21, 0.01);
  r.observations.push_back({"kjv", "rope", "passkey", 2, 0.5, 0, 0.75});
  r.observations.push_back({"kjv", "rope", "passkey", 2, -1, 0, 0.75});
  r.aggregates = aggregate(r.observations);
  r.commit = "0123abc";
  LeaderboardConfig c = LeaderboardConfig::quick();
  c.command = "posenc lab leaderboard --quick";
  const std::string html = leaderboard_html(r, c);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("0123abc"), std::string::npos);
  EXPECT_NE(html.find("<td>alibi</td>"), std::string::npos);
  EXPECT_NE(html.find("alibi: bits per character against length"), std::string::npos);  // a chart per scheme
  EXPECT_NE(html.find("75%"), std::string::npos);                                       // the heatmap cell
  EXPECT_NE(html.find("Press et al. 2022"), std::string::npos);
  // Nothing is fetched: no link, no source, no URL but the SVG namespace.
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  std::string rest = html;
  for (std::size_t at; (at = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;) rest.erase(at, 26);
  EXPECT_EQ(rest.find("http"), std::string::npos);
  const std::string md = leaderboard_markdown(r, c);
  EXPECT_NE(md.find("| alibi | 2.20 ± 0.01 |"), std::string::npos) << md;
  const nlohmann::json j = nlohmann::json::parse(leaderboard_json(r, c));
  EXPECT_EQ(j["aggregates"].size(), r.aggregates.size());
  EXPECT_EQ(j["config"]["seeds"], nlohmann::json({0, 1}));
  EXPECT_NE(leaderboard_csv(r).find("kjv,alibi,bpc,8,,2,0,2.21,"), std::string::npos) << leaderboard_csv(r);
}

TEST(Leaderboard, TrainingTimingsRoundTripAndABadFileIsNamed) {
  const std::string ckpt = ::testing::TempDir() + "posenc_timing_model.ckpt";
  std::filesystem::remove(ckpt + ".timing.json");
  EXPECT_FALSE(read_train_timing(ckpt).has_value());  // trained before timings were kept
  write_train_timing(ckpt, {100, 300, 614400, 12.5, 1});
  const auto t = read_train_timing(ckpt);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->first_step, 100);
  EXPECT_EQ(t->steps, 300);
  EXPECT_DOUBLE_EQ(t->tokens_per_second(), 614400 / 12.5);
  std::ofstream(ckpt + ".timing.json") << "{\"steps\": -3}";
  try {
    read_train_timing(ckpt);
    ADD_FAILURE() << "a malformed timing file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(ckpt + ".timing.json: not a training timing file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc::lab
