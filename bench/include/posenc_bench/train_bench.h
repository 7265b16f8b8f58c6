// Training-speed benchmarks of the libtorch layer (`posenc bench train`). Plain C++ types only:
// callers need not include <torch/torch.h>.
#pragma once

#include <string>
#include <vector>

#include "posenc_lab/distributed.h"

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
  // Schemes the fused kernel covers: the same steps with TransformerLM::fused_training (attention
  // forward and backward through posenc's kernel), interleaved with the libtorch steps; 0: not covered.
  double fused_step_seconds = 0;
  double fused_speedup = 0;  // step_seconds / fused_step_seconds
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

// `bench train --nproc N`: the lab's training loop (its data parallelism over World) on N ranks of
// `threads` threads each (0: one), against the same loop in one process with N x that many
// threads, on the same global batch, measured in the same run: the ranks first, then rank 0
// alone. Each figure is the wall time of `steps` steps after one warm-up step.
struct DataParallelSpeed {
  std::string scheme;
  double tokens_per_second = 0;         // all ranks together
  double single_tokens_per_second = 0;  // one process
  double ratio = 0;                     // tokens_per_second / single_tokens_per_second
  double step_seconds = 0, single_step_seconds = 0;
  double allreduce_seconds_per_step = 0;  // rank 0's wait in the gradient all-reduce (slower ranks included)
};
struct DataParallelResult {
  int world_size = 0, threads_per_rank = 0, single_threads = 0;
  std::vector<DataParallelSpeed> schemes;  // filled on rank 0 only
};
// Every rank of `launch` (resolved, world size > 1) calls this.
DataParallelResult run_data_parallel_bench(const TrainBenchConfig& config, const lab::LaunchConfig& launch);

}  // namespace posenc::bench
