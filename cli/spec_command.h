// `posenc spec`: a model's positional semantics per layer, from its config.json.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {

// Adds the `spec` subcommand to app; its callback prints the per-layer table or JSON.
void add_spec_command(CLI::App& app);

}  // namespace posenc::cli
