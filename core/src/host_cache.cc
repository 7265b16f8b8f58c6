#include "posenc/host_cache.h"

#include <unistd.h>

#include <cstdio>

namespace posenc {

std::size_t last_level_cache_bytes() {
  static const std::size_t bytes = [] {
    if (std::FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
      long kib = 0;
      const int got = std::fscanf(f, "%ldK", &kib);
      std::fclose(f);
      if (got == 1 && kib > 0) return static_cast<std::size_t>(kib) << 10;
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long level3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (level3 > 0) return static_cast<std::size_t>(level3);
#endif
    return std::size_t{32} << 20;
  }();
  return bytes;
}

}  // namespace posenc
