// `posenc gguf`: a GGUF file's positional metadata, llama.cpp's schedule, and (with --config)
// its agreement with Hugging Face's.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {

// Adds the `gguf` subcommand; exit 1 (ChecksFailed) when the schedules disagree.
void add_gguf_command(CLI::App& app);

}  // namespace posenc::cli
