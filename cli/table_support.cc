#include "table_support.h"

#include <cstdio>

#include "posenc/error.h"
#include "posenc/rope_apply.h"
#include "ranges.h"

namespace posenc::cli {

using nlohmann::json;

std::vector<std::int64_t> positions_of(const TableArgs& a) {
  return parse_int_list(a.positions, "--positions", 0, kMaxPosition, kMaxRows);
}

void require_values(std::size_t rows, std::size_t cols, const char* what) {
  if (cols != 0 && rows > kMaxValues / cols)
    throw Error(std::string(what) + ": " + std::to_string(rows) + " x " + std::to_string(cols) + " values is more than " +
                std::to_string(kMaxValues) + " (ask for fewer positions or a smaller dimension)");
}

void print_rows(const std::string& label, const std::vector<std::int64_t>& keys, const std::vector<float>& values,
                std::size_t width) {
  for (std::size_t r = 0; r < keys.size(); ++r) {
    std::printf("%s %-8lld", label.c_str(), static_cast<long long>(keys[r]));
    for (std::size_t c = 0; c < width; ++c) std::printf(" % .6f", values[r * width + c]);
    std::printf("\n");
  }
}

json rows_json(const std::vector<float>& values, std::size_t width) {
  json rows = json::array();
  for (std::size_t r = 0; width && r < values.size() / width; ++r)
    rows.push_back(std::vector<double>(values.begin() + static_cast<std::ptrdiff_t>(r * width),
                                       values.begin() + static_cast<std::ptrdiff_t>((r + 1) * width)));
  return rows;
}

}  // namespace posenc::cli
