// `posenc plot ...` and `posenc explain`: pictures and a plain-language report.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {
void add_plot_command(CLI::App& app);
void add_explain_command(CLI::App& app);
}
