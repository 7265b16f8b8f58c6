#include "distributed_queue.h"

namespace posenc::lab {

std::vector<std::string> share_jobs(World& world, std::size_t count, const std::function<std::string(std::size_t)>& work) {
  const std::string queue = "posenc/jobs/next";
  for (;;) {
    const long taken = world.add(queue, 1) - 1;  // atomic in the store: no two ranks take one job
    if (taken < 0 || static_cast<std::size_t>(taken) >= count) break;
    const std::string job = "posenc/jobs/" + std::to_string(taken);
    world.set(job + "/rank", std::to_string(world.rank()));
    world.set(job + "/done", work(static_cast<std::size_t>(taken)));
  }
  std::vector<std::string> out;
  if (world.rank() != 0) return out;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string job = "posenc/jobs/" + std::to_string(i);
    // The counter is past i, so some rank took job i and names itself right after.
    const int owner = std::stoi(world.wait_for(job + "/rank", -1, "waiting for the rank that took job " + std::to_string(i)));
    out.push_back(world.wait_for(job + "/done", owner, "waiting for job " + std::to_string(i) + " on rank " + std::to_string(owner)));
  }
  return out;
}

}  // namespace posenc::lab
