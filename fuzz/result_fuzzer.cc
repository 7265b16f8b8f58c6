// libFuzzer target: any bytes as a lab result file (<model>.result.json, result_cache.h) read
// against the key of the seed in fuzz/corpus/results (so mutations that keep the key reach the
// rows and checksums, the others the training-key comparison and its reading of older model
// configs), and as a saved model's config (config_from_json, what a .pt file's header holds).
// Must never crash, hang or allocate without bound; bad input is a posenc::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "posenc/error.h"
#include "posenc_lab/result_cache.h"
#include "posenc_torch/model_config.h"

namespace {

posenc::lab::CacheKey wanted;
std::string path;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const nlohmann::json seed = posenc::lab::read_json_file(POSENC_RESULT_SEED);
  wanted = {seed.at("key").at("train"), seed.at("key").at("eval")};
  path = "/tmp/posenc_result_fuzzer_" + std::to_string(::getpid()) + ".json";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  try {
    (void)posenc::lab::cached_rows(path, wanted);
  } catch (const posenc::Error&) {
  }
  try {
    (void)posenc::lab::cached_model_checksum(path, wanted);
  } catch (const posenc::Error&) {
  }
  try {
    (void)posenc::torch_layer::config_to_json(posenc::torch_layer::config_from_json(bytes));
  } catch (const posenc::Error&) {
  }
  return 0;
}
