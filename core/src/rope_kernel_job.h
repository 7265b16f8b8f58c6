// What rope_rotate hands to the dispatched SIMD code (private to the core library). It names only
// the views and parameters of rope_apply.h and the prefetch policy's enum, not the public
// rope_kernels.h: rope_kernels.cc, which
// implements that header, is the one that includes the kernels, and the arrow points one way.
#pragma once

#include "posenc/rope_apply.h"
#include "rope_prefetch_policy.h"

namespace posenc {

// A RopeTable snapshot's rows as the kernels read them: [position][num_freqs] floats each,
// attention factor included, direction +1.
struct CosSinRows {
  const float* cos = nullptr;
  const float* sin = nullptr;
};

struct RotateJob {
  RopeTensor tensors[2];
  int num_tensors = 1;
  const PositionIds* positions = nullptr;
  const RopeApplyParams* params = nullptr;
  const CosSinRows* table = nullptr;  // nullptr: on the fly
  int threads = 1;
  bool native_bf16 = false;  // the CPU narrows to bf16 itself (AVX512_BF16; rope_convert-inl.h)
  RopePrefetch prefetch = RopePrefetch::kNone;  // the walks' software prefetch (rope_prefetch_policy.h)
  int token_begin = 0, token_end = -1;           // the tokens rotated: [begin, end), end -1: every token
  int end_token() const { return token_end < 0 ? tensors[0].tokens : token_end; }
};

// Runs a validated job on this machine's best target (rope_kernels.cc): rope_rotate's walk, and
// rope_shift's (rope_shift.cc) over a one-row table.
void dispatch_rotate(const RotateJob& job);

}  // namespace posenc
