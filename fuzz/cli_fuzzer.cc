// libFuzzer: the argument handling of `posenc freqs` and `posenc table`. The input is split at
// newlines into arguments; the first byte picks the command. Bad arguments must end in exit
// code 2 with a message; an internal error (exit 1) or a crash is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app.h"

// Run with -close_fd_mask=3 (make fuzz does): the commands' own stdout/stderr are closed,
// libFuzzer's reports still print.

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 512) return 0;
  std::vector<std::string> args = {"posenc", (data[0] & 1) ? "table" : "freqs"};
  std::string current;
  for (std::size_t i = 1; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.size() > 24) return 0;
  for (const auto& a : args)  // no output files, no help screens (they exit 0, harmlessly, but slowly)
    if (a == "-o" || a == "--out") return 0;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int code = posenc::cli::run_cli(static_cast<int>(args.size()), argv.data());
  if (code == 1) std::abort();  // "internal error": an exception that is not posenc::Error
  return 0;
}
