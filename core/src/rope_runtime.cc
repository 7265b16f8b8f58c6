#include "posenc/rope_runtime.h"

#include <string>
#include <utility>

#include "posenc/error.h"

namespace posenc {

RopeRuntime::RopeRuntime(RopeParams params, Numerics numerics)
    : params_(std::move(params)), numerics_(numerics) {
  initial_ = compute_schedule(params_, std::nullopt, numerics_);
  current_ = initial_;
  original_max_seq_len_ = params_.max_position_embeddings.value_or(0);
  max_seq_len_cached_ = original_max_seq_len_;
}

const RopeSchedule& RopeRuntime::update(std::int64_t max_position_id) {
  if (max_position_id < 0 || max_position_id > kMaxPosition)
    throw Error("max position id must be in [0, 2^31-1], got " + std::to_string(max_position_id));
  const std::int64_t len = max_position_id + 1;
  if (params_.type == RopeType::kDynamic) {
    const std::int64_t cached_at_entry = max_seq_len_cached_;
    if (len > max_seq_len_cached_) {
      current_ = compute_schedule(params_, len, numerics_);
      max_seq_len_cached_ = len;
    }
    if (len < original_max_seq_len_ && cached_at_entry > original_max_seq_len_) {
      current_ = initial_;
      max_seq_len_cached_ = original_max_seq_len_;
    }
  } else if (params_.type == RopeType::kLongRope) {
    const bool want_long = len > resolved_original_max(params_);
    if (want_long != current_.uses_long_factors)
      current_ = want_long ? compute_schedule(params_, len, numerics_) : initial_;
    current_.seq_len = len;
  }
  return current_;
}

}  // namespace posenc
