// The lab over several ranks on 127.0.0.1: data parallel equals one process, --distribute models
// gives the same table, results and progress lines say how many ranks there were, a killed rank
// is named by the survivor within the timeout and a rerun finishes with the numbers of an
// uninterrupted run, and bad launcher values are usage errors.
// Every run is bounded (timeout -s KILL), so a hang fails the test instead of stalling it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "checkpoint.h"
#include "cli_run.h"
#include "lab_support.h"
#include "posenc_lab/progress.h"

namespace posenc::lab {
namespace {

namespace fs = std::filesystem;
using posenc::testing::CliRun;
using posenc::testing::run_bounded;
using posenc::testing::run_limited;
using test::slurp;


std::string out_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "posenc_dist_" + name;
  fs::remove_all(d);
  return d;
}

// A tiny language-model run: 20 steps, two eval lengths.
std::string extrapolate(const std::string& schemes, const std::string& out) {
  return "lab extrapolate --corpus " + test::tiny_corpus() + " --schemes " + schemes +
         " --extensions none,ntk --train-len 16 --eval-lens 16,32 --steps 20 --out " + out + " --dist-timeout 10 --json";
}

nlohmann::json results_of(const CliRun& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out)["results"] : nlohmann::json::array();
}

// "<world_size> <distribute>" of a results object ("?" where a field is missing).
std::string world_of(const std::string& json) {
  if (json.empty()) return "?";
  const auto j = nlohmann::json::parse(json);
  return (j.contains("world_size") ? std::to_string(j["world_size"].get<int>()) : "?") + " " +
         (j.contains("distribute") ? j["distribute"].get<std::string>() : "?");
}

TEST(LabDistributed, TwoRanksTrainAsOneProcess) {
  const std::string one = out_dir("dp_one"), two = out_dir("dp_two");
  const CliRun plain = run_bounded(extrapolate("rope,alibi", one), 120);
  const auto single = results_of(plain);
  const CliRun r = run_bounded(extrapolate("rope,alibi", two) + " --nproc 2", 120);
  const auto split = results_of(r);
  EXPECT_HAS(r.err, "train rope [2 ranks]");
  EXPECT_HAS(r.err, " tok/s  ETA");  // a progress line, not the summary
  EXPECT_HAS(r.out, "world size 2");
  // The world size is a field of the results, on stdout and in results.json.
  EXPECT_EQ(world_of(plain.out), "1 data");
  EXPECT_EQ(world_of(r.out), "2 data");
  EXPECT_EQ(world_of(slurp(one + "/results.json")), "1 data");
  EXPECT_EQ(world_of(slurp(two + "/results.json")), "2 data");
  ASSERT_EQ(single.size(), split.size());
  for (std::size_t i = 0; i < single.size(); ++i)
    EXPECT_NEAR(single[i]["bpc"].get<double>(), split[i]["bpc"].get<double>(), 1e-4) << single[i].dump();
  for (const std::string model : {"rope", "alibi"}) {
    const auto a = read_checkpoint_header(one + "/" + model + ".ckpt").losses, b = read_checkpoint_header(two + "/" + model + ".ckpt").losses;
    ASSERT_EQ(a.size(), 20u);
    ASSERT_EQ(b.size(), 20u);
    for (std::size_t s = 0; s < a.size(); ++s) EXPECT_NEAR(a[s], b[s], 1e-5) << model << " step " << s;
  }
}

TEST(LabDistributed, WholeModelsOverTwoRanksGiveTheSameTable) {
  const auto single = results_of(run_bounded(extrapolate("nope,rope,alibi", out_dir("models_one")), 120));
  const CliRun r = run_bounded(extrapolate("nope,rope,alibi", out_dir("models_two")) + " --nproc 2 --distribute models", 120);
  EXPECT_EQ(results_of(r), single);
  EXPECT_HAS(r.out, "whole models handed out");
  EXPECT_EQ(world_of(r.out), "2 models");
}

// lab passkey over two ranks: the grid and the probe points of one process, with whole models
// handed out (the same bits) and with each model data parallel (within summation order).
TEST(LabDistributed, PasskeyOverTwoRanksMatchesOneProcess) {
  const std::string args = "lab passkey --corpus " + test::tiny_corpus() +
                           " --schemes rope,alibi --train-len 40 --steps 6 --batch 4 --layers 1 --d-model 32 --heads 2 "
                           "--multiples 1,2 --depths 0,1 --samples 2 --finetune-steps 0 --probe-every 3 --extensions none,pi "
                           "--json --dist-timeout 10 --out ";
  const std::string one_dir = out_dir("passkey_one");
  const CliRun one = run_bounded(args + one_dir, 60);
  ASSERT_EQ(one.code, 0) << one.err;
  const auto single = nlohmann::json::parse(one.out);
  ASSERT_FALSE(single["results"].empty());
  ASSERT_FALSE(single["probes"].empty());
  const CliRun models = run_bounded(args + out_dir("passkey_models") + " --nproc 2 --distribute models", 60);
  ASSERT_EQ(models.code, 0) << models.err;
  EXPECT_EQ(nlohmann::json::parse(models.out)["results"], single["results"]);
  EXPECT_EQ(nlohmann::json::parse(models.out)["probes"], single["probes"]);
  EXPECT_EQ(world_of(one.out), "1 data");
  EXPECT_EQ(world_of(models.out), "2 models");
  const CliRun data = run_bounded(args + out_dir("passkey_data") + " --nproc 2", 60);
  ASSERT_EQ(data.code, 0) << data.err;
  const auto split = nlohmann::json::parse(data.out);
  ASSERT_EQ(split["results"].size(), single["results"].size());
  for (std::size_t i = 0; i < split["results"].size(); ++i)
    EXPECT_NEAR(split["results"][i]["logprob"].get<double>(), single["results"][i]["logprob"].get<double>(), 1e-4) << i;
  ASSERT_EQ(split["probes"].size(), single["probes"].size());
  EXPECT_EQ(world_of(data.out), "2 data");
  EXPECT_HAS(data.err, "rope: step 6, exact match");  // rank 0 reports each probe once
  EXPECT_EQ(data.err.find("rope: step 6, exact match"), data.err.rfind("rope: step 6, exact match"));
  for (std::size_t i = 0; i < split["probes"].size(); ++i)
    EXPECT_NEAR(split["probes"][i]["logprob"].get<double>(), single["probes"][i]["logprob"].get<double>(), 1e-4) << i;

  // Resumed on two ranks: the single run's checkpoints with their rows gone and each model's last
  // probe point unwritten (killed between the checkpoint and the point). The ranks take rank 0's
  // points and step, measure the point again on the same weights, and score the grid.
  const std::string resumed_dir = out_dir("passkey_resumed");
  fs::copy(one_dir, resumed_dir, fs::copy_options::recursive);
  for (const std::string model : {"rope", "alibi"}) {
    fs::remove(resumed_dir + "/" + model + ".passkey.json");
    nlohmann::json probes = nlohmann::json::parse(slurp(resumed_dir + "/" + model + ".probes.json"));
    ASSERT_EQ(probes["probes"].back()["step"], 6);
    probes["probes"].erase(probes["probes"].size() - 1);
    std::ofstream(resumed_dir + "/" + model + ".probes.json") << probes.dump();
  }
  const CliRun resumed = run_bounded(args + resumed_dir + " --nproc 2", 60);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_HAS(resumed.err, "rope: step 6, exact match");  // measured again
  const auto again = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(again["results"], single["results"]);  // rank 0 scored the checkpoint's weights
  ASSERT_EQ(again["probes"].size(), single["probes"].size());
  for (std::size_t i = 0; i < again["probes"].size(); ++i)
    EXPECT_NEAR(again["probes"][i]["logprob"].get<double>(), single["probes"][i]["logprob"].get<double>(), 1e-6) << i;
}

TEST(LabDistributed, SortOverTwoRanksMatchesOneProcess) {
  const std::string args = "lab sort --schemes rope,alibi --train-len 4 --test-lens 4,6 --steps 10 --json --dist-timeout 10 --out ";
  const std::string two_dir = out_dir("sort_two");
  const CliRun one = run_bounded(args + out_dir("sort_one"), 120), two = run_bounded(args + two_dir + " --nproc 2", 120);
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_EQ(world_of(one.out), "1 data");
  EXPECT_EQ(world_of(two.out), "2 data");
  EXPECT_EQ(world_of(slurp(two_dir + "/results.json")), "2 data");
  const auto a = nlohmann::json::parse(one.out)["results"], b = nlohmann::json::parse(two.out)["results"];
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i]["token_accuracy"].get<double>(), b[i]["token_accuracy"].get<double>(), 0.02);
}

// Rank `rank` of 2 as its own process (the launcher contract), stderr to a file.
pid_t start_rank(int rank, int port, const std::string& args, const std::string& err) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    // posenc itself (no shell in between), so a kill reaches the rank.
    const std::string cmd = "exec " + std::string(POSENC_CLI) + " " + args + " >/dev/null 2>" + err;
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The exit status of pid, killing it when it outlives `seconds` (then -1).
int wait_bounded(pid_t pid, int seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

TEST(LabDistributed, AKilledRankIsNamedAndARerunFinishesAsAnUninterruptedRun) {
  const std::string dir = out_dir("killed"), err0 = dir + ".err0", err1 = dir + ".err1";
  const std::string args = extrapolate("rope,alibi", dir);
  const int port = test::free_port();
  const pid_t r0 = start_rank(0, port, args, err0), r1 = start_rank(1, port, args, err1);
  // rope finished (its result is on disk): alibi is training now; kill rank 1.
  const auto start = std::chrono::steady_clock::now();
  while (!fs::exists(dir + "/rope.result.json") && std::chrono::steady_clock::now() - start < std::chrono::seconds(100))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!fs::exists(dir + "/rope.result.json")) {
    kill(r0, SIGKILL);
    kill(r1, SIGKILL);
    waitpid(r0, nullptr, 0);
    waitpid(r1, nullptr, 0);
    FAIL() << slurp(err0);
  }
  kill(r1, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  wait_bounded(r1, 5);
  const int status = wait_bounded(r0, 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(seconds, 10 + 5) << "the survivor took longer than --dist-timeout";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << slurp(err0);
  EXPECT_HAS(slurp(err0), "lost rank 1");
  EXPECT_TRUE(fs::exists(dir + "/rope.result.json"));  // finished models survive
  // The rerun reuses rope and trains alibi; the numbers are those of an uninterrupted run.
  const CliRun again = run_bounded(args + " --nproc 2", 120);
  EXPECT_HAS(again.err, "rope: finished earlier");
  EXPECT_EQ(results_of(again), results_of(run_bounded(extrapolate("rope,alibi", out_dir("uninterrupted")) + " --nproc 2", 120)));
}

TEST(LabProgress, ShowsTheRanksAndTheThroughputOfAllOfThem) {
  ProgressLine line{"train rope", 2, 120, 600, 2.3104, 9300.4, 12.2};
  EXPECT_EQ(format_progress_line(line), "train rope [2 ranks]: 120/600  loss 2.310  9,300 tok/s  ETA 12s");
  line.ranks = 1;
  line.loss = std::nan("");
  line.tokens_per_second = 0;
  EXPECT_EQ(format_progress_line(line), "train rope: 120/600  ETA 12s");
  EXPECT_EQ(group_thousands(999), "999");
  EXPECT_EQ(group_thousands(1234567.6), "1,234,568");
  EXPECT_EQ(group_thousands(-1000), "-1,000");
}

// Ranks started with different settings stop, every one of them, naming the setting and both
// values (before this check one rank exited 0 and the other blamed a lost rank; test settings
// that differed were ignored, training settings that differed were detected but not named).
TEST(LabDistributed, RanksWithDifferentSettingsNameTheSetting) {
  const std::string base = "lab sort --train-len 4 --dist-timeout 10 --out ";
  const std::string same = " --test-lens 4 --steps 4";
  struct Case {
    std::string rank0, rank1, says;
  } cases[] = {{"--schemes rope" + same, "--schemes rope,alibi" + same, "models differs between the ranks"},
               {"--schemes rope --distribute data" + same, "--schemes rope --distribute models" + same, "distribute differs between the ranks"},
               {"--schemes rope" + same, "--schemes rope --world-size 3" + same, "world_size differs between the ranks"},
               {"--schemes rope --steps 4 --test-lens 4", "--schemes rope --steps 4 --test-lens 6",
                "test_lens differs between the ranks: rank "},
               {"--schemes rope --test-lens 4 --steps 4", "--schemes rope --test-lens 4 --steps 5", "steps differs between the ranks: rank "}};
  int n = 0;
  for (const Case& c : cases) {
    const std::string dir = out_dir("mismatch" + std::to_string(n++)), err0 = dir + ".err0", err1 = dir + ".err1";
    const int port = test::free_port();
    const pid_t r0 = start_rank(0, port, base + dir + " " + c.rank0, err0), r1 = start_rank(1, port, base + dir + " " + c.rank1, err1);
    const int s0 = wait_bounded(r0, 60), s1 = wait_bounded(r1, 60);
    EXPECT_TRUE(WIFEXITED(s0) && WEXITSTATUS(s0) == 2) << c.says << ": rank 0 status " << s0 << "\n" << slurp(err0);
    EXPECT_TRUE(WIFEXITED(s1) && WEXITSTATUS(s1) == 2) << c.says << ": rank 1 status " << s1 << "\n" << slurp(err1);
    EXPECT_HAS(slurp(err0), c.says);
    EXPECT_HAS(slurp(err1), c.says);
  }
  // Both values, each rank's own first.
  EXPECT_HAS(slurp(out_dir("mismatch3") + ".err0"), "rank 0 has [4], rank 1 has [6]");
  EXPECT_HAS(slurp(out_dir("mismatch4") + ".err1"), "rank 1 has 5, rank 0 has 4");
}

TEST(LabDistributed, BadLauncherValuesAreUsageErrorsNamingThem) {
  const std::string base = "lab sort --schemes rope --steps 1 --out " + out_dir("bad") + " ";
  struct Case {
    std::string args, says;
  } cases[] = {{"--world-size 0", "--world-size"},
               {"--rank 2 --world-size 2", "--rank (RANK) must be in [0, 1]"},
               {"--master-port 70000", "--master-port"},
               {"--nproc 2 --rank 0 --world-size 2", "give one or the other"},
               // the launcher's store is at a free port on 127.0.0.1: these would point its ranks elsewhere
               {"--nproc 2 --master-port 29788", "--master-port 29788 is for one process per host"},
               {"--nproc 2 --master-addr 10.0.0.1", "--master-addr '10.0.0.1' is for one process per host"},
               {"--distribute rows", "--distribute"},
               {"--rank 1 --world-size 2 --master-addr 127.0.0.1 --master-port " + std::to_string(test::free_port()) + " --dist-timeout 2",
                "cannot reach the master at 127.0.0.1:"}};
  for (const Case& c : cases) {
    const CliRun r = run_bounded(base + c.args, 30);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_HAS(r.err, c.says);
  }
  // From the environment: the value as given, and --nproc inside another launcher's rank.
  const CliRun far = run_limited("export RANK=5000 WORLD_SIZE=2; ", base);
  EXPECT_EQ(far.code, 2) << far.err;
  EXPECT_HAS(far.err, "got 5000");
  const CliRun nested = run_limited("export RANK=0 WORLD_SIZE=2; ", base + "--nproc 2 --dist-timeout 2");
  EXPECT_EQ(nested.code, 2) << nested.err;
  EXPECT_HAS(nested.err, "unset RANK and WORLD_SIZE, or leave out --nproc");
  for (const std::string world : {"0", "-3"}) {  // set, WORLD_SIZE is a size (0 meant "not given")
    const CliRun r = run_limited("export RANK=0 WORLD_SIZE=" + world + "; ", base);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_HAS(r.err, "WORLD_SIZE must be in [1, 1024], got " + world);
  }
}

// More local ranks than rows of a batch: the launcher refuses once, before starting any rank
// (each of 33 ranks was started, and each printed the refusal).
TEST(LabDistributed, ABatchTooSmallForTheRanksIsRefusedBeforeTheyStart) {
  const std::string dir = out_dir("split");
  const CliRun r = run_bounded("lab extrapolate --corpus " + test::tiny_corpus() +
                                   " --schemes nope --train-len 16 --eval-lens 16,32 --steps 1 --nproc 33 --out " + dir, 60);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_HAS(r.err, "a batch of 32 rows cannot be split across 33 ranks");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one refusal, from the launcher:\n" << r.err;
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace posenc::lab
