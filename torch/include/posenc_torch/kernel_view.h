// Where the torch layer hands tensor memory to the core's kernels, and the one device check:
// every entry point that reads a tensor's memory on the host (rope, rope_qk, RotaryEmbedding,
// SinusoidalPositionalEncoding, fused_attention) takes its tensors through these, so a tensor
// on another device (CUDA, meta, ...) is refused with an Error naming that device before any of
// its memory is read.
#pragma once

#include <ATen/core/Tensor.h>

#include "posenc/rope_apply.h"

namespace posenc::torch_layer {

// Throws posenc::Error unless x lives on the CPU: "<what> must be on the CPU (posenc's kernels
// read host memory), got a tensor on <device>". An undefined x passes (callers check presence).
void require_cpu(const at::Tensor& x, const char* what);

// The core kernels' view of x: logical [B, H, S, D] (any strides, contiguous channels), storage
// float32, bfloat16 or float16 (an Error otherwise), on the CPU. x must outlive the view.
RopeTensor kernel_view(const at::Tensor& x, const char* what = "a kernel's tensor");

// Position ids as the kernels read them: int64 and contiguous (converted or copied when x is
// not), on the CPU. The result owns the memory PositionIds will point into.
at::Tensor positions_view(const at::Tensor& positions, const char* what = "positions");

}  // namespace posenc::torch_layer
