// `posenc lab` end to end, where a user meets it: settings out of range are one-line errors that
// name the value and the limit, before any training (each case runs in well under a second).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli_run.h"
#include "tiny_corpus.h"

namespace posenc::testing {
namespace {

void expect_error(const std::string& args, const std::string& part) {
  const CliRun r = run(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_NE(r.err.find(part), std::string::npos) << args << "\n" << r.err;
  EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 3) << "a short error, not a trace: " << r.err;
}

TEST(LabCli, ThreadsAndLengthsAreBoundedWithTheLimitNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"lab extrapolate --threads 100000", "--threads"},
      {"lab extrapolate --threads -1", "--threads"},
      {"lab sort --threads 100000", "--threads"},
      {"lab sort --threads -3", "--threads"},
      {"lab extrapolate --train-len 2147483647", "[2, 512], got 2147483647"},
      {"lab extrapolate --train-len 5000", "[2, 512], got 5000"},
      {"lab extrapolate --eval-lens 64,16385", "--eval-lens: 16385 is outside [2, 16384]"},
      {"lab sort --train-len 100000", "[1, 64], got 100000"},
      {"lab sort --test-lens 16,100000", "--test-lens"},
      // a sort forward reads 2n tokens: the bound the user must meet, named first
      {"lab sort --train-len 4 --randomize-positions 3", "--randomize-positions must be in [8, 16384], got 3"},
      {"lab extrapolate --randomize-positions ''", "--randomize-positions: an empty value: give L, or 0 for off"},
      {"lab passkey --randomize-positions 16385", "--randomize-positions must be in [64, 16384], got 16385"},
  };
  for (const auto& [args, part] : cases) expect_error(args + (" --out " + temp_path("_lab")), part);
}

TEST(LabCli, EveryCommandTakesTheModelShape) {
  // --layers, --d-model and --heads reach each command's model settings, checked before training.
  const std::pair<const char*, const char*> cases[] = {
      {"lab extrapolate --d-model 30", "--d-model must be a multiple of 8 (heads x an even head width), got 30"},
      {"lab sort --heads 3 --d-model 64", "--d-model must be a multiple of 6 (heads x an even head width), got 64"},
      {"lab passkey --layers 0", "--layers must be in [1, 64], got 0"},
      {"lab extrapolate --heads 0", "--heads must be in [1, 256], got 0"},
      // Refused before anything is allocated (it reached 14.7 GB before failing).
      {"lab extrapolate --d-model 4096 --layers 64", "GB it can have (80% of "},
  };
  for (const auto& [args, part] : cases) expect_error(args + (" --out " + temp_path("_lab")), part);
}

TEST(LabCli, EmptyOrBogusListsAreRejectedUpFront) {
  const std::string dir = temp_path("_lab");
  const std::string out = " --out " + dir;
  expect_error("lab extrapolate --schemes ''" + out, "--schemes: item 1 of '' is empty");
  expect_error("lab extrapolate --schemes rope,,alibi" + out, "--schemes: item 2 of 'rope,,alibi' is empty");
  expect_error("lab extrapolate --extensions ''" + out, "--extensions: item 1 of '' is empty");
  expect_error("lab passkey --depths ''" + out, "--depths: item 1 of '' is empty");
  expect_error("lab passkey --multiples 1,,2" + out, "--multiples: item 2 of '1,,2' is empty");
  expect_error("lab extrapolate --extensions none,bogus" + out, "--extensions must be one of none|pi|ntk|dynamic|yarn|self-extend|rerope|leaky-rerope|dual-chunk, got 'bogus'");
  expect_error("lab extrapolate --schemes rope,nonsense" + out, "'nonsense'");
  expect_error("lab sort --schemes ''" + out, "--schemes: item 1 of '' is empty");
  expect_error("lab passkey --remap-groups 4,1" + out, "--remap-groups must be in [2, 16384], got 1");
  expect_error("lab passkey --remap-windows 63" + out, "--remap-windows must be in [1, 62], got 63");
  expect_error("lab extrapolate --stream --stream-sinks 64" + out, "--stream-sinks must be in [0, 63], got 64");
  EXPECT_FALSE(std::filesystem::exists(dir)) << "rejected before anything was trained or written";
}

// Issue 33's re-run: an empty --eval-lens meant the defaults; an item given twice was scored twice
// (two identical columns); --multiples was checked as a length in characters; --full's three
// seeds overflowed int.
TEST(LabCli, ListsAreReadAsGivenAndEachItemOnce) {
  const std::string dir = temp_path("_lab");
  const std::string out = " --out " + dir;
  expect_error("lab extrapolate --eval-lens ''" + out, "--eval-lens: item 1 of '' is empty");
  expect_error("lab extrapolate --eval-lens 64,128,64" + out, "--eval-lens: length 64 is given twice");
  expect_error("lab extrapolate --rope-bases 100,100" + out, "--rope-bases: base 100 is given twice");
  expect_error("lab passkey --depths 0.5,0.25,0.5" + out, "--depths: depth 0.5 is given twice");
  expect_error("lab passkey --multiples 1,1" + out, "--multiples: multiple 1 is given twice");
  expect_error("lab sort --test-lens 16,16" + out, "--test-lens: length 16 is given twice");
  expect_error("lab passkey --train-len 64 --multiples 257" + out,
               "--multiples must be in [1, 256] (m x --train-len 64 characters, at most 16384), got 257");
  expect_error("lab passkey --multiples 0" + out, "--multiples must be in [1, ");
  expect_error("lab extrapolate --full --seed 2147483647" + out, "--seed must be at most 2147483645, got 2147483647");
  EXPECT_FALSE(std::filesystem::exists(dir)) << "rejected before anything was trained or written";
}

// Issue 33's last re-run: a scheme or extension given twice was trained and scored twice (the
// table showed "7.15 ± 0.00" as two seeds); --test-lens '' meant the defaults; a NaN threshold
// named no head; --kv-heads -1 ran as 0; --seq's advice was itself refused at --repeats 3; an
// --out that is a file made --nproc's ranks wait out --dist-timeout.
TEST(LabCli, NamesListsAndValuesTheLastRerunFound) {
  const std::string dir = temp_path("_lab");
  const std::string out = " --out " + dir;
  expect_error("lab extrapolate --schemes nope,nope" + out, "--schemes: 'nope' is given twice");
  expect_error("lab extrapolate --schemes rope --extensions none,none" + out, "--extensions: 'none' is given twice");
  expect_error("lab passkey --schemes alibi,rope,alibi" + out, "--schemes: 'alibi' is given twice");
  expect_error("lab sort --schemes nope,nope" + out, "--schemes: 'nope' is given twice");
  expect_error("lab sort --test-lens ''" + out, "--test-lens: item 1 of '' is empty");
  expect_error("lab heads --model " + dir + "/sort-nope.pt --threshold nan", "--threshold must be in [0, 1], got nan");
  expect_error("bench train --schemes rope,rope --steps 1", "--schemes: 'rope' is given twice");
  expect_error("bench attention --seq 64 --heads 2 --head-dim 16 --kv-heads -1", "--kv-heads must be >= 0");
  expect_error("bench attention --seq 65536", "at most with these --repeats, --heads and --head-dim (--seq ");
  EXPECT_FALSE(std::filesystem::exists(dir)) << "rejected before anything was trained or written";
  const std::string file = temp_path("_file");
  { std::ofstream(file) << "x"; }
  // Refused by the launcher, before any rank starts: unchecked, rank 0 failed on it and rank 1 waited
  // out --dist-timeout for rank 0's heartbeat, then each rank's error followed.
  const CliRun ranks = run("lab extrapolate --schemes nope --steps 2 --nproc 2 --dist-timeout 3 --out " + file);
  EXPECT_EQ(ranks.code, 2) << ranks.err;
  EXPECT_NE(ranks.err.find("--out: cannot use '" + file + "' as the output directory"), std::string::npos) << ranks.err;
  EXPECT_EQ(ranks.err.find("rank"), std::string::npos) << "no rank started: " << ranks.err;
  std::filesystem::remove(file);
}

// The memory a run may use is the least of RAM, ulimit -v and the cgroup's limit: a model that
// fits the machine but not the limit is refused before anything is allocated (it ended in
// libtorch's allocator error with a backtrace).
TEST(LabCli, TheMemoryEstimateHonoursTheProcesssLimit) {
  const CliRun r = run_limited("ulimit -v 2000000; ", "lab sort --schemes nope --steps 2 --d-model 1024 --layers 8 --heads 4 "
                                                      "--out " + temp_path("_lab"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("80% of what is left of this process's address-space limit (ulimit -v)"), std::string::npos) << r.err;
}

// A corpus that is not UTF-8 text is refused naming the first bad byte (random bytes were
// scored and labelled "bits per byte (UTF-8 ...)").
TEST(LabCli, ACorpusMustBeUtf8) {
  const std::string bad = temp_path("_corpus.txt");
  {
    std::ofstream f(bad, std::ios::binary);
    f << "In the beginning \xe2\x80\x94 caf\xc3\xa9 \xc3(x";  // an em dash and an e-acute, then a lone lead byte
  }
  expect_error("lab extrapolate --schemes nope --steps 2 --corpus " + bad + " --out " + temp_path("_lab"),
               "is not UTF-8 text: byte 27 (0xc3)");
  std::filesystem::remove(bad);
}

// --out '' is refused by the leaderboard as by every lab command (it took '' for its default directory).
TEST(LabCli, AnEmptyOutputDirectoryIsRefused) {
  // A corpus the quick board can use (it scores 4096 characters): the tiny one, 16 times.
  std::ifstream in(lab::test::tiny_corpus());
  const std::string text((std::istreambuf_iterator<char>(in)), {}), corpus = temp_path("_board.txt");
  std::ofstream out(corpus);
  for (int i = 0; i < 16; ++i) out << text;
  out.close();
  const CliRun r = run_bounded("lab leaderboard --schemes nope --seeds 1 --steps 1 --corpora " + corpus + " --out ''", 60);
  EXPECT_CLEAN_ERROR(r, "--out: cannot use '' as the output directory");
}

// `lab vision`: bad settings are one-line errors before anything is written; a tiny run prints
// its table, writes results.json and reads the cache on a second run.
TEST(LabCli, VisionRefusesBadSettingsThenRunsEndToEnd) {
  const std::string dir = temp_path("_vision");
  std::filesystem::remove_all(dir);
  const std::string out = " --out " + dir;
  expect_error("lab vision --schemes axial,bogus" + out, "--schemes must be one of none|learned|axial|pixel|mixed, got 'bogus'");
  expect_error("lab vision --schemes ''" + out, "--schemes: item 1 of '' is empty");
  expect_error("lab vision --test-grids 8,40" + out, "--test-grids must be in [1, 32], got 40");
  expect_error("lab vision --train-grid 0" + out, "--train-grid must be in [1, 32], got 0");
  expect_error("lab vision --d-model 24 --heads 4" + out, "the head width must be a multiple of 4, got 6 (scheme axial)");
  expect_error("lab vision --steps 0" + out, "--steps must be in [1, 1000000], got 0");
  expect_error("lab vision --warmup -5" + out, "--warmup must be in [0, 1000000], got -5");
  expect_error("lab vision --batch 0" + out, "--batch must be in [1, 1024], got 0");
  expect_error("lab vision --test-images 0" + out, "--test-images must be in [1, 4096], got 0");
  EXPECT_FALSE(std::filesystem::exists(dir)) << "rejected before anything was trained or written";

  const std::string tiny = "lab vision --schemes none,axial --train-grid 4 --test-grids 4,6 --test-images 16 --steps 3 --batch 4 "
                           "--layers 1 --d-model 16 --heads 2" + out;
  const CliRun r = run_bounded(tiny, 60);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("4x4*"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("axial"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/results.json"));
  const CliRun again = run_bounded(tiny + " --json", 60);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.err.find("train vision"), std::string::npos) << "read from the cache: " << again.err;
  EXPECT_NE(again.out.find("\"train_grid\": 4"), std::string::npos) << again.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace posenc::testing
