// `posenc freqs`: the RoPE frequency schedule of a config.json or of flags.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {

// Adds the `freqs` subcommand to app; its callback prints the schedule.
void add_freqs_command(CLI::App& app);

}  // namespace posenc::cli
