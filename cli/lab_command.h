// `posenc lab extrapolate`: train short, test long.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {
void add_lab_command(CLI::App& app);
}
