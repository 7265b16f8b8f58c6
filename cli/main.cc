// posenc — positional encodings of transformers.
#include <csignal>

#include "app.h"

int main(int argc, char** argv) {
  // Under a file-size limit (ulimit -f) the kernel's default for SIGXFSZ kills the process in the
  // middle of a write, leaving <file>.tmp behind. Ignored, the write fails with EFBIG instead, and
  // write_file_atomic reports it, removes the temp file and exits 2, as for a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  return posenc::cli::run_cli(argc, argv);
}
