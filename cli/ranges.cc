#include "ranges.h"

#include <cerrno>
#include <cstdlib>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

std::int64_t parse_one(const std::string& token, const std::string& flag) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(token.c_str(), &end, 10);
  if (token.empty() || errno != 0 || end != token.c_str() + token.size())
    throw Error(flag + ": '" + token + "' is not an integer");
  return v;
}

}  // namespace

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (items.back().empty())
      throw Error(flag + ": item " + std::to_string(items.size()) + " of '" +
                  (text.size() > 60 ? text.substr(0, 57) + "..." : text) + "' is empty; expected comma-separated values");
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& flag, std::int64_t lo,
                                         std::int64_t hi, std::size_t max_count) {
  std::vector<std::int64_t> out;
  auto check = [&](std::int64_t v) {
    if (v < lo || v > hi)
      throw Error(flag + ": " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  const auto colon = text.find(':');
  if (colon != std::string::npos && text.find(',') != std::string::npos)
    throw Error(flag + ": '" + (text.size() > 60 ? text.substr(0, 57) + "..." : text) +
                "' mixes a range A:B with a list; give one range or one comma-separated list");
  if (colon != std::string::npos) {
    const std::int64_t a = parse_one(text.substr(0, colon), flag), b = parse_one(text.substr(colon + 1), flag);
    if (b <= a) throw Error(flag + ": range '" + text + "' is empty (A:B means A .. B-1, B > A)");
    if (static_cast<std::uint64_t>(b - a) > max_count)
      throw Error(flag + ": range '" + text + "' has more than " + std::to_string(max_count) + " values");
    check(a);
    check(b - 1);
    for (std::int64_t v = a; v < b; ++v) out.push_back(v);
    return out;
  }
  for (const std::string& token : split_list(text, flag)) {
    const std::int64_t v = parse_one(token, flag);
    check(v);
    out.push_back(v);
    if (out.size() > max_count) throw Error(flag + ": more than " + std::to_string(max_count) + " values");
  }
  return out;
}

}  // namespace posenc::cli
