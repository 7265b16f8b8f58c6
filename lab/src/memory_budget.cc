#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "posenc_lab/run_settings.h"

namespace posenc::lab {
namespace {

// A soft resource limit in bytes, or 0 when there is none.
double soft_limit(int resource) {
  rlimit r{};
  if (::getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<double>(r.rlim_cur);
}

// A number from a one-line file ("max", absent or unreadable: 0, no limit).
double number_in(const std::string& path) {
  std::ifstream in(path);
  std::string value;
  if (!(in >> value) || value == "max") return 0;
  try {
    return std::stod(value);
  } catch (const std::exception&) {
    return 0;
  }
}

// This process's cgroup memory limit: v2's memory.max of its group ("0::/path"), or v1's
// memory.limit_in_bytes of its memory group ("N:memory:/path"); v1's "no limit" is a huge number.
double cgroup_limit() {
  std::ifstream groups("/proc/self/cgroup");
  double least = 0;
  for (std::string line; std::getline(groups, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    double limit = 0;
    if (controllers.empty()) limit = number_in("/sys/fs/cgroup" + path + "/memory.max");
    else if (controllers == "memory") limit = number_in("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes");
    if (limit > 0 && limit < 1e18 && (least == 0 || limit < least)) least = limit;
  }
  return least;
}

// The address space this process has mapped already (libtorch's libraries: ~0.8 GB), which an
// address-space limit counts too.
double mapped_bytes() { return number_in("/proc/self/statm") * double(::sysconf(_SC_PAGE_SIZE)); }

}  // namespace

MemoryBudget usable_memory() {
  MemoryBudget b{double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE)), "this machine's memory"};
  const auto tighter = [&b](double limit, const char* what) {
    if (limit > 0 && (b.bytes <= 0 || limit < b.bytes)) b = {limit, what};
  };
  if (const double as = soft_limit(RLIMIT_AS); as > 0)  // what is left of it: never below 0
    tighter(std::max(1.0, as - mapped_bytes()), "what is left of this process's address-space limit (ulimit -v)");
  tighter(soft_limit(RLIMIT_DATA), "this process's data limit (ulimit -d)");
  tighter(cgroup_limit(), "its cgroup's memory.max");
  return b;
}

double training_bytes(const ModelShape& s, int batch, int len) {
  const double d = s.d_model, tokens = double(batch) * len;
  const double weights = 12.0 * d * d * s.layers;
  const double activations = s.layers * tokens * (2.0 * 34.0 * d + 2.0 * 5.0 * s.heads * len);
  return 16.0 * weights + activations;
}

}  // namespace posenc::lab
