#include <sys/resource.h>
#include <unistd.h>

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

// cgroup v2's memory.max for this process's group ("max" or absent: no limit).
double cgroup_limit() {
  std::ifstream in("/sys/fs/cgroup/memory.max");
  std::string value;
  if (!(in >> value) || value == "max") return 0;
  try {
    return std::stod(value);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

MemoryBudget usable_memory() {
  MemoryBudget b{double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE)), "this machine's memory"};
  const auto tighter = [&b](double limit, const char* what) {
    if (limit > 0 && (b.bytes <= 0 || limit < b.bytes)) b = {limit, what};
  };
  tighter(soft_limit(RLIMIT_AS), "this process's address-space limit (ulimit -v)");
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
