#include "posenc/threads.h"

#include <string>

#include "posenc/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posenc {

int kernel_threads(int requested, const char* what) {
  if (requested < 0 || requested > kMaxThreads)
    throw Error(std::string(what) + ": threads must be in [0, " + std::to_string(kMaxThreads) + "] (0: all), got " +
                std::to_string(requested));
  if (requested > 0) return requested;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace posenc
