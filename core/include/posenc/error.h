// posenc::Error — the one exception type the library throws at its boundary.
//
// Bad input (a config value, a flag, a size) is reported by throwing Error with a message that
// names the offending key and value and says what is allowed, e.g.
//   "rope_parameters.factor must be > 0, got -2".
// The library never calls exit(); the CLI turns an Error into a message on stderr and exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace posenc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Formats a double the way a user wrote it: shortest form that round-trips ("1e+06", "0.5").
std::string format_number(double value);

}  // namespace posenc
