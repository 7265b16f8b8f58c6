// Timing helpers for the benchmarks: wall-clock seconds of a call, and the median of a sample.
#pragma once

#include <algorithm>
#include <chrono>
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

}  // namespace posenc::bench
