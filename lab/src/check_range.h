// A setting out of its range: an Error naming the flag, the range and the value.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc::lab {

inline void check_range(const std::string& flag, long value, long lo, long hi) {
  if (value < lo || value > hi)
    throw Error(flag + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(value));
}

// A list whose items must differ (a length, depth or base given twice would be scored twice and
// shown as two identical columns): an Error naming the flag and the item, name(item) its text.
template <typename T, typename Name>
void check_distinct(const std::string& flag, std::vector<T> items, Name name) {
  std::sort(items.begin(), items.end());
  const auto twice = std::adjacent_find(items.begin(), items.end());
  if (twice != items.end()) throw Error(flag + ": " + name(*twice) + " is given twice");
}

// A list of names (schemes, extensions) each given once: a model trained and scored twice would
// show as two seeds of one.
inline void check_distinct_names(const std::string& flag, const std::vector<std::string>& names) {
  check_distinct(flag, names, [](const std::string& name) { return "'" + name + "'"; });
}

}  // namespace posenc::lab
