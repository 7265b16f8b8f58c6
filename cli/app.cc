// The posenc command line: every subcommand, the error policy. Thin: parse, call the library, print.
// Exit codes: 0 success, 2 bad input (message on stderr), 1 a failed check, an internal error or
// standard output that could not be written (a full disk).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
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
