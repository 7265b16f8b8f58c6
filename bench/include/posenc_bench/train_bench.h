// Training-speed benchmarks of the libtorch layer (`posenc bench train`). Plain C++ types only:
// callers need not include <torch/torch.h>.
#pragma once

#include <string>
#include <vector>

namespace posenc::bench {

struct TrainBenchConfig {
  std::vector<std::string> schemes = {"nope", "sinusoidal", "learned", "rope", "alibi", "t5", "xl", "deberta"};
  int layers = 3, d_model = 128, heads = 4, seq = 64, batch = 32;
  int steps = 10;    // timed steps per scheme (median), after one warm-up step
  int threads = 0;   // 0: torch's default
};

struct SchemeSpeed {
  std::string scheme;
  double step_seconds = 0;  // median
  double tokens_per_second = 0;
};

struct RopeAutogradSpeed {
  std::string shape;          // "[B, H, S, D]", "... view" for a view of [B, S, H, D] memory
  double fused_seconds = 0;   // rope() forward + backward, median
  double eager_seconds = 0;   // x*cos + rotate_half(x)*sin forward + backward, median
  double speedup = 0;
};

struct TrainBenchResult {
  std::vector<SchemeSpeed> schemes;
  std::vector<RopeAutogradSpeed> rope;
  int threads = 0;
};

TrainBenchResult run_train_bench(const TrainBenchConfig& config);

}  // namespace posenc::bench
