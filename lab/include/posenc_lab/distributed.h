// The lab on several processes or hosts: the launcher contract and how a run is split.
//
// One rank per process. A run has world_size ranks; rank 0 owns the files (checkpoints, results).
// They meet at a TCPStore on master_addr:master_port (libtorch c10d) and exchange tensors over
// Gloo. Two ways to start them:
//   --nproc N                this program starts N local ranks on 127.0.0.1 (a free port, the
//                            store hosted by the launching process) and waits for them;
//   --rank R --world-size W --master-addr A --master-port P
//                            one process per host, started by you or by torchrun (the flags
//                            default to the RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT variables).
// Split: "data" (default) trains each model on all ranks, each rank taking rows
// [r*B/W, (r+1)*B/W) of the same global batch of B rows, gradients averaged before every
// optimiser step, so the weights are those of one process (within float32 summation order);
// "models" hands whole models of the plan to ranks through a queue in the store.
// Faults: a rank that dies or stops answering makes the others stop within timeout_seconds with
// an Error naming it; finished models and the last checkpoint stay, and a rerun resumes.
// Plain C++ types: callers need not include <torch/torch.h>.
#pragma once

#include <string>

namespace posenc::lab {

inline constexpr int kMaxWorldSize = 1024;

struct LaunchConfig {
  int nproc = 0;         // --nproc: local ranks to start (0: none; 1: this process alone)
  int rank = -1;         // -1: not given (RANK, else a single process)
  int world_size = 0;    // 0: not given (WORLD_SIZE, else 1)
  std::string master_addr;  // empty: MASTER_ADDR, else 127.0.0.1
  int master_port = -1;     // -1: MASTER_PORT, else 29500
  int timeout_seconds = 60;  // a lost rank is reported within about this long
  std::string distribute;    // "data" or "models"; empty: data
  bool store_hosted = false;  // the launching process hosts the store (set by --nproc for its ranks)
  bool resolved = false;      // set by resolve_launch (which then returns it unchanged)
};

// The flags completed from the environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// POSENC_STORE_HOSTED) and checked: every bad value is an Error naming it and the expected range.
LaunchConfig resolve_launch(LaunchConfig flags);

// True when `launch` (resolved) asks this process to start local ranks rather than be one.
bool starts_local_ranks(const LaunchConfig& launch);
// Starts launch.nproc copies of this program (the same arguments) as ranks 0..N-1 of one run on
// 127.0.0.1 and waits for them. Returns normally when every rank succeeded; otherwise an Error
// naming each rank that failed and how (exit code or signal). A rank that outlives the others'
// failure by more than the timeout is killed and named.
void run_local_ranks(const LaunchConfig& launch);

// Throws an Error naming both when data parallelism (launch resolved: a rank's, or the launcher's
// of --nproc N) would split a batch of `batch` rows over more ranks than rows. The launcher calls
// it before starting any rank, each rank again when it joins the run.
void check_batch_split(const LaunchConfig& launch, int batch);

// While one lives, the lab runs this process joins one after another (lab leaderboard runs an
// extrapolate, a passkey and a sort run per seed) share one connection to the store and one
// heartbeat: rank 0's store stays up between runs, and a rank between two runs still beats, so
// a rank that reaches the next run early waits for the others rather than calling them lost.
// Each run keeps its own keys in the store whether or not one lives. With several ranks it
// connects at once (rank 0 hosts the store unless --nproc's launcher does) and beats from then on,
// so a rank that waits before its first run (rank 0 for the output directory's lock) is not taken
// for lost.
class RunSeries {
 public:
  explicit RunSeries(const LaunchConfig& launch);
  ~RunSeries();
  RunSeries(const RunSeries&) = delete;
  RunSeries& operator=(const RunSeries&) = delete;
};

inline int world_size_of(const LaunchConfig& l) { return l.world_size > 0 ? l.world_size : 1; }
// Rank 0 (or a single process): the one that writes results and prints them.
inline bool is_primary(const LaunchConfig& l) { return l.rank <= 0; }
inline bool distributes_models(const LaunchConfig& l) { return l.distribute == "models" && world_size_of(l) > 1; }

}  // namespace posenc::lab
