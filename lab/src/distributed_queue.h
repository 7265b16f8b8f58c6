// Whole jobs handed to ranks (`--distribute models`): a counter in the store is the queue, so a
// rank that finishes early takes the next job, and rank 0 gathers every job's outcome in order.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "distributed_world.h"

namespace posenc::lab {

// Every rank calls this alike. Each takes job indices from the shared counter and runs work(i),
// whose text is published under the index. Rank 0 then waits for every job's text (an Error
// naming the rank that took a job and was lost) and returns them in index order; the other ranks
// return an empty vector once the queue is empty.
std::vector<std::string> share_jobs(World& world, std::size_t count, const std::function<std::string(std::size_t)>& work);

}  // namespace posenc::lab
