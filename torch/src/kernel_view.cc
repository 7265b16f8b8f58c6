#include "posenc_torch/kernel_view.h"

#include <ATen/ATen.h>

#include <string>

#include "posenc/error.h"

namespace posenc::torch_layer {
namespace {

DType dtype_of(const at::Tensor& x, const char* what) {
  switch (x.scalar_type()) {
    case at::kFloat: return DType::kF32;
    case at::kBFloat16: return DType::kBF16;
    case at::kHalf: return DType::kF16;
    default:
      throw Error(std::string(what) + ": posenc's kernels take float32, bfloat16 or float16 tensors, got " +
                  c10::toString(x.scalar_type()));
  }
}

}  // namespace

void require_cpu(const at::Tensor& x, const char* what) {
  if (x.defined() && !x.is_cpu())
    throw Error(std::string(what) + " must be on the CPU (posenc's kernels read host memory), got a tensor on " + x.device().str());
}

RopeTensor kernel_view(const at::Tensor& x, const char* what) {
  require_cpu(x, what);
  TORCH_CHECK(x.dim() == 4 && x.stride(3) == 1, what, ": a kernel view needs [B, H, S, D] with a contiguous last dimension");
  const auto n = [&](int d) { return static_cast<int>(x.size(d)); };
  return strided(x.data_ptr(), dtype_of(x, what), {n(0), n(2), n(1), n(3)}, {x.stride(0), x.stride(2), x.stride(1)});
}

at::Tensor positions_view(const at::Tensor& positions, const char* what) {
  if (!positions.defined()) throw Error(std::string(what) + ": a tensor of position ids is needed, got an undefined one");
  require_cpu(positions, what);
  return positions.to(at::kLong).contiguous();
}

}  // namespace posenc::torch_layer
