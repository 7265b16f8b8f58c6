// One foreach_target unit, compiled for every Highway target like the kernels it is measured
// beside, so the ceiling and the kernel run the same instructions width.
#include "posenc_bench/memory_pass.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/memory_pass.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace posenc::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int RmwPass(float* data, std::size_t n, int threads, float factor) {
  const hn::ScalableTag<float> df;
  const std::size_t lanes = hn::Lanes(df);
  const std::size_t vectors = n / lanes;
  const auto f = hn::Set(df, factor);
  int team = 1;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
#ifdef _OPENMP
#pragma omp single nowait
    team = omp_get_num_threads();
#pragma omp for schedule(static)
#endif
    for (std::int64_t v = 0; v < static_cast<std::int64_t>(vectors); ++v) {
      float* p = data + static_cast<std::size_t>(v) * lanes;
      hn::StoreU(hn::Mul(hn::LoadU(df, p), f), df, p);
    }
  }
  for (std::size_t i = vectors * lanes; i < n; ++i) data[i] *= factor;
  return team;
}

// The sum of n floats, read once in order: 4 independent vector sums per thread, so the pass is
// bound by the loads, not by the adds' latency. The caller keeps the sum, so the reads stay.
double ReadPass(const float* data, std::size_t n, int threads) {
  const hn::ScalableTag<float> df;
  const std::size_t lanes = hn::Lanes(df);
  const std::int64_t blocks = static_cast<std::int64_t>(n / (4 * lanes));
  double total = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : total)
#endif
  for (std::int64_t chunk = 0; chunk < threads; ++chunk) {  // one contiguous run per thread, as the decode kernel's splits
    const std::int64_t first = blocks * chunk / threads, last = blocks * (chunk + 1) / threads;
    auto s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
    for (std::int64_t b = first; b < last; ++b) {
      const float* p = data + static_cast<std::size_t>(b) * 4 * lanes;
      s0 = hn::Add(s0, hn::LoadU(df, p));
      s1 = hn::Add(s1, hn::LoadU(df, p + lanes));
      s2 = hn::Add(s2, hn::LoadU(df, p + 2 * lanes));
      s3 = hn::Add(s3, hn::LoadU(df, p + 3 * lanes));
    }
    total += hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  }
  for (std::size_t i = static_cast<std::size_t>(blocks) * 4 * lanes; i < n; ++i) total += data[i];
  return total;
}

std::int64_t PassTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "posenc/threads.h"

namespace posenc::bench {

HWY_EXPORT(RmwPass);
HWY_EXPORT(ReadPass);
HWY_EXPORT(PassTarget);

int memory_rmw_pass(float* data, std::size_t n, int threads, float factor) {
  return HWY_DYNAMIC_DISPATCH(RmwPass)(data, n, kernel_threads(threads, "memory pass"), factor);
}

double memory_read_pass(const float* data, std::size_t n, int threads) {
  return HWY_DYNAMIC_DISPATCH(ReadPass)(data, n, kernel_threads(threads, "memory pass"));
}

const char* memory_pass_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(PassTarget)()); }

}  // namespace posenc::bench
#endif  // HWY_ONCE
