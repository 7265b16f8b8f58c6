// The ranks of one lab run and its output directory: rank 0 alone holds the directory's lock and
// cleans it; the other ranks start only after that, and write only the files of models they were
// handed (--distribute models).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "distributed_world.h"
#include "posenc_lab/file_io.h"

namespace posenc::lab {

struct RunRanks {
  LaunchConfig launch;           // resolved
  std::unique_ptr<World> world;  // null: this process alone
  std::unique_ptr<DirLock> lock;  // rank 0's
};

// Call once the settings and the inputs are known good. batch: rows of one step, which data
// parallelism splits (fewer rows than ranks is an Error naming both). plan: what this rank will
// run (a JSON object: the command and its models); --distribute and the world size are added,
// and every rank must have the same (World's check).
RunRanks join_run(const LaunchConfig& flags, const std::string& out_dir, int batch, nlohmann::json plan);

}  // namespace posenc::lab
