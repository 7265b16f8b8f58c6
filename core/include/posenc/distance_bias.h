// A per-head attention bias that depends only on the distance Delta = qpos - kpos between a
// query's and a key's position ids, stored as a table over Delta: the one layout that Kerple,
// Sandwich (kerple.h, sandwich.h) and any learned distance function (FIRE, dynamic position bias,
// computed by the caller) hand to fused attention (attention.h, AttentionPositions::kDistanceTable).
//
//   values [heads][width]  float32, dense, row h = query head h
//   kAbsolute  width = length, values[h][|Delta|]              (a bias even in Delta: Kerple,
//                                                               Sandwich; causal or not)
//   kSigned    width = 2 length - 1, values[h][Delta + length - 1]   (Delta in
//              [-(length-1), length-1]: keys before the query at indices above length - 1)
//
// Every (query, key) pair of an attention call must have |Delta| <= length - 1, masked pairs
// included (the kernel reads whole tiles): with positions 0 .. T-1 that is length = T. A call that
// needs more is refused, naming the distance (no clamping: a learned function's value beyond the
// table is not known here).
#pragma once

#include <cstdint>
#include <cstdlib>

#include "posenc/names.h"

namespace posenc {

enum class DistanceSide { kAbsolute, kSigned };

POSENC_ENUM_NAMES(DistanceSide, "distance side", {DistanceSide::kAbsolute, "absolute"}, {DistanceSide::kSigned, "signed"});

struct DistanceTable {
  const float* values = nullptr;  // [heads][width()]
  std::int64_t length = 0;        // >= 1: distances 0 .. length - 1 on each side
  DistanceSide side = DistanceSide::kAbsolute;

  std::int64_t width() const { return side == DistanceSide::kSigned ? 2 * length - 1 : length; }
  // The column of distance delta (|delta| <= length - 1).
  std::int64_t column(std::int64_t delta) const { return side == DistanceSide::kSigned ? delta + length - 1 : std::llabs(delta); }
};

// Checks values != null, length in [1, 2^31] and every value finite; throws posenc::Error naming
// the value (what: the caller's name for the table, e.g. "attention: distance table").
void validate(const DistanceTable& table, int heads, const char* what);

}  // namespace posenc
