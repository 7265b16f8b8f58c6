// Decode's software prefetches (attention_decode-inl.h): which rows of a KV cache are fetched into
// L2 ahead of the decode step's reads, and how far. Target-independent (__builtin_prefetch).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <hwy/base.h>

#include "attention_plan.h"

namespace posenc::attention_detail::decode_prefetch {

// Software prefetches into L2 where measured to help (elsewhere the hardware's stream prefetchers
// alone). (1) The by-head path (four keys a group; not the bf16 value path) prefetches, before a
// group's scores, the group's K rows and the last tile's V rows of as many keys (summed after the
// scores): not ahead of the reads but in one burst of lines, so they are in flight together rather
// than as the loads among the FMAs reach them. Zen 3 EPYC (AVX2), T = 32768, cold, ns a key, three
// interleaved runs, against V's rows 16 KiB ahead (below): f32 over 2 kv heads of 64, one thread
// 107 -> 82, two 51 -> 41; bf16 68 -> 61, 36 -> 34; f32 at D = 80 158 -> 123, at 128 220 -> 201
// (V's burst alone 188, 145 at 80, 91 at 64). Bursts of the next group's rows instead (4 or 8 keys
// ahead) measured 105-109 at 64; on the by-key path (8 kv heads) K's and V's key rows in a burst:
// f32 208 -> 197, bf16 108 -> 123: not there. Where only the scores are bf16 products (AVX512-BF16;
// bf16 K over f32 or f16 V) the burst replaced V's 16 KiB prefetch unmeasured (no such host here).
// (2) The AVX512-BF16 value path (ws.bf16.values), which still sums a whole tile after the next
// tile's scores, K's tile then V's, prefetches K and V kPrefetchBytes of cache ahead of the key
// scored (every kv head's K and V rows of a key count), as before the pipeline; measured on a Zen 4
// EPYC (idle, before the pipeline), bf16, T = 32768, one thread, ns a key from memory (8 / 2 kv
// heads): with these prefetches 124 / 37, without V's 210 / 55.
// Measured and not kept, Zen 3 EPYC (AVX2), T = 32768, cold, ns a key, interleaved runs: on the
// by-key path (8 kv heads) V's rows 16 KiB ahead, f32 287 -> 343-372, bf16 166 -> 185-195. On the
// by-head path (2 kv heads) V's rows 16 KiB ahead of the key summed first helped (f32 127 -> 114
// one thread, 69 -> 61 two), then, with the products' D a constant, lost to (1); K's rows 4-32 KiB
// ahead too, 113 -> 133-137.
constexpr int kPrefetchBytes = 16384;

// Keys ahead of the one being read whose K and V rows are prefetched (2: the bf16 value path).
inline std::int64_t prefetch_keys(const RopeTensor& k, const RopeTensor& v) {
  const std::int64_t key_bytes = static_cast<std::int64_t>(k.heads) * k.head_dim * dtype_size(k.dtype) +
                                 static_cast<std::int64_t>(v.heads) * v.head_dim * dtype_size(v.dtype);
  return std::max<std::int64_t>(1, kPrefetchBytes / key_bytes);
}

// Prefetches the rows of keys j .. j + count - 1 (batch row b) of every kv head of x (K or V, in
// its own dtype) into L2 (locality 1: prefetcht2 on x86); past the cache's end it is not called
// (no out-of-range pointer is formed), nor with count 0. A dense token-major cache holds them as one span.
// Inlined where it is called: out of line, the by-head step over 2 f32 kv heads took 118 ns a key
// where the inlined one took 103 (Zen 3, cold, the same runs, when that path prefetched).
HWY_INLINE void PrefetchKeys(const RopeTensor& x, int b, std::int64_t j, int count) {
  const std::size_t element = dtype_size(x.dtype), row_bytes = static_cast<std::size_t>(x.head_dim) * element;
  const char* data = static_cast<const char*>(x.data);
  if (x.head_stride == x.head_dim && x.token_stride == std::int64_t{x.heads} * x.head_dim) {
    const char* first = data + offset_of(x, b, static_cast<int>(j), 0) * static_cast<std::int64_t>(element);
    const std::size_t bytes = static_cast<std::size_t>(count) * x.heads * row_bytes;
    for (std::size_t line = 0; line < bytes; line += 64) __builtin_prefetch(first + line, 0, 1);
    return;
  }
  for (int i = 0; i < count; ++i)
    for (int hk = 0; hk < x.heads; ++hk) {
      const char* row = data + offset_of(x, b, static_cast<int>(j + i), hk) * static_cast<std::int64_t>(element);
      for (std::size_t line = 0; line < row_bytes; line += 64) __builtin_prefetch(row + line, 0, 1);
    }
}

}  // namespace posenc::attention_detail::decode_prefetch
