#include "distributed_run.h"

#include <filesystem>

#include "posenc/error.h"

namespace posenc::lab {

RunRanks join_run(const LaunchConfig& flags, const std::string& out_dir, int batch) {
  RunRanks run;
  run.launch = resolve_launch(flags);
  const int ranks = world_size_of(run.launch);
  if (!distributes_models(run.launch) && batch < ranks)
    throw Error("a batch of " + std::to_string(batch) + " rows cannot be split across " + std::to_string(ranks) +
                " ranks: give at least one row per rank, or --distribute models");
  if (ranks > 1) run.world = std::make_unique<World>(run.launch);
  if (is_primary(run.launch)) {
    std::filesystem::create_directories(out_dir);
    run.lock = std::make_unique<DirLock>(out_dir);
    remove_temp_files(out_dir);  // left by a run that was killed mid-write
    if (run.world) run.world->set("posenc/ready", "1");
  } else {
    run.world->wait_for("posenc/ready", 0, "waiting for rank 0 to open " + out_dir);
    std::filesystem::create_directories(out_dir);
  }
  return run;
}

}  // namespace posenc::lab
