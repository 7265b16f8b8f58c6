// `lab leaderboard` over two ranks, one process per rank as on two hosts (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT; rank 0 hosts the store): the board's experiments run one after
// another on the same ranks and store, and the board is the one a single process makes —
// the same numbers with whole models handed out, the same within float summation order when
// each model is trained data parallel.
//
// Beneath it, World's runs in a RunSeries: a rank that leaves a run first and joins the next
// while rank 0, the store's host, is still in the last one must find the store still there.
//
// The ranks are this test program again, started on this one test with POSENC_TEST_BOARD_RANK
// set: there the test is a rank of the run and ends when the board does.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "distributed_world.h"
#include "lab_leaderboard_tiny.h"
#include "posenc_lab/file_io.h"

extern char** environ;

namespace posenc::lab {
namespace {

bool is_rank() { return std::getenv("POSENC_TEST_BOARD_RANK") != nullptr; }

// Starts this program as `ranks` ranks of one run on 127.0.0.1, each running only the current
// test; returns their exit statuses (killed after `seconds`).
std::vector<int> run_ranks(int ranks, int seconds) {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = std::string("--gtest_filter=") + t->test_suite_name() + "." + t->name();
  const std::string port = std::to_string(test::free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> env = {"POSENC_TEST_BOARD_RANK=1", "RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(ranks),
                                    "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port};
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      if (kv.rfind("RANK=", 0) != 0 && kv.rfind("WORLD_SIZE=", 0) != 0 && kv.rfind("MASTER_", 0) != 0) env.push_back(kv);
    }
    std::vector<char*> envp, argv;
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::string timeout = "timeout", kill = "-s", sig = "KILL", secs = std::to_string(seconds),
                exe = std::filesystem::read_symlink("/proc/self/exe").string();
    argv = {timeout.data(), kill.data(), sig.data(), secs.data(), exe.data(), const_cast<char*>(filter.c_str()), nullptr};
    pid_t pid = -1;
    EXPECT_EQ(posix_spawnp(&pid, "timeout", nullptr, nullptr, argv.data(), envp.data()), 0);
    pids.push_back(pid);
  }
  std::vector<int> statuses;
  for (pid_t pid : pids) {
    int status = -1;
    waitpid(pid, &status, 0);
    statuses.push_back(status);
  }
  return statuses;
}

using Key = std::tuple<std::string, std::string, std::string, double, double, int>;

// Every observation of a board's results.json but the training speed (each run its own).
std::map<Key, double> numbers_of(const std::string& out_dir) {
  const nlohmann::json j = nlohmann::json::parse(test::slurp(out_dir + "/results.json"));
  std::map<Key, double> out;
  for (const auto& o : j["observations"]) {
    const std::string metric = o["metric"];
    if (metric.rfind("train_", 0) == 0) continue;
    const auto number = [](const nlohmann::json& v) { return v.is_null() ? -1.0 : v.get<double>(); };  // null: none (depth) or NaN
    out[{o["corpus"], o["row"], metric, number(o["multiple"]), number(o["depth"]), o["seed"]}] =
        o["value"].is_null() ? std::nan("") : o["value"].get<double>();
  }
  return out;
}

std::string notes_of(const std::string& out_dir) {
  return nlohmann::json::parse(test::slurp(out_dir + "/results.json"))["notes"].dump();
}

// The board over two ranks against one process's; tolerance 0: the same bits.
void expect_the_board_of_one_process(const std::string& distribute, double tolerance) {
  LeaderboardConfig two = test::tiny_board("leaderboard-ranks-" + distribute, !is_rank());
  two.launch.distribute = distribute;
  two.launch.timeout_seconds = 20;
  if (is_rank()) {  // a rank of the run: its part of the board, then the test ends
    run_leaderboard(two);
    return;
  }
  const LeaderboardConfig one = test::tiny_board("leaderboard-ranks-one-" + distribute);
  run_leaderboard(one);
  for (const int status : run_ranks(2, 120)) ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a rank failed: " << status;
  const auto a = numbers_of(one.out_dir), b = numbers_of(two.out_dir);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 100u);
  for (const auto& [key, value] : a) {
    ASSERT_TRUE(b.count(key)) << std::get<1>(key) << " " << std::get<2>(key);
    const double other = b.at(key);
    if (std::isnan(value)) EXPECT_TRUE(std::isnan(other)) << std::get<1>(key) << " " << std::get<2>(key);
    else EXPECT_NEAR(value, other, tolerance) << std::get<1>(key) << " " << std::get<2>(key) << " x" << std::get<3>(key);
  }
  EXPECT_NE(notes_of(two.out_dir).find("2 ranks"), std::string::npos) << notes_of(two.out_dir);
  test::expect_no_tmp(two.out_dir);
}

TEST(LeaderboardRanks, WholeModelsHandedOutGiveTheSameBoard) { expect_the_board_of_one_process("models", 0); }

TEST(LeaderboardRanks, DataParallelGivesTheSameBoardWithinSummationOrder) { expect_the_board_of_one_process("data", 1e-4); }

// A board on two ranks into an --out another run holds: rank 0 waits for the lock, beating, so
// rank 1 (waiting in the first experiment for rank 0's plan) does not call it lost within the
// 2 s timeout; when the lock is released, the board finishes.
TEST(LeaderboardRanks, ABoardOnRanksWaitsForTheRunHoldingItsOutput) {
  LeaderboardConfig c = test::tiny_board("leaderboard-ranks-wait", !is_rank());
  c.schemes = c.passkey.schemes = c.sort.schemes = {"alibi"};
  c.seeds = {0};
  c.launch.distribute = "models";
  c.launch.timeout_seconds = 2;
  if (is_rank()) {
    run_leaderboard(c);
    return;
  }
  std::unique_ptr<DirLock> held = open_out_dir(c.out_dir);  // the other run
  std::thread release([&held] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    held.reset();
  });
  const std::vector<int> statuses = run_ranks(2, 120);
  release.join();
  for (const int status : statuses) EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a rank failed: " << status;
  EXPECT_TRUE(std::filesystem::exists(c.out_dir + "/results.json"));
}

// Rank 0 hosts the store and leaves the first run two seconds after rank 1, which by then waits in
// the second: without the series, rank 0's store closed with its first run, and rank 1 lost it.
TEST(LeaderboardRanks, ARankAheadInTheNextRunKeepsTheStoreOfRankZero) {
  if (is_rank()) {
    LaunchConfig launch;
    launch.timeout_seconds = 10;
    launch = resolve_launch(launch);
    const RunSeries series(launch);
    {
      World first(launch, R"({"run": 1})");
      first.check_same(1, "the first run");
      if (first.rank() == 0) std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    World second(launch, R"({"run": 2})");
    second.check_same(2, "the second run");
    return;
  }
  for (const int status : run_ranks(2, 60)) EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a rank failed: " << status;
}

}  // namespace
}  // namespace posenc::lab
