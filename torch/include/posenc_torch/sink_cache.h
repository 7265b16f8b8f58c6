// StreamingLLM's KV cache (Xiao et al. 2023, "Efficient Streaming Language Models with Attention
// Sinks"): the first `sinks` tokens of a stream and the most recent `window`, keys stored after
// RoPE. Positions are cache slots (the paper's section 3.2): a token enters rotated at its slot,
// and when tokens are evicted the window kept after the sinks moves back by the gap, its keys
// re-rotated in place by the core's rope_shift (R(-gap) R(p) k = R(p - gap) k, rope_shift.h), so
// the cache always holds keys rotated at 0 .. length() - 1 and a query sits at most
// sinks + window - 1 from any key. Without re-rotation (rerotate = false: the baseline of
// transformers #26553, a cache that stores rotated keys and only drops tokens) every token keeps
// the position it had in the stream, so the sinks drift ever further from the query.
//
// It drives a TransformerLM: cache() is a KVCache whose keys are cached rotated (hf_stale_keys,
// so the model's libtorch path), passed to forward; evict() after each forward. Streams without
// padding (every row of the batch one stream of the same length).
#pragma once

#include <cstdint>

#include "posenc_torch/model.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {

struct SinkCacheOptions {
  std::int64_t sinks = 4;   // s >= 0: the first tokens, never evicted
  std::int64_t window = 0;  // w >= 1: the most recent tokens kept
  bool rerotate = true;     // false: evicted gaps stay open (positions in the stream)
};

class SinkCache {
 public:
  // Errors (posenc::Error) name a setting out of range.
  explicit SinkCache(const SinkCacheOptions& options);

  // The model's cache: per layer keys [B, Hk, T, D] rotated at their slots (or stream
  // positions), values, the mask and tokens of the T <= sinks + window tokens kept.
  KVCache& cache() { return cache_; }
  const KVCache& cache() const { return cache_; }
  const SinkCacheOptions& options() const { return options_; }
  std::int64_t evicted() const { return evicted_; }  // tokens dropped so far

  // Drops the oldest tokens after the sinks until at most sinks + window remain, and (rerotate)
  // shifts the kept window's keys back by the gap. rope: the schedule the keys were rotated with
  // (its frequencies and layout; the shift applies no attention factor again). Keys must be
  // float32, bf16 or f16 on the CPU.
  void evict(const RopeSpec& rope);

 private:
  SinkCacheOptions options_;
  KVCache cache_;
  std::int64_t evicted_ = 0;
};

}  // namespace posenc::torch_layer
