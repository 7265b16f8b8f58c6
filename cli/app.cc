// The posenc command line: every subcommand, the error policy. Thin: parse, call the library, print.
// Exit codes: 0 success, 2 bad input (message on stderr), 1 a failed check, an internal error or
// standard output that could not be written (a full disk).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "app.h"
#include "posenc/error.h"

namespace {

// Output that never reached its destination (a full disk, a closed pipe, /dev/full) is a
// failure, not a success: buffered bytes are written only here, at the end.
bool stdout_written() {
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && !std::cout.fail()) return true;
  std::cerr << "posenc: error: cannot write to standard output" << (errno ? std::string(": ") + std::strerror(errno) : "")
            << "\n";
  return false;
}

}  // namespace

namespace {

// The option named `name` of the deepest command being parsed (bench rope's --heads, not
// another command's), or of app itself; null if none has it.
const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands())  // the ones given on the command line
    if (const CLI::Option* opt = find_option(*sub, name)) return opt;
  for (const CLI::Option* opt : app.get_options())
    if (opt->check_name(name)) return opt;
  return nullptr;
}

// For CLI11's "Could not convert: --tokens = 9223372036854775807" on a flag typed INT32, INT64,
// UINT32 or UINT64 (options.h's integer_type_name): "--tokens must be an integer in [lo, hi]
// (INT32), got 9223372036854775807"; empty for any other flag or message.
std::string integer_range_refusal(const CLI::App& app, const std::string& message) {
  const std::string head = "Could not convert: ";
  const std::size_t at = message.find(head), eq = message.find(" = ");
  if (at == std::string::npos || eq == std::string::npos || eq < at) return "";
  const std::string flag = message.substr(at + head.size(), eq - at - head.size()), value = message.substr(eq + 3);
  const CLI::Option* opt = find_option(app, flag);
  if (!opt) return "";
  const std::string type = opt->get_type_name();
  const char* range = type == "INT32"    ? "[-2147483648, 2147483647]"
                      : type == "INT64"  ? "[-9223372036854775808, 9223372036854775807]"
                      : type == "UINT32" ? "[0, 4294967295]"
                      : type == "UINT64" ? "[0, 18446744073709551615]"
                                         : nullptr;
  if (!range) return "";
  return flag + " must be an integer in " + range + " (" + type + "; --help gives the flag's own limits), got " + value.substr(0, 80);
}

// CLI11 (2.1) converts 64-bit integers with strtoll / strtoull and does not look at ERANGE, so
// 99999999999999999999 became 9223372036854775807, a number the user never typed, which the
// flag's own range check then named. Each integer flag of every command refuses such a value
// before it is converted, naming it.
void refuse_integer_overflow(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type.rfind("INT", 0) != 0 && type.rfind("UINT", 0) != 0) continue;
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    opt->check(CLI::Validator(
        [is_unsigned](std::string& value) {
          const bool digits = !value.empty() && std::all_of(value.begin() + (value[0] == '-' || value[0] == '+'), value.end(),
                                                            [](char c) { return c >= '0' && c <= '9'; });
          if (!digits) return std::string();  // not a plain integer: CLI11's conversion names it
          errno = 0;
          if (is_unsigned) std::strtoull(value.c_str(), nullptr, 10);
          else std::strtoll(value.c_str(), nullptr, 10);
          return errno == ERANGE ? value.substr(0, 80) + " is beyond a 64-bit integer's range" : std::string();
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_integer_overflow(*sub);
}

}  // namespace

int posenc::cli::run_cli(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings of transformers, exact and fast"};
  app.require_subcommand(1);
  posenc::cli::add_freqs_command(app);
  posenc::cli::add_table_command(app);
  posenc::cli::add_check_command(app);
  posenc::cli::add_tour_command(app);
  posenc::cli::add_bench_command(app);
#ifdef POSENC_WITH_TORCH
  posenc::cli::add_lab_command(app);
#endif
  posenc::cli::add_plot_command(app);
  posenc::cli::add_explain_command(app);
  posenc::cli::add_spec_command(app);
  posenc::cli::add_golden_command(app);
  posenc::cli::add_gguf_command(app);
  refuse_integer_overflow(app);
  const auto commands = app.get_subcommands({});
  const bool known = argc > 1 && std::any_of(commands.begin(), commands.end(),
                                              [&](const CLI::App* c) { return c->check_name(argv[1]); });
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "posenc: error: unknown command '" << argv[1] << "'; commands:";
    for (const CLI::App* sub : commands) std::cerr << " " << sub->get_name();
    std::cerr << " (posenc --help)\n";
    return 2;
  }
  // run_cli may run many times in one process (the fuzzer): start from a clean stdout state.
  std::clearerr(stdout);
  std::cout.clear();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's own refusals (an option not expected, given twice, a value its checks reject) in the
    // form of posenc's: one line that says what and where to look.
    const std::string command = argc > 1 && argv[1][0] != '-' ? std::string(" ") + argv[1] : "";
    // A conversion failure names the value but not why: say what a value must be.
    if (dynamic_cast<const CLI::ConversionError*>(&e)) {
      const std::string range = integer_range_refusal(app, e.what());
      if (!range.empty()) {
        std::cerr << "posenc: error: " << range << " (posenc" << command << " --help)\n";
        return 2;
      }
    }
    const char* why = dynamic_cast<const CLI::ConversionError*>(&e)
                          ? "; expected a value of the flag's type (--help shows it) small enough for that type"
                          : "";
    std::cerr << "posenc: error: " << e.what() << why << " (posenc" << command << " --help)\n";
    return 2;
  } catch (const posenc::cli::ChecksFailed&) {
    return 1;
  } catch (const posenc::Error& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "posenc: internal error: " << e.what() << "\n";
    return 1;
  }
  return stdout_written() ? 0 : 1;
}
