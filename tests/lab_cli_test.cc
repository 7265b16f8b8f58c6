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
      {"lab extrapolate --d-model 4096 --layers 64", "GB this machine can give"},
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

}  // namespace
}  // namespace posenc::testing
