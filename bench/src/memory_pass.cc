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

std::int64_t PassTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "posenc/threads.h"

namespace posenc::bench {

HWY_EXPORT(RmwPass);
HWY_EXPORT(PassTarget);

int memory_rmw_pass(float* data, std::size_t n, int threads, float factor) {
  return HWY_DYNAMIC_DISPATCH(RmwPass)(data, n, kernel_threads(threads, "memory pass"), factor);
}

const char* memory_pass_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(PassTarget)()); }

}  // namespace posenc::bench
#endif  // HWY_ONCE
