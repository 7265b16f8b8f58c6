// GGUF files written from a GgufFile: for tests and seed corpora (the reader is gguf.cc).
#include <string>

#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc {
namespace {

enum : std::uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

void put_string(std::string& out, const std::string& s) {
  const std::uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += s;
}
template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_scalar(std::string& out, std::uint32_t type, double v) {
  switch (type) {
    case kU8: case kBool: return put(out, static_cast<std::uint8_t>(v));
    case kI8: return put(out, static_cast<std::int8_t>(v));
    case kU16: return put(out, static_cast<std::uint16_t>(v));
    case kI16: return put(out, static_cast<std::int16_t>(v));
    case kU32: return put(out, static_cast<std::uint32_t>(v));
    case kI32: return put(out, static_cast<std::int32_t>(v));
    case kF32: return put(out, static_cast<float>(v));
    case kU64: return put(out, static_cast<std::uint64_t>(v));
    case kI64: return put(out, static_cast<std::int64_t>(v));
    case kF64: return put(out, v);
  }
  throw Error("GGUF: cannot write value type " + std::to_string(type));
}

}  // namespace

std::string gguf_bytes(const GgufFile& file) {
  std::string out = "GGUF";
  put<std::uint32_t>(out, 3);
  put<std::uint64_t>(out, file.positional_tensors.size());
  put<std::uint64_t>(out, file.metadata.size());
  for (const auto& [key, v] : file.metadata) {
    put_string(out, key);
    put<std::uint32_t>(out, v.type);
    if (v.type == kString) {
      put_string(out, v.text);
    } else if (v.type == kArray) {  // the values held (a parsed array holds its first kGgufHeldValues)
      put<std::uint32_t>(out, v.elem_type);
      put<std::uint64_t>(out, v.elem_type == kString ? v.strings.size() : v.numbers.size());
      for (const auto& s : v.strings) put_string(out, s);
      for (double d : v.numbers) put_scalar(out, v.elem_type, d);
    } else {
      put_scalar(out, v.type, v.number);
    }
  }
  std::uint64_t offset = 0;
  for (const auto& [name, data] : file.positional_tensors) {
    put_string(out, name);
    put<std::uint32_t>(out, 1);
    put<std::uint64_t>(out, data.size());
    put<std::uint32_t>(out, 0);  // F32
    put<std::uint64_t>(out, offset);
    offset += (data.size() * 4 + 31) / 32 * 32;
  }
  out.append((32 - out.size() % 32) % 32, '\0');
  for (const auto& [name, data] : file.positional_tensors) {
    out.append(reinterpret_cast<const char*>(data.data()), data.size() * 4);
    out.append((32 - data.size() * 4 % 32) % 32, '\0');
  }
  return out;
}

}  // namespace posenc
