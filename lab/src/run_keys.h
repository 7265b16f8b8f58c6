// The messages the ranks of one lab run exchange through the store (World::set / wait_for /
// add), every key spelled here once. Rank 0 owns the run's files; the others learn from it:
//   ready                  "1": rank 0 holds the output directory (distributed_run.cc)
//   model/<i>/trains       "1": the ranks train model i together; "0": rank 0 has its rows already
//   model/<i>/done         "ok": rank 0 evaluated model i; "stop": its step budget ran out first
//   jobs/next              the counter of --distribute models' queue (distributed_queue.cc)
//   jobs/<i>/rank, /done   the rank that took job i, and the job's outcome text
#pragma once

#include <cstddef>
#include <string>

namespace posenc::lab::run_keys {

inline std::string ready() { return "posenc/ready"; }
inline std::string model_trains(std::size_t model) { return "posenc/model/" + std::to_string(model) + "/trains"; }
inline std::string model_done(std::size_t model) { return "posenc/model/" + std::to_string(model) + "/done"; }
inline std::string jobs_next() { return "posenc/jobs/next"; }
inline std::string job_rank(std::size_t job) { return "posenc/jobs/" + std::to_string(job) + "/rank"; }
inline std::string job_done(std::size_t job) { return "posenc/jobs/" + std::to_string(job) + "/done"; }

}  // namespace posenc::lab::run_keys
