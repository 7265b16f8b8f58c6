// safetensors (Hugging Face's tensor file format), float32 tensors only:
//
//   [u64 little-endian N][N bytes of JSON header][raw data]
//   header: {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..],
//            "data_offsets": [begin, end]}, ...}   offsets relative to the data start
//
// The data are little-endian float32, row-major, one tensor after another with no gaps
// (https://github.com/huggingface/safetensors, "Format"). The header is padded with spaces
// to a multiple of 8 bytes so the data start aligned, as the reference writer does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace posenc {

struct F32Tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // row-major, product(shape) elements
};

struct SafeTensors {
  std::vector<F32Tensor> tensors;  // in file order (data offset order)
  std::map<std::string, std::string> metadata;
};

// The bytes of a .safetensors file. Throws posenc::Error for a tensor whose data size does
// not match its shape, or a duplicate name.
std::string safetensors_bytes(const SafeTensors& file);

// Parses a .safetensors file's bytes. Throws posenc::Error naming what is wrong (truncated
// header, offsets outside the data or overlapping, a dtype other than F32, a shape that does
// not match its byte count).
SafeTensors parse_safetensors(const std::string& bytes);

}  // namespace posenc
