// What a kernel's sizing and its benchmarks need to know of this machine's caches.
#pragma once

#include <cstddef>

namespace posenc {

// The last-level cache's bytes: sysfs's size of cpu0's level-3 cache (a VM's cpuid may report the
// whole host's, 320 MiB where sysfs says 32), else sysconf's, else 32 MiB. Read once.
std::size_t last_level_cache_bytes();

}  // namespace posenc
