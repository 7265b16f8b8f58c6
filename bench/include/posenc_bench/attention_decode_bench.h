// `posenc bench attention --decode`: one decode step (S = 1 query per sequence) over a KV cache
// of T keys, timed beside a streaming read of the same bytes with the same threads in the same
// run, each call starting with K, V and the read's bytes out of the caches, so the kernel's K and
// V bytes per second read as a fraction of the memory ceiling; with
// bf16/f16 K and V, also the same step on f32 K and V. Core only (no libtorch).
#pragma once

#include <cstdint>
#include <string>

#include "posenc/rope_apply.h"

namespace posenc::bench {

struct DecodeBenchConfig {
  int keys = 32768;                            // T, the cache's length
  int heads = 8, kv_heads = 0, head_dim = 64;  // kv_heads 0: heads
  DType dtype = DType::kF32;                   // q, k, v (and out) storage
  std::string scheme = "alibi";                // none, rope (a long-lived cos/sin table), alibi, t5
  int threads = 0;                             // 0: every hardware thread (threads.h)
  int repeats = 3;                             // timed calls each (median), interleaved, each after a cache flush
};

struct DecodeBenchResult {
  double seconds = 0;                  // one decode step, median
  double kv_bytes = 0;                 // K and V as stored: 2 T kv_heads head_dim x dtype size
  double kv_gbps = 0;                  // kv_bytes / seconds / 1e9
  double read_gbps = 0;                // the streaming read of kv_bytes, same threads, same run
  double cache_flush_bytes = 0;        // read before every timed call (steps and read alike), so each starts cold
  double fraction_of_memory_ceiling = 0;  // kv_gbps / read_gbps
  double f32_seconds = 0, rate_vs_f32 = 0;  // the f32 step, same run (dtype != f32 only)
  std::int64_t extra_bytes = 0;        // attention_extra_bytes
  double max_rel_error = 0;            // against attention_reference
  std::string target;
  int threads = 0;
};

DecodeBenchResult run_decode_bench(const DecodeBenchConfig& config);

}  // namespace posenc::bench
