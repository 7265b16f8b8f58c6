// A setting out of its range: an Error naming the flag, the range and the value.
#pragma once

#include <string>

#include "posenc/error.h"

namespace posenc::lab {

inline void check_range(const std::string& flag, long value, long lo, long hi) {
  if (value < lo || value > hi)
    throw Error(flag + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(value));
}

}  // namespace posenc::lab
