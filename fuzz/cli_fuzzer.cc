// libFuzzer: the argument handling of `posenc freqs`, `posenc table`, `posenc plot decay` and
// `posenc plot heatmap`. The input is split at newlines into arguments; the first byte picks the
// command (bit 2: plot; bit 0: table / heatmap). Bad arguments must end in exit code 2 with a
// message; an internal error (exit 1) or a crash is a bug. The plots write to one scratch file
// of this process, given as -o after the fuzzed arguments.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

#include "app.h"

// Run with -close_fd_mask=3 (make fuzz does): the commands' own stdout/stderr are closed,
// libFuzzer's reports still print.

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 512) return 0;
  const bool plot = data[0] & 4, second = data[0] & 1;
  std::vector<std::string> args = {"posenc"};
  if (plot) args.insert(args.end(), {"plot", second ? "heatmap" : "decay"});
  else args.push_back(second ? "table" : "freqs");
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
  for (const auto& a : args)  // only our own output file; no help screens (they exit 0, harmlessly, but slowly)
    if (a == "-o" || a == "--out" || a.rfind("-o", 0) == 0 || a.rfind("--out", 0) == 0) return 0;
  if (plot) {
    static const std::string scratch = "/tmp/posenc-cli-fuzz-" + std::to_string(getpid()) + ".svg";
    args.insert(args.end(), {"-o", scratch});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int code = posenc::cli::run_cli(static_cast<int>(args.size()), argv.data());
  if (code == 1) std::abort();  // "internal error": an exception that is not posenc::Error
  return 0;
}
