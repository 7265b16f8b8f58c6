// How long a sequence may be: a count of positions 0 .. len-1, in [1, kMaxPosition + 1] = [1, 2^31].
// One range for every length flag and field (compute_schedule's seq_len, RopeRuntime, explain's
// --context, freqs' --seq-len): a length of 2^31 is valid wherever position 2^31-1 is.
#pragma once

#include <cstdint>
#include <string>

#include "posenc/error.h"
#include "posenc/rope_params.h"

namespace posenc {

// Throws an Error naming `what`, the range and the value for a length outside [1, 2^31].
inline void check_seq_len(std::int64_t len, const std::string& what) {
  if (len < 1 || len > kMaxPosition + 1)
    throw Error(what + " must be in [1, 2^31] (positions 0 .. 2^31-1), got " + std::to_string(len));
}

}  // namespace posenc
