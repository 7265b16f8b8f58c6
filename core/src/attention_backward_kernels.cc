// The one foreach_target translation unit of the attention backward pass: compiles
// attention_backward_kernels-inl.h for every Highway target and dispatches once per call.
#include "posenc/attention_backward.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention_backward_kernels-inl.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "attention_backward_kernels-inl.h"

#if HWY_ONCE
#include "posenc/threads.h"

namespace posenc {

HWY_EXPORT(AttentionBackwardAll);

void attention_backward(const AttentionBackwardInputs& in, const AttentionGradients& grads, const AttentionParams& params,
                        const KernelOptions& options) {
  const int n = kernel_threads(options.threads, "attention_backward");
  validate_attention_backward(in, grads, params);
  const attention_detail::Plan plan = attention_detail::make_plan(in.q, in.k, in.v, in.out, params, options.table);
  if (std::int64_t{in.q.batch} * (std::int64_t{in.q.tokens} + in.k.tokens) == 0) return;
  HWY_DYNAMIC_DISPATCH(AttentionBackwardAll)(plan, in, grads, n);
}

}  // namespace posenc
#endif  // HWY_ONCE
