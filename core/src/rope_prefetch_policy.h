// The software prefetch a RoPE walk issues (RotateJob::prefetch; chosen per process by
// rope_prefetch_tuner.h). Its own header so that the kernels see the enum and nothing else.
#pragma once

#include <cstdint>

namespace posenc {

// kL1: each row's lines a fixed distance ahead into every cache level (prefetcht0 on x86); kL2:
// the same lines into L2 and below (prefetcht1); kNone: the hardware prefetchers alone.
enum class RopePrefetch : std::uint8_t { kNone, kL1, kL2 };

}  // namespace posenc
