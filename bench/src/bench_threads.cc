#include "posenc_bench/bench_threads.h"

#include <algorithm>
#include <string>
#include <thread>

#include "posenc/error.h"
#include "posenc/threads.h"

namespace posenc::bench {

int machine_threads() { return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxThreads); }

void check_bench_threads(int requested, const char* what, const char* zero_means) {
  if (requested < 0 || requested > machine_threads())
    throw Error(std::string(what) + ": --threads must be in [0, " + std::to_string(machine_threads()) +
                "] (this machine's hardware threads; 0: " + zero_means + "), got " + std::to_string(requested));
}

}  // namespace posenc::bench
