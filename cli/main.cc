// posenc — positional encodings of transformers.
#include "app.h"

int main(int argc, char** argv) { return posenc::cli::run_cli(argc, argv); }
