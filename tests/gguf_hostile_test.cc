// GGUF files ggml refuses, values no engine can use, and files too large to read whole (issue 33,
// F2, F13): each refused with an error naming the key, tensor or offset, or read in the memory of
// its header.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc {
namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_string(std::string& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  out += s;
}

struct Tensor {
  std::string name;
  std::vector<std::uint64_t> dims;
  std::uint32_t type;
  std::uint64_t offset;
};

// A GGUF v3 header: llama metadata (plus `extra` key/value bytes, counted in extra_keys), the
// tensor infos as given, padding to 32; the tensor data are the caller's.
std::string header(const std::vector<Tensor>& tensors, const std::string& extra = "", int extra_keys = 0) {
  std::string kv;
  put_string(kv, "general.architecture");
  put<std::uint32_t>(kv, 8);
  put_string(kv, "llama");
  put_string(kv, "llama.rope.dimension_count");
  put<std::uint32_t>(kv, 4);
  put<std::uint32_t>(kv, 8);
  std::string out = "GGUF";
  put<std::uint32_t>(out, 3);
  put<std::uint64_t>(out, tensors.size());
  put<std::uint64_t>(out, 2 + extra_keys);
  out += kv + extra;
  for (const Tensor& t : tensors) {
    put_string(out, t.name);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(t.dims.size()));
    for (auto d : t.dims) put<std::uint64_t>(out, d);
    put<std::uint32_t>(out, t.type);
    put<std::uint64_t>(out, t.offset);
  }
  out.append((32 - out.size() % 32) % 32, '\0');
  return out;
}

std::string f32_key(const std::string& key, float v) {
  std::string out;
  put_string(out, key);
  put<std::uint32_t>(out, 6);
  put<float>(out, v);
  return out;
}

// The error parse_gguf + gguf_rope give, "" when they accept.
std::string error_of(const std::string& bytes) {
  try {
    gguf_rope(parse_gguf(bytes));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(bytes, part)                                           \
  do {                                                                          \
    const std::string err = error_of(bytes);                                    \
    EXPECT_NE(err.find(part), std::string::npos) << "error: '" << err << "'";  \
  } while (0)

const std::string kData64(64, '\0');  // room for two 8-value F32 tensors

TEST(GgufHostile, StructureIsCheckedAsGgmlChecksIt) {
  EXPECT_EQ(error_of(header({{"a", {8}, 0, 0}, {"b", {8}, 0, 32}}) + kData64), "");
  EXPECT_ERROR_HAS(header({{"a", {8}, 0, 0}, {"b", {8}, 0, 0}}) + kData64, "tensor 'b' is at offset 0; ggml expects 32");
  EXPECT_ERROR_HAS(header({{"a", {8}, 0, 0}, {"b", {8}, 0, 48}}) + kData64, "offset 48 is not a multiple of general.alignment 32");
  EXPECT_ERROR_HAS(header({{"a", {8}, 0, 0}, {"b", {8}, 0, 32}}) + kData64.substr(0, 40), "beyond the end of the file");
  EXPECT_ERROR_HAS(header({{"a", {std::uint64_t{1} << 62, 8}, 0, 0}}) + kData64, "product overflows int64");
  EXPECT_ERROR_HAS(header({{"a", {8}, 0, 0}, {"a", {8}, 0, 32}}) + kData64, "tensor 'a' appears twice");
  EXPECT_ERROR_HAS(header({{"a", {8}, 4, 0}}) + kData64, "ggml type 4, not a type ggml reads");
  EXPECT_ERROR_HAS(header({{"a", {33}, 2, 0}}) + kData64, "row of 33 elements, not a multiple of its type's block of 32");
  EXPECT_ERROR_HAS(header({{std::string(64, 'n'), {8}, 0, 0}}) + kData64, "longer than ggml's 63 bytes");

  std::string dup;
  put_string(dup, "llama.rope.dimension_count");
  put<std::uint32_t>(dup, 4);
  put<std::uint32_t>(dup, 16);
  EXPECT_ERROR_HAS(header({}, dup, 1), "key 'llama.rope.dimension_count' appears twice");
  std::string align48, align_f32;
  put_string(align48, "general.alignment");
  put<std::uint32_t>(align48, 4);
  put<std::uint32_t>(align48, 48);
  EXPECT_ERROR_HAS(header({}, align48, 1), "general.alignment must be a u32 power of two");
  align_f32 = f32_key("general.alignment", 32);
  EXPECT_ERROR_HAS(header({}, align_f32, 1), "general.alignment must be a u32 power of two (as ggml reads it), got a value of type 6");
}

TEST(GgufHostile, ValuesNoEngineCanUseAreRefusedNamingTheKey) {
  const auto with = [](const std::string& key, float v) { return header({}, f32_key(key, v), 1); };
  EXPECT_EQ(error_of(with("llama.rope.scaling.factor", 4)), "");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.factor", 1e-30f), "radians per position (from llama.rope.freq_base, rope.scaling.factor 1.0000000031710769e-30)");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.attn_factor", -1), "llama.rope.scaling.attn_factor must be > 0, got -1");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.yarn_attn_factor", 0), "yarn_attn_factor must be > 0, got 0");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.yarn_ext_factor", 1e30f), "yarn_ext_factor must be in [0, 1]");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.yarn_beta_fast", -32), "yarn_beta_fast must be > 0, got -32");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.yarn_beta_slow", -1), "yarn_beta_slow must be > 0");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.yarn_log_multiplier", -0.1f), "yarn_log_multiplier must be >= 0");
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::string data(32, '\0');
    const float one = 1.0f;
    for (int i = 0; i < 4; ++i) std::memcpy(&data[4 * i], i == 2 ? &bad : &one, 4);
    EXPECT_ERROR_HAS(header({{"rope_freqs.weight", {4}, 0, 0}}) + data, "rope_freqs.weight entry 2 is");
  }
  // gguf-090/091: every factor tensor is checked alike, the long factors too (llama.cpp divides by
  // them past n_ctx_orig) though the schedule printed here is the short one's.
  for (float bad : {0.0f, std::numeric_limits<float>::quiet_NaN()}) {
    std::string data(64, '\0');
    const float one = 1.0f;
    for (int i = 0; i < 8; ++i) std::memcpy(&data[4 * i], i >= 4 ? &bad : &one, 4);
    const std::string two = header({{"rope_factors_short.weight", {4}, 0, 0}, {"rope_factors_long.weight", {4}, 0, 32}});
    EXPECT_ERROR_HAS(two + data, "rope_factors_long.weight entry 0 is");
    EXPECT_ERROR_HAS(two + data, "; expected a finite divisor > 0");
  }
  EXPECT_ERROR_HAS(header({{"rope_factors_long.weight", {3}, 0, 0}}) + kData64, "rope_factors_long.weight has 3 values; n_rot / 2 = 4");
  // gguf-070: the product of finite factors must be usable: float16's normal range, the KV cache's.
  EXPECT_ERROR_HAS(with("llama.rope.scaling.attn_factor", 3e38f), "the attention factor on cos/sin is 3");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.attn_factor", 65600), "expected a value in [6.103515625e-05, 65504]");
  EXPECT_ERROR_HAS(with("llama.rope.scaling.yarn_attn_factor", 1e-5f), "times yarn_attn_factor 9.99");
  EXPECT_EQ(error_of(with("llama.rope.scaling.attn_factor", 65504)), "");
  EXPECT_EQ(error_of(with("llama.rope.scaling.attn_factor", 0x1p-14f)), "");
  std::string u32_arch = "GGUF";
  put<std::uint32_t>(u32_arch, 3);
  put<std::uint64_t>(u32_arch, 0);
  put<std::uint64_t>(u32_arch, 1);
  put_string(u32_arch, "general.architecture");
  put<std::uint32_t>(u32_arch, 4);
  put<std::uint32_t>(u32_arch, 7);
  EXPECT_ERROR_HAS(u32_arch, "general.architecture must be string, got u32 7");
}

// A model-sized file (sparse: 4 GiB of tensor data) and a 256 MiB metadata array: read_gguf
// reads the header and seeks; an array keeps kGgufHeldValues values and its count.
TEST(GgufHostile, AModelSizedFileIsReadInTheMemoryOfItsHeader) {
  const std::string path = ::testing::TempDir() + "posenc_gguf_big_" + std::to_string(::getpid()) + ".gguf";
  std::string blob_key;
  put_string(blob_key, "tokenizer.blob");
  put<std::uint32_t>(blob_key, 9);
  put<std::uint32_t>(blob_key, 0);  // u8
  const std::uint64_t blob = std::uint64_t{1} << 28;
  put<std::uint64_t>(blob_key, blob);
  // The header with the blob's bytes in the middle: prefix, a hole of `blob` zeros, the rest.
  const std::string whole = header({{"blk.0.weight", {std::uint64_t{1} << 30}, 0, 0}}, blob_key + std::string(8, '\0'), 1);
  const std::size_t cut = whole.find("tokenizer.blob") + 14 + 4 + 4 + 8;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, whole.data(), cut, 0), static_cast<ssize_t>(cut));
  // The 8 zero bytes stand for the first 8 of the blob: the rest of the header follows the hole.
  const std::string rest = whole.substr(cut + 8);
  const std::uint64_t after = cut + blob;
  ASSERT_EQ(::pwrite(fd, rest.data(), rest.size(), static_cast<off_t>(after)), static_cast<ssize_t>(rest.size()));
  const std::uint64_t data_start = (after + rest.size() + 31) / 32 * 32;
  // rest ends padded for its own offset; recompute the padding at the real offset.
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(data_start + (std::uint64_t{4} << 30))), 0);
  ::close(fd);
  try {
    const GgufFile f = read_gguf(path);
    const GgufValue* v = f.find("tokenizer.blob");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->count, blob);
    EXPECT_EQ(v->numbers.size(), kGgufHeldValues);
    EXPECT_NE(v->to_string().find("(268435456 values)"), std::string::npos) << v->to_string();
    EXPECT_EQ(f.tensors.size(), 1u);
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    EXPECT_LT(usage.ru_maxrss, 512 * 1024) << "KiB resident: the file's 4.25 GiB were read";
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  ::truncate(path.c_str(), 0);
  std::remove(path.c_str());
}

// A FIFO given as the file: opening it waited for a writer; now it is refused at once.
TEST(GgufHostile, AFifoIsRefusedWithoutWaiting) {
  const std::string path = ::testing::TempDir() + "posenc_gguf_fifo_" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  try {
    read_gguf(path);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace posenc
