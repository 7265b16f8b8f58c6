#include "cli_run.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"

namespace posenc::testing {

std::string temp_path(const std::string& suffix) {
  static int counter = 0;
  return ::testing::TempDir() + "posenc_cli_" + std::to_string(getpid()) + "_" + std::to_string(++counter) + suffix;
}

namespace {

CliRun run_command(const std::string& prefix, const std::string& args) {
  const std::string err_file = temp_path(".err");
  const std::string cmd = prefix + std::string(POSENC_CLI) + " " + args + " 2>" + err_file;
  CliRun r{-1, "", ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  while (std::size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_file);
  std::remove(err_file.c_str());
  return r;
}

}  // namespace

CliRun run(const std::string& args) { return run_command("", args); }

CliRun run_limited(const std::string& shell_limits, const std::string& args) {
  return run_command(shell_limits + "exec ", args);
}

#if defined(__SANITIZE_ADDRESS__)
#define POSENC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POSENC_TEST_ASAN 1
#endif
#endif

CliRun run_bounded(const std::string& args, int seconds, int megabytes) {
#ifdef POSENC_TEST_ASAN
  (void)megabytes;  // AddressSanitizer reserves terabytes of address space: time limit only
  const std::string memory;
#else
  const std::string memory = "ulimit -v " + std::to_string(megabytes * 1024) + "; ";
#endif
  return run_command(memory + "exec timeout -s KILL " + std::to_string(seconds) + " ", args);
}

::testing::AssertionResult clean_error(const CliRun& r, std::initializer_list<std::string> parts) {
  if (r.code != 2) return ::testing::AssertionFailure() << "exit code " << r.code << ", stderr: " << r.err;
  for (const auto& part : parts)
    if (r.err.find(part) == std::string::npos) return ::testing::AssertionFailure() << "'" << part << "' not in: " << r.err;
  return ::testing::AssertionSuccess();
}

nlohmann::json run_json(const std::string& args) {
  const CliRun r = run(args + " --json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

std::string write_config(const nlohmann::json& config) {
  const std::string path = temp_path(".json");
  std::ofstream(path) << config.dump();
  return path;
}

void expect_usage_errors(const std::vector<UsageError>& cases, bool nothing_on_stdout) {
  for (const UsageError& c : cases) {
    SCOPED_TRACE(c.args);
    const CliRun r = run(c.args);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(c.mention), std::string::npos) << r.err;
    if (nothing_on_stdout) {
      EXPECT_TRUE(r.out.empty()) << r.out;
    }
  }
}

}  // namespace posenc::testing
