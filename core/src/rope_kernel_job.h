// What rope_rotate hands to the dispatched SIMD code (private to the core library).
#pragma once

#include "posenc/rope_kernels.h"

namespace posenc {

struct RotateJob {
  RopeTensor tensors[2];
  int num_tensors = 1;
  const PositionIds* positions = nullptr;
  const RopeApplyParams* params = nullptr;
  const RopeTable::Rows* table = nullptr;  // nullptr: on the fly
  int threads = 1;
  bool native_bf16 = false;  // the CPU narrows to bf16 itself (AVX512_BF16; rope_kernels-inl.h)
};

}  // namespace posenc
