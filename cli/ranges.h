// Integer lists on the command line: "0,1,2,10" or a half-open range "A:B" (A .. B-1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::cli {

// The items of a comma-separated value, each non-empty: "", "0,,1" and "1," are a posenc::Error
// naming `flag` and the position of the empty item (CLI11's own splitting drops empty items, so
// "0,,1" was read as 0,1 and "" as 0). Every list flag goes through here.
std::vector<std::string> split_list(const std::string& text, const std::string& flag);

// Throws posenc::Error naming `flag` for malformed text, an empty or reversed range, values
// outside [min_value, max_value], or more than max_count values.
std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& flag, std::int64_t min_value,
                                         std::int64_t max_value, std::size_t max_count = 10000000);

}  // namespace posenc::cli
