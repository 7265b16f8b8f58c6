#include "distributed_queue.h"

#include "run_keys.h"

namespace posenc::lab {

std::vector<std::string> share_jobs(World& world, std::size_t count, const std::function<std::string(std::size_t)>& work) {
  for (;;) {
    const long taken = world.add(run_keys::jobs_next(), 1) - 1;  // atomic in the store: no two ranks take one job
    if (taken < 0 || static_cast<std::size_t>(taken) >= count) break;
    const auto job = static_cast<std::size_t>(taken);
    world.set(run_keys::job_rank(job), std::to_string(world.rank()));
    world.set(run_keys::job_done(job), work(job));
  }
  std::vector<std::string> out;
  if (world.rank() != 0) return out;
  for (std::size_t i = 0; i < count; ++i) {
    // The counter is past i, so some rank took job i and names itself right after.
    const int owner = std::stoi(world.wait_for(run_keys::job_rank(i), -1, "waiting for the rank that took job " + std::to_string(i)));
    out.push_back(world.wait_for(run_keys::job_done(i), owner, "waiting for job " + std::to_string(i) + " on rank " + std::to_string(owner)));
  }
  return out;
}

}  // namespace posenc::lab
