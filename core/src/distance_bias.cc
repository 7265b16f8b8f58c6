#include "posenc/distance_bias.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {

void validate(const DistanceTable& table, int heads, const char* what) {
  if (!table.values) throw Error(std::string(what) + " has no values (expected [heads][width] floats)");
  if (table.length < 1 || table.length > (std::int64_t{1} << 31))
    throw Error(std::string(what) + " length " + std::to_string(table.length) + " must be in [1, 2^31]");
  const std::int64_t n = std::int64_t{heads} * table.width();
  for (std::int64_t x = 0; x < n; ++x)
    if (!std::isfinite(table.values[x]))
      throw Error(std::string(what) + " value [" + std::to_string(x / table.width()) + "][" + std::to_string(x % table.width()) +
                  "] is " + format_number(table.values[x]) + "; expected a finite number");
}

}  // namespace posenc
