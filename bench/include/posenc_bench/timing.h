// Timing helpers for the benchmarks: wall-clock seconds of a call, and the median of a sample.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace posenc::bench {

template <typename F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Long work shows what is left: after a first run of `seconds`, when the `remaining` runs would
// take more than 10 s, stderr says so with the estimate (benchmarks that take minutes must not
// look hung).
inline void announce_estimate(const char* what, double seconds, long remaining) {
  if (seconds * static_cast<double>(remaining) > 10.0)
    std::fprintf(stderr, "%s: one run took %.1f s; about %.0f s for the %ld runs left\n", what, seconds,
                 seconds * static_cast<double>(remaining), remaining);
}

}  // namespace posenc::bench
