// The default RoPE frequencies 1 / theta^(2i / d), i < count, over the arithmetic type T (private to
// the core): T = double is posenc's default; T = float replays HF's float32 tensor arithmetic
// (`1.0 / (theta ** (torch.arange(0, d, 2).float() / d))`). rope_schedule.cc's schedules and
// vision_rope.cc's towers both take them from here.
#pragma once

#include <cmath>
#include <vector>

namespace posenc {

template <typename T>
std::vector<T> default_inv_freq(double theta, int d, int count) {
  std::vector<T> inv(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const T exponent = static_cast<T>(2 * i) / static_cast<T>(d);
    inv[static_cast<std::size_t>(i)] = T(1) / std::pow(static_cast<T>(theta), exponent);
  }
  return inv;
}

}  // namespace posenc
