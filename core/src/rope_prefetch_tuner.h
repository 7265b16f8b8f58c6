// Which software prefetch the RoPE walks issue, chosen once per process by timing the caller's own
// large calls (private to the core library; rope_kernels.cc runs it, rope_kernels.h reports it).
//
// Why measured, not fixed: the same kernel on two Zen 4 hosts of this project wanted opposite
// policies. On one, prefetching each head-major row 8 KiB ahead into L1 took the grouped walk from
// 0.64 to 0.80 of the memory ceiling (bf16, one thread); on another, the same hints held float32
// head-major q and k at 0.68 of the ceiling where no hints reached 1.01, while bf16 there still
// wanted them (0.62 against 0.54), and token-major rows wanted none in every dtype (f32 0.99
// against 0.65 with L1 hints and 0.79 with L2 ones). The hints never change a result's bits, so a
// large call can be cut in two token ranges, each rotated once under a different policy and timed:
// the measurement costs the caller nothing but the slower policy's share of a few calls.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "posenc/half.h"

namespace posenc {

// kL1: each row's lines kPrefetchBytesInFlight ahead into every cache level (prefetcht0 on x86);
// kL2: the same lines into L2 and below (prefetcht1). kNone: the hardware prefetchers alone.
enum class RopePrefetch : std::uint8_t { kNone, kL1, kL2 };
const char* rope_prefetch_name(RopePrefetch p);

// What is measured apart: the grouped head-major walk and the token walk, per storage dtype.
int rope_prefetch_class(bool head_major, DType dtype);

class RopePrefetchTuner {
 public:
  static constexpr int kClasses = 6, kCandidates = 3;
  static constexpr int kRounds = 2;  // rounds of kCandidates * 2 trial calls: 4 samples a candidate each
  static constexpr std::size_t kMinTrialBytes = std::size_t{16} << 20;  // a call beyond L2 and L3 of one core

  // What one call does: rotate every token under `policy`, or (trial) its first half of tokens
  // under `first` and the rest under `second`, each timed and recorded.
  struct Step {
    bool trial = false;
    RopePrefetch policy = RopePrefetch::kNone, first = RopePrefetch::kNone, second = RopePrefetch::kNone;
  };

  // fixed: the policy every call takes (POSENC_ROPE_PREFETCH), or none: measured per class.
  explicit RopePrefetchTuner(const RopePrefetch* fixed = nullptr, std::size_t min_trial_bytes = kMinTrialBytes);
  Step next(int cls, std::size_t bytes);
  void record(int cls, RopePrefetch policy, double seconds_per_byte);
  RopePrefetch policy(int cls) const;
  bool settled(int cls) const;

 private:
  struct State {
    std::array<std::vector<double>, kCandidates> samples;
    int trials = 0;  // trial calls handed out
    bool settled = false;
    RopePrefetch chosen = RopePrefetch::kNone;
  };
  mutable std::mutex mutex_;
  std::array<State, kClasses> states_{};
  bool fixed_ = false;
  RopePrefetch fixed_policy_ = RopePrefetch::kNone;
  std::size_t min_trial_bytes_;
};

// POSENC_ROPE_PREFETCH's value (null: unset): false for auto (or unset); true with *fixed set for
// none, l1 or l2; any other value is an Error naming it.
bool parse_rope_prefetch(const char* value, RopePrefetch* fixed);

// The process's tuner: POSENC_ROPE_PREFETCH = auto (the default: measured), none, l1 or l2, read at
// the first call; any other value is an Error naming it.
RopePrefetchTuner& rope_prefetch_tuner();

}  // namespace posenc
