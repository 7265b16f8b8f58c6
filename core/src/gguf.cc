#include "posenc/gguf.h"

#include <cstring>

#include "posenc/error.h"
#include "posenc/half.h"

namespace posenc {
namespace {

constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 32;  // far beyond any real file's keys

enum : std::uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

bool is_positional_tensor(const std::string& name) {
  return name == "rope_freqs.weight" || name == "rope_factors_long.weight" || name == "rope_factors_short.weight";
}

// Bounds-checked little-endian reads; every failure names the offset.
struct Reader {
  const std::string& bytes;
  std::uint64_t pos = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("GGUF: " + what + " at byte " + std::to_string(pos) + " (file of " + std::to_string(bytes.size()) +
                " bytes)");
  }
  void need(std::uint64_t n, const char* what) {
    if (n > bytes.size() - pos) fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes");
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const auto n = get<std::uint64_t>(what);
    need(n, what);
    std::string s = bytes.substr(pos, n);
    pos += n;
    return s;
  }
  double scalar(std::uint32_t type) {
    switch (type) {
      case kU8: return get<std::uint8_t>("u8");
      case kI8: return get<std::int8_t>("i8");
      case kU16: return get<std::uint16_t>("u16");
      case kI16: return get<std::int16_t>("i16");
      case kU32: return get<std::uint32_t>("u32");
      case kI32: return get<std::int32_t>("i32");
      case kF32: return get<float>("f32");
      case kBool: return get<std::uint8_t>("bool") != 0;
      case kU64: return static_cast<double>(get<std::uint64_t>("u64"));
      case kI64: return static_cast<double>(get<std::int64_t>("i64"));
      case kF64: return get<double>("f64");
    }
    fail("value type " + std::to_string(type) + " is not a GGUF type (0..12)");
  }
  GgufValue value(std::uint32_t type) {
    GgufValue v;
    v.type = type;
    if (type == kString) {
      v.text = string("string value");
    } else if (type == kArray) {
      v.elem_type = get<std::uint32_t>("array type");
      const auto n = get<std::uint64_t>("array length");
      if (v.elem_type == kArray) fail("nested arrays are not GGUF metadata");
      if (n > bytes.size() - pos) fail("array of " + std::to_string(n) + " elements exceeds the file");
      for (std::uint64_t i = 0; i < n; ++i) {
        if (v.elem_type == kString) v.strings.push_back(string("array string"));
        else v.numbers.push_back(scalar(v.elem_type));
      }
    } else {
      v.number = scalar(type);
    }
    return v;
  }
};

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

std::string GgufValue::to_string() const {
  if (type == kString) return "\"" + text + "\"";
  if (type != kArray) return format_number(number);
  std::string s = "[";
  for (std::size_t i = 0; i < numbers.size() + strings.size(); ++i) {
    if (i) s += ", ";
    if (i >= 16) return s + "... (" + std::to_string(numbers.size() + strings.size()) + " values)]";
    s += elem_type == kString ? "\"" + strings[i] + "\"" : format_number(numbers[i]);
  }
  return s + "]";
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& kv : metadata)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

GgufFile parse_gguf(const std::string& bytes) {
  Reader r{bytes};
  GgufFile f;
  if (bytes.size() < 4 || bytes.compare(0, 4, "GGUF") != 0) r.fail("not a GGUF file: the magic \"GGUF\" is missing");
  r.pos = 4;
  f.version = r.get<std::uint32_t>("version");
  if (f.version != 2 && f.version != 3) r.fail("version " + std::to_string(f.version) + " is not 2 or 3");
  const auto n_tensors = r.get<std::uint64_t>("tensor count");
  const auto n_kv = r.get<std::uint64_t>("metadata count");
  if (n_tensors > kMaxCount || n_kv > kMaxCount || n_kv > bytes.size() || n_tensors > bytes.size())
    r.fail("counts " + std::to_string(n_tensors) + " tensors / " + std::to_string(n_kv) + " keys exceed the file");
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("key");
    const auto type = r.get<std::uint32_t>("value type");
    f.metadata.emplace_back(std::move(key), r.value(type));
  }
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = r.string("tensor name");
    const auto n_dims = r.get<std::uint32_t>("tensor dims");
    if (n_dims > 4) r.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dims; GGUF allows at most 4");
    for (std::uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(r.get<std::uint64_t>("tensor dim"));
    t.ggml_type = r.get<std::uint32_t>("tensor type");
    t.offset = r.get<std::uint64_t>("tensor offset");
    f.tensors.push_back(std::move(t));
  }
  std::uint64_t alignment = 32;
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type == kString || a->type == kArray || a->number < 1 || a->number > 65536)
      throw Error("GGUF: general.alignment must be an integer in [1, 65536], got " + a->to_string());
    alignment = static_cast<std::uint64_t>(a->number);
  }
  const std::uint64_t data_start = (r.pos + alignment - 1) / alignment * alignment;
  for (const GgufTensorInfo& t : f.tensors) {
    if (!is_positional_tensor(t.name)) continue;
    if (t.dims.size() != 1 || (t.ggml_type != 0 && t.ggml_type != 1) || t.dims[0] > 65536)
      throw Error("GGUF: tensor '" + t.name + "' must be a 1-D F32 or F16 vector of at most 65536 values");
    const std::uint64_t width = t.ggml_type == 0 ? 4 : 2, n = t.dims[0];
    if (data_start > bytes.size() || t.offset > bytes.size() - data_start || n * width > bytes.size() - data_start - t.offset)
      throw Error("GGUF: tensor '" + t.name + "' data (offset " + std::to_string(t.offset) + ", " +
                  std::to_string(n * width) + " bytes) lies beyond the end of the file");
    const char* p = bytes.data() + data_start + t.offset;
    std::vector<float> v(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (width == 4) {
        std::memcpy(&v[i], p + 4 * i, 4);
      } else {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        v[i] = f16_to_float(h);
      }
    }
    f.positional_tensors[t.name] = std::move(v);
  }
  return f;
}

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
    } else if (v.type == kArray) {
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
