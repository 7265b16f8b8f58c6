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
// alone). (1) The AVX512-BF16 value path (ws.bf16.values) still sums a whole tile after the next
// tile's scores, K's tile then V's: there K and V are prefetched kPrefetchBytes of
// cache ahead of the key scored (every kv head's K and V rows of a key count), as before the
// pipeline; measured on a Zen 4 EPYC (idle, before the pipeline), bf16, T = 32768, one thread, ns
// a key from memory (8 / 2 kv heads): with these prefetches 124 / 37, without V's 210 / 55.
// (2) The by-head path (four keys a group) prefetches V's rows kPrefetchBytes of V ahead of the
// key summed (32 keys for f32 over 2 kv heads of 64, 64 for bf16; a head-major V unmeasured).
// Zen 3 EPYC, T = 32768, cold, ns a key, interleaved runs (the host's memory moved between sets:
// compare within a set): f32 over 2 kv heads, 1 thread 133 -> 113-118 (8 to 32 keys ahead), 2
// threads 73 -> 60-61; again, 127 -> 114 and 69 -> 61 (16 KiB); bf16 69 -> 70-72 (even: bound by
// arithmetic); K's rows too 138. On the by-key path (8 kv heads) the same V prefetch was slower:
// f32 287 -> 343-372, bf16 166 -> 185-195.
constexpr int kPrefetchBytes = 16384;

// Keys ahead of the one being read whose rows are prefetched, for these K and V (the bf16
// value path), or for V alone (the by-head path: k null).
inline std::int64_t prefetch_keys(const RopeTensor* k, const RopeTensor& v) {
  const std::int64_t key_bytes = (k ? static_cast<std::int64_t>(k->heads) * k->head_dim * dtype_size(k->dtype) : 0) +
                                 static_cast<std::int64_t>(v.heads) * v.head_dim * dtype_size(v.dtype);
  return std::max<std::int64_t>(1, kPrefetchBytes / key_bytes);
}

// Prefetches the rows of keys j .. j + count - 1 (batch row b) of every kv head of x (K or V, in
// its own dtype) into L2 (locality 1: prefetcht2 on x86); past the cache's end it is not called
// (no out-of-range pointer is formed), nor with count 0. A dense token-major cache holds them as one span.
// Inlined where it is called: out of line, the by-head step over 2 f32 kv heads took 118 ns a key
// where the inlined one took 103 (Zen 3, cold, the same runs).
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
