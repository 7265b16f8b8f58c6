#include "config_text.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "posenc/error.h"

namespace posenc::config_text {

std::string read_config_file(const std::string& path) {
  // stat first: reading a directory "succeeds" with no bytes and /dev/zero never ends.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error("cannot open config file '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw Error("config file '" + path + "' is a directory, not a config.json");
  if (!S_ISREG(st.st_mode)) throw Error("config file '" + path + "' is not a regular file (a device, FIFO or socket)");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxConfigBytes)
    throw Error("config file '" + path + "' has " + std::to_string(st.st_size) + " bytes, more than the limit of " +
                std::to_string(kMaxConfigBytes) + " (16 MiB)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open config file '" + path + "': " + std::strerror(errno));
  // Read in chunks and stop one byte past the limit: the file may have grown since stat, and
  // files under /proc report size 0.
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes)
      throw Error("config file '" + path + "' is larger than the limit of " + std::to_string(kMaxConfigBytes) +
                  " bytes (16 MiB)");
  }
  if (in.bad()) throw Error("cannot read config file '" + path + "'");
  return text;
}

void check_nesting(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        throw Error("config is not valid JSON for posenc: arrays/objects nest deeper than " + std::to_string(kMaxNesting) +
                    " levels (at byte " + std::to_string(i) + "; real configs nest fewer than 10)");
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced brackets are the parser's to report
    }
  }
}

}  // namespace posenc::config_text
