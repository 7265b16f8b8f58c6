// RopeParams of one scaled type with the fields that type reads; the caller sets head_dim, theta
// and anything else it varies.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "posenc/rope_params.h"
#include "posenc/rope_schedule.h"

namespace posenc::testing {

// Plain RoPE (rope_type default, theta 10000) over head_dim channels: the schedule most kernel
// and attention tests rotate with.
inline RopeSchedule plain_schedule(int head_dim) {
  RopeParams p;
  p.head_dim = head_dim;
  return compute_schedule(p);
}

inline RopeParams yarn_params(double factor, std::int64_t original_max) {
  RopeParams p;
  p.type = RopeType::kYarn;
  p.factor = factor;
  p.original_max_position_embeddings = original_max;
  return p;
}

inline RopeParams llama3_params(double factor, double low_freq_factor, double high_freq_factor,
                                std::int64_t original_max) {
  RopeParams p;
  p.type = RopeType::kLlama3;
  p.factor = factor;
  p.low_freq_factor = low_freq_factor;
  p.high_freq_factor = high_freq_factor;
  p.original_max_position_embeddings = original_max;
  return p;
}

inline RopeParams longrope_params(std::int64_t max_position, std::int64_t original_max, std::vector<double> short_factor,
                                  std::vector<double> long_factor) {
  RopeParams p;
  p.type = RopeType::kLongRope;
  p.max_position_embeddings = max_position;
  p.original_max_position_embeddings = original_max;
  p.short_factor = std::move(short_factor);
  p.long_factor = std::move(long_factor);
  return p;
}

}  // namespace posenc::testing
