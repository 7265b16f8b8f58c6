// posenc — positional encodings of transformers. Thin: parse, call the library, print.
// Exit codes: 0 success, 2 bad input (message on stderr), 1 internal error.
#include <CLI/CLI.hpp>
#include <iostream>

#include "freqs_command.h"
#include "posenc/error.h"

int main(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings of transformers, exact and fast"};
  app.require_subcommand(1);
  posenc::cli::add_freqs_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and usage hint
    return 2;
  } catch (const posenc::Error& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "posenc: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
