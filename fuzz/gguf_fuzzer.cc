// libFuzzer target: any bytes through the GGUF reader and llama.cpp's schedule. Must never
// crash, hang or allocate without bound; bad input is a posenc::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "posenc/error.h"
#include "posenc/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const posenc::GgufFile f = posenc::parse_gguf(bytes);
    (void)posenc::gguf_rope(f);
  } catch (const posenc::Error&) {
  }
  return 0;
}
