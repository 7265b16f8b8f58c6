// RopeRuntime: how the schedule in force changes from one forward call to the next, exactly as
// Hugging Face's rotary modules do it (the @dynamic_rope_update wrapper and the LongRoPE switch).
//
// Each call passes the largest position id it will rotate; L = max_position_id + 1 (NOT the
// number of tokens: a decode step at position 9000 has L = 9001).
//
//   dynamic NTK:  grows   when L > cached length: recompute at L, cached = L
//                 resets  when L < max_position_embeddings (strict) and the cached length at
//                         entry exceeded it: back to the init schedule
//                 so the cache only grows; a shorter call keeps the larger-L frequencies.
//   longrope:     long factors for the whole call when L > original_max_position_embeddings,
//                 short factors otherwise (keys cached under the other set are stale).
//   other types:  fixed.
#pragma once

#include <cstdint>

#include "posenc/rope_schedule.h"

namespace posenc {

class RopeRuntime {
 public:
  explicit RopeRuntime(RopeParams params, Numerics numerics = Numerics::kAccurate);

  // Updates the state for a call whose largest position id is max_position_id and returns the
  // schedule to rotate that call with.
  const RopeSchedule& update(std::int64_t max_position_id);

  const RopeSchedule& current() const { return current_; }
  // HF's max_seq_len_cached (dynamic NTK); the init value is max_position_embeddings.
  std::int64_t max_seq_len_cached() const { return max_seq_len_cached_; }

 private:
  RopeParams params_;
  Numerics numerics_;
  RopeSchedule initial_;
  RopeSchedule current_;
  std::int64_t original_max_seq_len_ = 0;
  std::int64_t max_seq_len_cached_ = 0;
};

}  // namespace posenc
