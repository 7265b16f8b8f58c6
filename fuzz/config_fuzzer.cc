// libFuzzer: any bytes as a config.json. Bad input must be a posenc::Error; anything else
// escaping (another exception, a crash, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "posenc/error.h"
#include "posenc/hf_config.h"
#include "posenc/rope_schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool lenient : {false, true}) {
    posenc::ModelRope model;
    try {
      model = posenc::parse_hf_config(text, {lenient, false});
    } catch (const posenc::Error&) {
      continue;
    }
    for (const auto& layer : model.layers) {
      if (!layer.has_rope) continue;
      try {
        posenc::compute_schedule(layer.params);
        posenc::compute_schedule(layer.params, 1 + static_cast<std::int64_t>(size) * 997, posenc::Numerics::kHfFloat32);
      } catch (const posenc::Error&) {
      }
    }
  }
  return 0;
}
