// `posenc bench rope`: kernel throughput against the machine's memory ceiling.
#pragma once

namespace CLI {
class App;
}

namespace posenc::cli {
void add_bench_command(CLI::App& app);
}
