#include "posenc/error.h"

#include <cstdio>
#include <cstdlib>

namespace posenc {

std::string format_number(double value) {
  // The shortest %.*g that reads back as the same double.
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

}  // namespace posenc
