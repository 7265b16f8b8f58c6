// The GGUF reader: the header through bounded windows, ggml's structural checks, and the data of
// the positional tensors only (the writer for tests is gguf_write.cc).
#include "posenc/gguf.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <iterator>
#include <set>

#include "posenc/error.h"
#include "posenc/half.h"

namespace posenc {
namespace {

// Bounds on what the header may make posenc hold (real models: under 100 keys, a few thousand
// tensors, a few MiB of strings); beyond them a file is refused, naming the count.
constexpr std::uint64_t kMaxKeys = std::uint64_t{1} << 16, kMaxTensors = std::uint64_t{1} << 20;
constexpr std::uint64_t kMaxHeldBytes = std::uint64_t{1} << 28;  // keys, strings, names: 256 MiB
constexpr std::uint64_t kWindow = std::uint64_t{1} << 20;        // bytes read from the file at a time
constexpr std::uint64_t kMaxNameBytes = 63;                      // ggml's GGML_MAX_NAME (64) less the NUL

enum : std::uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

bool is_positional_tensor(const std::string& name) {
  return name == "rope_freqs.weight" || name == "rope_factors_long.weight" || name == "rope_factors_short.weight";
}

// ggml's type traits (ggml.c type_traits: elements per block, bytes per block), GGML_TYPE_F32 (0)
// to GGML_TYPE_MXFP4 (39); {0, 0} for the removed types, which ggml refuses too.
struct BlockLayout {
  std::uint64_t elements, bytes;
};
constexpr BlockLayout kTypes[] = {
    {1, 4}, {1, 2}, {32, 18}, {32, 20}, {0, 0}, {0, 0}, {32, 22}, {32, 24}, {32, 34}, {32, 36},       // 0-9
    {256, 84}, {256, 110}, {256, 144}, {256, 176}, {256, 210}, {256, 292}, {256, 66}, {256, 74},    // 10-17
    {256, 98}, {256, 50}, {32, 18}, {256, 110}, {256, 82}, {256, 136}, {1, 1}, {1, 2}, {1, 4},      // 18-26
    {1, 8}, {1, 8}, {256, 56}, {1, 2}, {0, 0}, {0, 0}, {0, 0}, {256, 54}, {256, 66}, {0, 0}, {0, 0}, // 27-37
    {0, 0}, {32, 17}};                                                                                // 38-39

std::size_t width_of(std::uint32_t type) {
  switch (type) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
  }
  return 0;
}

// Where the bytes come from: a string in memory or a file, read at an offset.
struct Source {
  std::uint64_t size;
  std::function<void(std::uint64_t at, char* dst, std::size_t n)> read;
};

// Bounds-checked little-endian reads through a window of the source; every failure names the offset.
struct Reader {
  explicit Reader(const Source& s) : src(s) {}
  const Source& src;
  std::uint64_t pos = 0;
  std::string window;
  std::uint64_t window_at = 0;
  std::uint64_t held = 0;  // bytes of keys, strings and names kept so far

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("GGUF: " + what + " at byte " + std::to_string(pos) + " (file of " + std::to_string(src.size) + " bytes)");
  }
  void need(std::uint64_t n, const char* what) {
    if (n > src.size - pos) fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes");
  }
  void copy(char* dst, std::uint64_t n) {  // n already checked by need()
    while (n > 0) {
      if (pos < window_at || pos >= window_at + window.size()) {
        window_at = pos;
        window.resize(static_cast<std::size_t>(std::min(kWindow, src.size - pos)));
        src.read(window_at, window.data(), window.size());
      }
      const std::uint64_t k = std::min<std::uint64_t>(n, window_at + window.size() - pos);
      std::memcpy(dst, window.data() + (pos - window_at), static_cast<std::size_t>(k));
      dst += k, pos += k, n -= k;
    }
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    copy(reinterpret_cast<char*>(&v), sizeof(T));
    return v;
  }
  // A string; its bytes beyond `keep` are skipped, not held.
  std::string string(const char* what, std::uint64_t keep = UINT64_MAX) {
    const auto n = get<std::uint64_t>(what);
    need(n, what);
    const std::uint64_t kept = std::min(n, keep);
    if ((held += kept) > kMaxHeldBytes)
      fail("the header holds more than " + std::to_string(kMaxHeldBytes) + " bytes of keys and strings");
    std::string s(static_cast<std::size_t>(kept), '\0');
    copy(s.data(), kept);
    pos += n - kept;
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
  // Arrays keep their first kGgufHeldValues values; the rest are skipped (numbers in one seek).
  GgufValue value(std::uint32_t type) {
    GgufValue v;
    v.type = type;
    if (type == kString) {
      v.text = string("string value");
    } else if (type == kArray) {
      v.elem_type = get<std::uint32_t>("array type");
      v.count = get<std::uint64_t>("array length");
      if (v.elem_type == kArray) fail("nested arrays are not GGUF metadata");
      const std::size_t width = v.elem_type == kString ? 8 : width_of(v.elem_type);
      if (width == 0) fail("value type " + std::to_string(v.elem_type) + " is not a GGUF type (0..12)");
      if (v.count > (src.size - pos) / width) fail("array of " + std::to_string(v.count) + " elements exceeds the file");
      for (std::uint64_t i = 0; i < v.count; ++i) {
        if (v.elem_type == kString) {
          std::string s = string("array string", i < kGgufHeldValues ? 1024 : 0);
          if (i < kGgufHeldValues) v.strings.push_back(std::move(s));
        } else if (i < kGgufHeldValues) {
          v.numbers.push_back(scalar(v.elem_type));
        } else {
          pos += (v.count - i) * width;  // checked above: inside the file
          break;
        }
      }
    } else {
      v.number = scalar(type);
    }
    return v;
  }
};

// ggml_nbytes of a tensor, with ggml's checks (gguf.cpp gguf_init_from_file_impl).
std::uint64_t tensor_bytes(const GgufTensorInfo& t, Reader& r) {
  const std::string name = "tensor '" + t.name + "'";
  if (t.ggml_type >= std::size(kTypes) || kTypes[t.ggml_type].elements == 0)
    r.fail(name + " has ggml type " + std::to_string(t.ggml_type) + ", not a type ggml reads (0..39, removed types excluded)");
  const BlockLayout b = kTypes[t.ggml_type];
  std::uint64_t blocks = 1, elements = 1;  // ggml keeps dims as int64: their product must fit
  for (std::size_t d = 0; d < t.dims.size(); ++d) {
    const std::uint64_t n = d == 0 ? t.dims[0] / b.elements : t.dims[d];
    if (__builtin_mul_overflow(elements, t.dims[d], &elements) || elements > static_cast<std::uint64_t>(INT64_MAX))
      r.fail(name + " has dims whose product overflows int64 (ggml refuses it)");
    blocks *= n;  // <= elements
  }
  if (!t.dims.empty() && t.dims[0] % b.elements != 0)
    r.fail(name + " has a row of " + std::to_string(t.dims[0]) + " elements, not a multiple of its type's block of " +
           std::to_string(b.elements));
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, b.bytes, &bytes)) r.fail(name + " has more bytes than 2^64");
  return bytes;
}

GgufFile parse(const Source& src) {
  Reader r{src};
  GgufFile f;
  if (src.size < 4) r.fail("not a GGUF file: the magic \"GGUF\" is missing");
  char magic[4];
  r.copy(magic, 4);
  r.pos = 0;
  if (std::memcmp(magic, "GGUF", 4) != 0) r.fail("not a GGUF file: the magic \"GGUF\" is missing");
  r.pos = 4;
  f.version = r.get<std::uint32_t>("version");
  if (f.version != 2 && f.version != 3) r.fail("version " + std::to_string(f.version) + " is not 2 or 3");
  const auto n_tensors = r.get<std::uint64_t>("tensor count");
  const auto n_kv = r.get<std::uint64_t>("metadata count");
  if (n_kv > src.size || n_tensors > src.size)
    r.fail("counts " + std::to_string(n_tensors) + " tensors / " + std::to_string(n_kv) + " keys exceed the file");
  if (n_kv > kMaxKeys || n_tensors > kMaxTensors)
    r.fail(std::to_string(n_kv) + " keys and " + std::to_string(n_tensors) + " tensors; posenc reads at most " +
           std::to_string(kMaxKeys) + " keys and " + std::to_string(kMaxTensors) + " tensors");
  std::set<std::string> keys;
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("key");
    if (!keys.insert(key).second) r.fail("key '" + key + "' appears twice (ggml refuses duplicate keys)");
    const auto type = r.get<std::uint32_t>("value type");
    f.metadata.emplace_back(std::move(key), r.value(type));
  }
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = r.string("tensor name", kMaxNameBytes + 1);
    if (t.name.size() > kMaxNameBytes) r.fail("tensor name '" + t.name + "...' is longer than ggml's 63 bytes");
    if (!names.insert(t.name).second) r.fail("tensor '" + t.name + "' appears twice (ggml refuses duplicate names)");
    const auto n_dims = r.get<std::uint32_t>("tensor dims");
    if (n_dims > 4) r.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dims; GGUF allows at most 4");
    for (std::uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(r.get<std::uint64_t>("tensor dim"));
    t.ggml_type = r.get<std::uint32_t>("tensor type");
    t.offset = r.get<std::uint64_t>("tensor offset");
    f.tensors.push_back(std::move(t));
  }
  // ggml: general.alignment is a u32 (gguf_get_val_u32 asserts the type), a non-zero power of two.
  std::uint64_t alignment = 32;
  if (const GgufValue* a = f.find("general.alignment")) {
    const auto n = static_cast<std::uint64_t>(a->type == kU32 ? a->number : 0);
    if (a->type != kU32 || n == 0 || (n & (n - 1)) != 0)
      throw Error("GGUF: general.alignment must be a u32 power of two (as ggml reads it), got " +
                  std::string(a->type == kU32 ? "" : "a value of type " + std::to_string(a->type) + " ") + a->to_string());
    alignment = n;
  }
  const std::uint64_t data_start = (r.pos + alignment - 1) / alignment * alignment;
  // ggml: each tensor at the running offset (the previous tensors' padded sizes): no overlaps,
  // no gaps, every offset aligned; and all of it inside the file.
  std::uint64_t expected = 0;
  for (const GgufTensorInfo& t : f.tensors) {
    const std::uint64_t bytes = tensor_bytes(t, r);
    if (t.offset % alignment != 0)
      r.fail("tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not a multiple of general.alignment " +
             std::to_string(alignment));
    if (t.offset != expected)
      r.fail("tensor '" + t.name + "' is at offset " + std::to_string(t.offset) + "; ggml expects " + std::to_string(expected) +
             " (where the previous tensor ends, aligned): tensors overlap or leave a gap");
    const std::uint64_t padded = (bytes + alignment - 1) / alignment * alignment;
    if (padded < bytes || __builtin_add_overflow(expected, padded, &expected)) r.fail("tensor data exceeds 2^64 bytes");
  }
  // ggml seeks to data_start (past the end is allowed when there is no tensor data) and reads.
  if (expected > 0 && (data_start > src.size || expected > src.size - data_start))
    throw Error("GGUF: the tensor data ends at byte " + std::to_string(data_start) + " + " + std::to_string(expected) +
                ", beyond the end of the file (" + std::to_string(src.size) + " bytes): a truncated file?");
  for (const GgufTensorInfo& t : f.tensors) {
    if (!is_positional_tensor(t.name)) continue;
    if (t.dims.size() != 1 || (t.ggml_type != 0 && t.ggml_type != 1) || t.dims[0] > 65536)
      throw Error("GGUF: tensor '" + t.name + "' must be a 1-D F32 or F16 vector of at most 65536 values");
    const std::uint64_t width = t.ggml_type == 0 ? 4 : 2, n = t.dims[0];
    std::string raw(static_cast<std::size_t>(n * width), '\0');
    src.read(data_start + t.offset, raw.data(), raw.size());  // inside the file: checked above
    std::vector<float> v(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (width == 4) {
        std::memcpy(&v[i], raw.data() + 4 * i, 4);
      } else {
        std::uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        v[i] = f16_to_float(h);
      }
    }
    f.positional_tensors[t.name] = std::move(v);
  }
  return f;
}

}  // namespace

std::string GgufValue::to_string() const {
  if (type == kString) return "\"" + text + "\"";
  if (type != kArray) return format_number(number);
  const std::size_t held = numbers.size() + strings.size();
  const std::uint64_t total = std::max<std::uint64_t>(count, held);
  std::string s = "[";
  for (std::size_t i = 0; i < held; ++i) {
    if (i) s += ", ";
    if (i >= 16) break;
    s += elem_type == kString ? "\"" + strings[i] + "\"" : format_number(numbers[i]);
  }
  return s + (total > 16 ? "... (" + std::to_string(total) + " values)]" : "]");
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& kv : metadata)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

GgufFile parse_gguf(const std::string& bytes) {
  const Source src{bytes.size(), [&](std::uint64_t at, char* dst, std::size_t n) { std::memcpy(dst, bytes.data() + at, n); }};
  return parse(src);
}

GgufFile read_gguf(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error("cannot read " + path + ": not a regular file");
  const Source src{static_cast<std::uint64_t>(st.st_size), [&](std::uint64_t at, char* dst, std::size_t n) {
                     while (n > 0) {
                       const ssize_t got = ::pread(fd, dst, n, static_cast<off_t>(at));
                       if (got < 0 && errno == EINTR) continue;
                       if (got <= 0)
                         throw Error("cannot read " + path + " at byte " + std::to_string(at) + ": " +
                                     (got < 0 ? std::strerror(errno) : "the file shrank while it was read"));
                       dst += got, at += static_cast<std::uint64_t>(got), n -= static_cast<std::size_t>(got);
                     }
                   }};
  try {
    return parse(src);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace posenc
