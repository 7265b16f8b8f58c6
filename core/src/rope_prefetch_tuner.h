// Which software prefetch the RoPE walks issue, chosen once per process by timing the caller's own
// large calls (private to the core library; rope_kernels.cc runs it, rope_kernels.h reports it).
//
// Why measured, not fixed: the same kernel on two Zen 4 hosts of this project wanted opposite
// policies. On one, prefetching each head-major row ahead into L1 took the token-by-token walk
// from 0.35 to 0.66 of the memory ceiling (2 threads); on another, the same hints held float32
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
#include "rope_prefetch_policy.h"

namespace posenc {

const char* rope_prefetch_name(RopePrefetch p);

// The walk a call takes (rope_walk-inl.h): token-major rows, head-major rows token by token
// (xPos, computed or M-RoPE cos/sin), or head-major rows in groups of heads (a 1-D table). Each
// walk and storage dtype is measured apart: the walks read their bytes in different orders.
enum class RopeWalk : std::uint8_t { kTokenMajor, kHeadMajorByToken, kHeadMajorGroups };
int rope_prefetch_class(RopeWalk walk, DType dtype);

class RopePrefetchTuner {
 public:
  static constexpr int kClasses = 9, kCandidates = 3;
  static constexpr int kRounds = 2;  // rounds of 6 trial calls (kPairs): 4 samples a candidate each
  static constexpr int kTrialCalls = kRounds * 6;

  // What one call does: rotate every token under `policy`, or (trial) its first half of tokens
  // under `first` and the rest under `second`, each timed and recorded.
  struct Step {
    bool trial = false;
    RopePrefetch policy = RopePrefetch::kNone, first = RopePrefetch::kNone, second = RopePrefetch::kNone;
  };
  struct Choice {
    RopePrefetch policy = RopePrefetch::kNone;
    bool settled = false;  // measured, or fixed
  };

  // fixed: the policy every call takes (POSENC_ROPE_PREFETCH), or null: measured per class on
  // calls of at least min_trial_bytes.
  RopePrefetchTuner(const RopePrefetch* fixed, std::size_t min_trial_bytes);
  Step next(int cls, std::size_t bytes);
  void record(int cls, RopePrefetch policy, double seconds_per_byte);
  Choice choice(int cls) const;
  std::size_t min_trial_bytes() const { return min_trial_bytes_; }
  // Forgets every measurement and takes these settings (tests: the process's tuner, measured
  // again on calls of their size, whatever ran before in the process or is in the environment).
  void reset(const RopePrefetch* fixed, std::size_t min_trial_bytes);

 private:
  struct State {
    std::array<std::vector<double>, kCandidates> samples;
    int trials = 0;  // trial calls handed out
    bool settled = false;
    RopePrefetch chosen = RopePrefetch::kNone;
  };
  RopePrefetch policy_locked(int cls) const;
  mutable std::mutex mutex_;
  std::array<State, kClasses> states_{};
  bool fixed_ = false;
  RopePrefetch fixed_policy_ = RopePrefetch::kNone;
  std::size_t min_trial_bytes_;
};

// The smallest call measured: the last-level cache's bytes (most of such a call's rows come from
// memory, where the policies differ), at least 16 MiB.
std::size_t rope_prefetch_trial_bytes();

// POSENC_ROPE_PREFETCH's value (null: unset): false for auto (or unset); true with *fixed set for
// none, l1 or l2; any other value is an Error naming it.
bool parse_rope_prefetch(const char* value, RopePrefetch* fixed);

// The process's tuner: POSENC_ROPE_PREFETCH = auto (the default: measured), none, l1 or l2, read at
// the first call; any other value is an Error naming it (at every call until it is fixed).
RopePrefetchTuner& rope_prefetch_tuner();

}  // namespace posenc
