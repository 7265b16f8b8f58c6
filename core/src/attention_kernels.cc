// The one foreach_target translation unit of fused attention: compiles attention_kernels-inl.h
// for every Highway target and dispatches once per call.
#include "posenc/attention.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention_kernels-inl.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "attention_kernels-inl.h"

#if HWY_ONCE
#include <string>

#include "posenc/error.h"
#include "posenc/rope_kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posenc {

HWY_EXPORT(AttentionAll);
HWY_EXPORT(AttentionTarget);

void attention(const RopeTensor& q, const RopeTensor& k, const RopeTensor& v, const RopeTensor& out,
               const AttentionParams& params, const AttentionOptions& options) {
  if (options.threads < 0 || options.threads > kMaxThreads)
    throw Error("attention: threads must be in [0, " + std::to_string(kMaxThreads) + "] (0: all), got " +
                std::to_string(options.threads));
  const attention_detail::Plan plan = attention_detail::make_plan(q, k, v, out, params);
  if (std::int64_t{q.batch} * q.tokens == 0) return;
  int threads = options.threads;
#ifdef _OPENMP
  if (threads == 0) threads = omp_get_max_threads();
#else
  threads = 1;
#endif
  HWY_DYNAMIC_DISPATCH(AttentionAll)(plan, threads);
}

std::int64_t attention_workspace_bytes(int head_dim, int threads) {
  using attention_detail::kKeyTile;
  using attention_detail::kQueryTile;
  const std::int64_t rows = (kQueryTile + 3) / 4 * 4;  // the row block pads the query tile to 4
  const std::int64_t floats = rows * head_dim * 2 + std::int64_t{kKeyTile} * head_dim * 2 + rows * kKeyTile + 2 * rows + head_dim;
  return floats * static_cast<std::int64_t>(sizeof(float)) * std::max(threads, 1);
}

const char* attention_kernel_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(AttentionTarget)()); }

}  // namespace posenc
#endif  // HWY_ONCE
