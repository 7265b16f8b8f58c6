// Integer lists on the command line: "0,1,2,10" or a half-open range "A:B" (A .. B-1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::cli {

// Throws posenc::Error naming `flag` for malformed text, an empty or reversed range, values
// outside [min_value, max_value], or more than max_count values.
std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& flag, std::int64_t min_value,
                                         std::int64_t max_value, std::size_t max_count = 10000000);

}  // namespace posenc::cli
