// GGUF metadata values for tests that write GGUF files (core/src/gguf_write.cc).
#pragma once

#include <cstdint>
#include <string>

#include "posenc/gguf.h"

namespace posenc::testing {

// A number of GGUF value type `type` (4 u32, 6 f32, ...).
inline GgufValue gguf_num(std::uint32_t type, double v) {
  GgufValue x;
  x.type = type, x.number = v;
  return x;
}
inline GgufValue gguf_str(const std::string& s) {
  GgufValue x;
  x.type = 8, x.text = s;
  return x;
}

}  // namespace posenc::testing
