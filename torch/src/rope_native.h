// rope_native (rope_op.h) for callers inside the operators' library that made the kernels' checks
// themselves: attention_native checks a call as the attention kernel does, then rotates q and k at
// positions already on their device (copying them back to the host to check again would cost a
// transfer per tensor, and a meta tensor has nothing to copy).
#pragma once

#include <ATen/core/Tensor.h>

#include "posenc_torch/rope_op.h"

namespace posenc::torch_layer {

// check false: without check_as_the_kernels (shapes, layout and axes are still checked).
at::Tensor rotate_native(const at::Tensor& x, const RopeOpArgs& args, bool check);

}  // namespace posenc::torch_layer
