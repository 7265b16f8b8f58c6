// `posenc golden`: test vectors (safetensors + JSON manifest) an engine checks itself against.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {

// Adds the `golden` subcommand to app; its callback writes DIR/golden.safetensors and DIR/manifest.json.
void add_golden_command(CLI::App& app);

}  // namespace posenc::cli
