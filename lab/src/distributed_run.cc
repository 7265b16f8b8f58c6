#include "distributed_run.h"

#include "posenc/error.h"
#include "run_keys.h"

namespace posenc::lab {

RunRanks join_run(const LaunchConfig& flags, const std::string& out_dir, int batch, nlohmann::json plan) {
  RunRanks run;
  run.launch = resolve_launch(flags);
  const int ranks = world_size_of(run.launch);
  check_batch_split(run.launch, batch);
  plan["distribute"] = distributes_models(run.launch) ? "models" : "data";
  plan["world_size"] = ranks;
  if (ranks > 1) run.world = std::make_unique<World>(run.launch, plan.dump());
  if (is_primary(run.launch)) {
    run.lock = open_out_dir(out_dir);
    if (run.world) run.world->set(run_keys::ready(), "1");
  } else {
    run.world->wait_for(run_keys::ready(), 0, "waiting for rank 0 to open " + out_dir);
    make_out_dir(out_dir);
  }
  return run;
}

}  // namespace posenc::lab
