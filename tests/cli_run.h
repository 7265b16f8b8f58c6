// Running the posenc binary from tests: exit code, stdout and stderr.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace posenc::testing {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

std::string temp_path(const std::string& suffix);
CliRun run(const std::string& args);                 // posenc ARGS
// posenc ARGS under a wall-clock limit (killed at `seconds`, exit code 137) and an address-space
// limit (`megabytes`; an allocation beyond it fails): a hang or a runaway allocation shows as a
// wrong exit code instead of stalling or swapping the test machine.
CliRun run_bounded(const std::string& args, int seconds = 20, int megabytes = 2048);
// posenc ARGS after a shell prefix that sets its limits, e.g. "ulimit -f 128; " (a file-size limit).
CliRun run_limited(const std::string& shell_limits, const std::string& args);
nlohmann::json run_json(const std::string& args);    // posenc ARGS --json; expects exit 0
std::string write_config(const nlohmann::json& config);  // a temp file holding config

// Exit code 2 and every part named on stderr (a hostile input refused cleanly).
::testing::AssertionResult clean_error(const CliRun& r, std::initializer_list<std::string> parts);
#define EXPECT_CLEAN_ERROR(r, ...) EXPECT_TRUE(posenc::testing::clean_error((r), {__VA_ARGS__}))

// posenc ARGS refused as a usage error: exit 2 with `mention` in stderr.
struct UsageError {
  std::string args, mention;
};
// Runs each case and expects its UsageError; with nothing_on_stdout, also an empty stdout.
void expect_usage_errors(const std::vector<UsageError>& cases, bool nothing_on_stdout = false);

}  // namespace posenc::testing
