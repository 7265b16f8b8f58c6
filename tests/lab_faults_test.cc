// The lab under faults: a full disk (a file-size limit stands in for it: write() fails with EFBIG
// as it fails with ENOSPC), corrupt checkpoints and result files, a process killed with SIGKILL
// mid-training, and settings out of range. Every failure is an Error naming the file or the
// value; the previous file stays intact; no .tmp is left; no NaN is reported as a result.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "checkpoint.h"
#include "lab_support.h"
#include "lm_eval.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/sort_task.h"

namespace posenc::lab {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::expect_no_tmp;
using test::slurp;
using test::tiny;

// RLIMIT_FSIZE for the scope: writes past `bytes` fail with EFBIG (SIGXFSZ ignored).
struct FileSizeLimit {
  rlimit saved{};
  explicit FileSizeLimit(rlim_t bytes) {
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &saved);
    rlimit l = saved;
    l.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved); }
};


TEST(LabWrites, AFailedWriteNamesTheFileKeepsThePreviousOneAndLeavesNoTmp) {
  const std::string dir = ::testing::TempDir() + "lab_write_fail";
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic(dir + "/a.json", "previous");
  {
    FileSizeLimit limit(4096);
    const std::string e = error_of([&] { write_file_atomic(dir + "/a.json", std::string(100000, 'x')); });
    EXPECT_HAS(e, dir + "/a.json");
    EXPECT_HAS(e, "File too large");
  }
  EXPECT_EQ(slurp(dir + "/a.json"), "previous");
  expect_no_tmp(dir);
  EXPECT_HAS(error_of([&] { write_file_atomic(dir + "/no/such/dir/b.json", "x"); }), "No such file or directory");
}

// The ranks of one run may write the same file at once (a shared vocabulary, a result both
// evaluate): each write succeeds and the file is one writer's whole bytes, never an error because
// the other renamed a temp file away.
TEST(LabWrites, TwoProcessesWritingOneFileBothSucceed) {
  const std::string dir = ::testing::TempDir() + "lab_write_race";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = dir + "/shared.json";
  const std::string mine(20000, 'p'), theirs(30000, 'c');
  write_file_atomic(path, mine);  // a write before the fork: the child must not take this process's temp name
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  const std::string& bytes = child == 0 ? theirs : mine;
  int failures = 0;
  for (int i = 0; i < 300; ++i) {
    try {
      write_file_atomic(path, bytes);
    } catch (const Error&) {
      ++failures;
    }
  }
  if (child == 0) _exit(failures == 0 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(failures, 0) << "writes of this process failed";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writes of the other process failed";
  const std::string last = slurp(path);
  EXPECT_TRUE(last == mine || last == theirs) << last.size() << " bytes";
  expect_no_tmp(dir);
}

TEST(LabWrites, DiskFullWhileCheckpointingKeepsTheLastCheckpointAndResumesExactly) {
  const ExtrapolateResult straight = run_extrapolate(tiny("lab_full_straight", {"alibi"}));
  ExtrapolateConfig c = tiny("lab_full_ckpt", {"alibi"});
  c.stop_after_steps = 7;
  run_extrapolate(c);  // a checkpoint at step 7
  const std::string ckpt = c.training.out_dir + "/alibi.ckpt", before = slurp(ckpt);
  c.stop_after_steps = -1;
  {
    FileSizeLimit limit(16 * 1024);  // smaller than a checkpoint
    const std::string e = error_of([&] { run_extrapolate(c); });
    EXPECT_HAS(e, ckpt);
    EXPECT_HAS(e, "File too large");
  }
  EXPECT_EQ(slurp(ckpt), before) << "the previous checkpoint is intact";
  expect_no_tmp(c.training.out_dir);
  const ExtrapolateResult resumed = run_extrapolate(c);
  ASSERT_EQ(resumed.rows.size(), straight.rows.size());
  for (std::size_t i = 0; i < resumed.rows.size(); ++i) EXPECT_EQ(resumed.rows[i].bpc, straight.rows[i].bpc) << i;
}

TEST(LabWrites, DiskFullWhileSavingTheModelNamesIt) {
  ExtrapolateConfig c = tiny("lab_full_model", {"alibi"});
  run_extrapolate(c);
  fs::remove(c.training.out_dir + "/alibi.result.json");
  fs::remove(c.training.out_dir + "/alibi.pt");
  {
    FileSizeLimit limit(8 * 1024);
    const std::string e = error_of([&] { run_extrapolate(c); });
    EXPECT_HAS(e, c.training.out_dir + "/alibi.pt");
    EXPECT_EQ(e.find('\n'), std::string::npos) << "one line, no libtorch trace: " << e;
  }
  expect_no_tmp(c.training.out_dir);
  EXPECT_FALSE(fs::exists(c.training.out_dir + "/alibi.pt"));
}

// A run cut at step 7 whose checkpoint is then damaged by `damage`; resuming must name the file.
std::string resume_after(const std::string& name, const std::function<void(const std::string& ckpt)>& damage) {
  ExtrapolateConfig c = tiny(name, {"alibi"});
  c.stop_after_steps = 7;
  run_extrapolate(c);
  damage(c.training.out_dir + "/alibi.ckpt");
  c.stop_after_steps = -1;
  return error_of([&] { run_extrapolate(c); });
}

TEST(LabCorrupt, DamagedCheckpointsAreNamedWithTheFix) {
  const std::string overwritten = resume_after("lab_bad_ckpt1", [](const std::string& p) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(p) / 2));
    f << std::string(64, '\x7f');
  });
  EXPECT_HAS(overwritten, "alibi.ckpt is corrupt (checksum mismatch)");
  EXPECT_HAS(overwritten, "delete it");
  EXPECT_HAS(resume_after("lab_bad_ckpt2", [](const std::string& p) { fs::resize_file(p, fs::file_size(p) / 2); }), "truncated");
  EXPECT_HAS(resume_after("lab_bad_ckpt3", [](const std::string& p) { fs::resize_file(p, 0); }), "alibi.ckpt is corrupt (empty file)");
}

TEST(LabCorrupt, NonFiniteWeightsInAValidCheckpointAreRefused) {
  const std::string e = resume_after("lab_nan_ckpt", [](const std::string& p) {
    const CheckpointHeader h = read_checkpoint_header(p);
    torch_layer::TransformerLM model(torch_layer::config_from_json(h.train_key.at("model").dump()));
    torch::optim::AdamW optimizer(model->parameters());
    load_checkpoint(p, *model, &optimizer, h.train_key);
    torch::NoGradGuard no_grad;
    for (auto& w : model->parameters()) w.fill_(std::nan(""));
    save_checkpoint(p, *model, &optimizer, h.step, h.train_key);  // a checksum that matches
  });
  EXPECT_HAS(e, "alibi.ckpt is corrupt");
  EXPECT_HAS(e, "NaN");
}

TEST(LabCorrupt, DamagedResultFilesAreNamedWithTheFix) {
  ExtrapolateConfig c = tiny("lab_bad_result", {"alibi"});
  run_extrapolate(c);
  const std::string path = c.training.out_dir + "/alibi.result.json", good = slurp(path);
  fs::resize_file(path, good.size() / 2);
  std::string e = error_of([&] { run_extrapolate(c); });
  EXPECT_HAS(e, path + " is corrupt");
  EXPECT_HAS(e, "delete it");
  fs::resize_file(path, 0);
  EXPECT_HAS(error_of([&] { run_extrapolate(c); }), path + " is corrupt (empty)");
  std::string nan_row = good;
  const auto at = nan_row.find("\"bpc\": ");
  nan_row.replace(at, nan_row.find(',', at) - at, "\"bpc\": null");
  std::ofstream(path) << nan_row;
  EXPECT_HAS(error_of([&] { run_extrapolate(c); }), path + " was changed after posenc wrote it (checksum mismatch)");
  // A row without a finite bpc is refused even when its checksum holds (a writer's bug, not an edit).
  const nlohmann::json saved = nlohmann::json::parse(nan_row);
  write_cached_rows(path, {saved["key"]["train"], saved["key"]["eval"]}, saved["rows"]);
  EXPECT_HAS(error_of([&] { run_extrapolate(c); }), "marked available without a finite bpc");
}

TEST(LabCorrupt, ANonFiniteScoreIsNeverMarkedAvailable) {
  ModelPlan plan;
  plan.name = "rope";
  Score s;
  s.nll = std::nan("");
  s.tokens = 10;
  const ResultRow r = make_row(plan, "none", 16, s);
  EXPECT_FALSE(r.available);
  ExtrapolateResult result;
  result.rows = {r};
  ExtrapolateConfig c;
  EXPECT_EQ(results_json(result, c).find("\"available\": true"), std::string::npos);
  EXPECT_EQ(results_svg(result, c).find("nan"), std::string::npos);
}

// SIGKILL mid-training in a child process (this binary in its child mode: main() below), then
// resumed here: the same numbers as an uninterrupted run.
ExtrapolateConfig kill_config(const std::string& dir) {
  ExtrapolateConfig c = tiny("lab_kill_unused", {"alibi"});
  c.training.out_dir = dir;
  c.training.steps = 400;
  c.training.warmup = 20;
  return c;
}

TEST(LabKill, SigkillMidTrainingThenResume) {
  const std::string dir = ::testing::TempDir() + "lab_kill";
  fs::remove_all(dir);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("POSENC_LAB_KILL_CHILD", dir.c_str(), 1);
    execl("/proc/self/exe", "posenc_lab_tests", static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string ckpt = dir + "/alibi.ckpt";
  for (int i = 0; i < 60000 && !fs::exists(ckpt); ++i) usleep(1000);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child ended before the kill";
  ASSERT_TRUE(fs::exists(ckpt));
  EXPECT_FALSE(fs::exists(dir + "/alibi.result.json"));
  const long at = read_checkpoint_header(ckpt).step;
  EXPECT_LT(at, 400) << "killed mid-training";
  std::ofstream(dir + "/rope.ckpt.tmp") << "half a checkpoint";  // as a kill mid-write of another run leaves it
  const ExtrapolateResult resumed = run_extrapolate(kill_config(dir));
  expect_no_tmp(dir);
  const std::string straight_dir = ::testing::TempDir() + "lab_kill_straight";
  fs::remove_all(straight_dir);
  const ExtrapolateResult straight = run_extrapolate(kill_config(straight_dir));
  ASSERT_EQ(resumed.rows.size(), straight.rows.size());
  for (std::size_t i = 0; i < resumed.rows.size(); ++i) EXPECT_EQ(resumed.rows[i].bpc, straight.rows[i].bpc) << i << " (killed at step " << at << ")";
}

TEST(LabConcurrent, ASecondRunIntoTheSameDirectoryWaitsThenFinishes) {
  const ExtrapolateConfig c = tiny("lab_concurrent", {"alibi"});
  fs::create_directories(c.training.out_dir);
  std::optional<DirLock> first(std::in_place, c.training.out_dir);  // a run in progress
  std::string error = "(not finished)";
  std::thread second([&] { error = error_of([&] { run_extrapolate(c); }); });
  usleep(300000);
  EXPECT_FALSE(fs::exists(c.training.out_dir + "/alibi.ckpt")) << "wrote while another run held the directory";
  first.reset();
  second.join();
  EXPECT_EQ(error, "(no error)");
  EXPECT_TRUE(fs::exists(c.training.out_dir + "/alibi.result.json"));
}

TEST(LabLimits, SettingsOutOfRangeAreErrorsBeforeAnyTraining) {
  ExtrapolateConfig c = tiny("lab_limits", {"rope"});
  auto error_with = [&](const std::function<void(ExtrapolateConfig&)>& change) {
    ExtrapolateConfig bad = c;
    change(bad);
    return error_of([&] { run_extrapolate(bad); });
  };
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.training.train_len = 2147483647; }), "--train-len must be in [2, 512], got 2147483647");
  const std::string threads_range = "--threads must be in [0, " + std::to_string(max_lab_threads()) + "], got ";
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.training.threads = 100000; }), threads_range + "100000");
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.training.threads = max_lab_threads() + 1; }), threads_range);
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.training.threads = -1; }), "--threads");
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.schemes.clear(); }), "--schemes is empty");
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.extensions.clear(); }), "--extensions is empty: give at least one of none, pi, ntk, dynamic, yarn");
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.shape.d_model = 30; }), "--d-model must be a multiple of 4 (heads x an even head width), got 30");
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.eval_lens = {16, 100000}; }), "--eval-lens must be in [2, 16384]");
  EXPECT_HAS(error_with([](ExtrapolateConfig& b) { b.training.train_len = 200, b.pi_finetune_steps = 5; }), "[2, 128], got 200");
  EXPECT_FALSE(fs::exists(c.training.out_dir)) << "nothing trained, nothing written";
  const std::string short_corpus = ::testing::TempDir() + "lab_short_corpus.txt";
  std::ofstream(short_corpus) << std::string(300, 'a');
  const std::string e = error_with([&](ExtrapolateConfig& b) {
    b.corpus = short_corpus;
    b.training.train_len = 500;
    b.eval_lens = {16};
  });
  EXPECT_HAS(e, "(270 tokens) is shorter than 502, the training length 500 + 2");
  SortConfig s;
  s.training.out_dir = ::testing::TempDir() + "lab_limits_sort";
  s.training.train_len = 100000;
  EXPECT_HAS(error_of([&] { run_sort(s); }), "--train-len must be in [1, 64], got 100000");
  s.training.train_len = 4;
  s.training.threads = 100000;
  EXPECT_HAS(error_of([&] { run_sort(s); }), threads_range + "100000");
  s.training.threads = 0;
  s.schemes.clear();
  EXPECT_HAS(error_of([&] { run_sort(s); }), "--schemes is empty");
}

}  // namespace
}  // namespace posenc::lab

// The tests, or (POSENC_LAB_KILL_CHILD set to a directory) the child of
// LabKill.SigkillMidTrainingThenResume: it trains into that directory until it is killed.
int main(int argc, char** argv) {
  if (const char* dir = std::getenv("POSENC_LAB_KILL_CHILD")) {
    posenc::lab::run_extrapolate(posenc::lab::kill_config(dir));
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
