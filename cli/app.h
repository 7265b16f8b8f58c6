// The posenc command line as a function: main() and the CLI fuzzer both call it.
// Exit codes: 0 success, 2 bad input (message on stderr), 1 a failed check, an internal error or
// standard output that could not be written (a full disk).
#pragma once

namespace posenc::cli {
int run_cli(int argc, char** argv);
}
