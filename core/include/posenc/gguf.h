// GGUF (llama.cpp's model file): the metadata, the positional tensors, and the RoPE schedule
// llama.cpp computes from them, compared with Hugging Face's for the same model.
//
//   "GGUF" u32 version (2, 3) u64 n_tensors u64 n_kv
//   n_kv   x { string key, u32 type, value }        string = u64 length + bytes (no NUL)
//   n_tensors x { string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset }
//   padding to general.alignment (default 32), then tensor data at their offsets
//
// Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string,
// 9 array (u32 element type, u64 count, elements), 10 u64, 11 i64, 12 f64 (gguf.h of ggml).
// Only the header and the positional tensors' data are read: rope_freqs.weight (llama3's
// per-frequency divisors) and rope_factors_long/short.weight (LongRoPE), F32 or F16. A model's
// weights (gigabytes) are never read, and a metadata array (a tokenizer's 150k strings) is kept
// as its first kGgufHeldValues values and its count, so memory stays bounded by the header.
//
// The structure is checked as ggml's gguf_init_from_file checks it, so a file llama.cpp would
// refuse is refused here: duplicate keys or tensor names, general.alignment not a u32 power of
// two, a tensor type ggml does not know or a row that is not whole blocks, dims whose product
// overflows, a tensor not at the running (aligned) offset, tensor data past the end of the file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "posenc/hf_config.h"

namespace posenc {

inline constexpr std::size_t kGgufHeldValues = 64;  // of an array, the values kept (the rest: count)

struct GgufValue {
  std::uint32_t type = 0;        // the GGUF value type (0..12)
  std::uint32_t elem_type = 0;   // arrays: the element type
  double number = 0;             // numbers and bools (exact for |integers| <= 2^53)
  std::string text;              // strings
  std::vector<double> numbers;   // arrays of numbers or bools: the first kGgufHeldValues
  std::vector<std::string> strings;  // arrays of strings: the first kGgufHeldValues
  std::uint64_t count = 0;       // arrays read from a file: the element count in the file
  std::string to_string() const;  // for reports: 1e+06, "yarn", [16, 24, 24]
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> dims;
  std::uint32_t ggml_type = 0;  // 0 F32, 1 F16, ...
  std::uint64_t offset = 0;     // from the start of the data section
};

struct GgufFile {
  std::uint32_t version = 3;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;
  std::map<std::string, std::vector<float>> positional_tensors;  // rope_freqs.weight, rope_factors_*.weight
  const GgufValue* find(const std::string& key) const;
};

// Parses a GGUF file's bytes. Throws posenc::Error naming the offset and what was expected for
// a bad magic or version, a truncated file, an unknown value type, a size beyond the file, and
// each structural check above.
GgufFile parse_gguf(const std::string& bytes);
// The same from a file, reading the header in bounded windows and seeking to the positional
// tensors: a 70B model is checked in the memory of its header.
GgufFile read_gguf(const std::string& path);

// The bytes of a GGUF v3 file with this metadata and the positional tensors (F32) as its only
// tensors; for tests and seed corpora.
std::string gguf_bytes(const GgufFile& file);

// The schedule llama.cpp computes (llama-model.cpp load_hparams, the llama_context constructor,
// ggml-cpu ops.cpp rope_yarn / ggml_rope_cache_init, ggml.c ggml_rope_yarn_corr_dims):
// inv_freq[i] = base^(-2i/n_rot) / freq_factor[i], then for YaRN with ext_factor e and
// freq_scale = 1 / factor: interp (1 - ramp e) + extrap ramp e. The multiplier on cos/sin is
// get_mscale(factor) (or the yarn_log_multiplier ratio) x rope.scaling.attn_factor when e != 0,
// else rope.scaling.yarn_attn_factor x rope.scaling.attn_factor.
struct GgufRope {
  std::string arch;                        // general.architecture
  int n_rot = 0;                           // rope.dimension_count (default: key_length or n_embd / n_head)
  double freq_base = 10000;
  std::string scaling_type = "linear";     // rope.scaling.type (llama.cpp's default: linear)
  double factor = 1;                       // rope.scaling.factor (or rope.scale_linear)
  std::int64_t n_ctx_orig = 0;             // rope.scaling.original_context_length (default context_length)
  double ext_factor = 0, beta_fast = 32, beta_slow = 1;
  double attn_factor = 1;                  // rope.scaling.attn_factor
  double log_multiplier = 0;               // rope.scaling.yarn_log_multiplier (mscale_all_dim)
  std::string freq_factors_tensor;         // which tensor divided the frequencies, "" for none
  std::vector<double> inv_freq;            // [n_rot / 2]
  double attention_factor = 1;             // the multiplier on cos and sin
  std::vector<std::pair<std::string, std::string>> keys;  // the positional keys found, for display
};

GgufRope gguf_rope(const GgufFile& file);

// One disagreement between llama.cpp's reading and HF's, naming the GGUF key responsible.
struct GgufMismatch {
  std::string key;      // e.g. "qwen2.rope.scaling.factor", or "rope_freqs.weight"
  std::string message;  // what each side has
};

// Compares gguf_rope(file) with HF's schedule for the same model (the full-attention layer,
// at init): rotary dims, base, scaling parameters, every frequency and the attention factor,
// each within float32 rounding (relative 1e-6). Empty when they agree.
std::vector<GgufMismatch> compare_with_hf(const GgufRope& gguf, const ModelRope& hf);

}  // namespace posenc
