// The bytes of a config.json before nlohmann sees them (private to the core library): a bounded
// read of a regular file, and a bound on bracket nesting.
//
// Why: nlohmann's parser is iterative, but comparing, copying and dumping a json value recurse
// once per nesting level, so a value nested 100 000 deep overflows the stack long after parsing.
// Real configs nest fewer than ten levels; anything deeper is refused before it is parsed.
#pragma once

#include <cstddef>
#include <string>

#include "posenc/error.h"

namespace posenc::config_text {

inline constexpr std::size_t kMaxConfigBytes = std::size_t{16} << 20;  // 16 MiB: real configs are < 1 MiB
inline constexpr int kMaxNesting = 64;                                   // real configs: < 10 levels

// The whole file, or posenc::Error naming `path` when it cannot be opened, is not a regular file
// (a directory, /dev/zero, a FIFO) or is larger than kMaxConfigBytes.
std::string read_config_file(const std::string& path);

// parse(text of the file at `path`); a posenc::Error it throws is thrown again led by "path: ".
template <class Parse>
auto parse_config_file(const std::string& path, Parse parse) {
  const std::string text = read_config_file(path);
  try {
    return parse(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

// Throws posenc::Error when arrays/objects nest deeper than kMaxNesting (brackets inside JSON
// strings do not count). Linear in the text, no recursion.
void check_nesting(const std::string& text);

}  // namespace posenc::config_text
