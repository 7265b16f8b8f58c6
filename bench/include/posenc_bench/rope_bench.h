// The RoPE throughput benchmark behind `posenc bench rope`: the kernel and the machine's own
// memory ceiling, measured in the same process with their runs interleaved.
#pragma once

#include <cstdint>
#include <string>

#include "posenc/rope_apply.h"

namespace posenc::bench {

struct RopeBenchConfig {
  int tokens = 8192;
  int heads = 32;     // q heads
  int kv_heads = 8;   // k heads
  int head_dim = 128;
  DType dtype = DType::kF32;
  RopeLayout layout = RopeLayout::kHalfSplit;
  int threads = 0;    // 0: all
  bool table = true;  // false: cos/sin on the fly (accurate angles)
  bool head_major = false;  // q and k stored [B, H, S, D] instead of [B, S, H, D]
  int repeats = 9;    // median of this many interleaved runs (>= 7 for the pinned form)
  std::string target;  // a Highway target name ("AVX2", "AVX3", ...) for kernel and ceiling; "": the best
  // Also time xPos (rope_xpos.h: scale_base 512, gamma 0.4, centre tokens / 2) on the same q and
  // k, interleaved with plain RoPE's runs. Needs kv_heads >= 1: q and k swap places every other
  // run, so each takes the query's and the key's scale in turn and the values stay in range.
  bool xpos = false;
};

struct RopeBenchResult {
  double seconds = 0;            // median kernel time per call
  double ceiling_seconds = 0;    // median read-modify-write pass over the same bytes
  double gbps = 0;               // (bytes read + written of q and k) / seconds / 1e9
  double ceiling_gbps = 0;
  double fraction_of_ceiling = 0;
  double ns_per_element = 0;     // per element of q and k
  std::int64_t elements = 0;
  int threads = 0;
  int ceiling_threads = 0;       // the threads the ceiling pass ran on (the kernel's count)
  std::string target;            // SIMD target used
  bool native_bf16 = false;      // bf16 narrowed by the CPU's instruction (rope_native_bf16)
  std::string prefetch;          // the walks' software prefetch (rope_prefetch_choice): none, l1, l2
  bool prefetch_settled = false; // measured on this run's first calls (or fixed by POSENC_ROPE_PREFETCH)
  std::size_t prefetch_measured_from_bytes = 0;  // the smallest call measured
  // bf16/f16: float32 q and k of the same shape, timed in the same run; f32: its own rate (1).
  double f32_ns_per_element = 0;
  double rate_vs_f32 = 0;        // this dtype's element rate / float32's
  // xpos only (0 otherwise): xPos's median time, and it over plain RoPE's (the same run).
  double xpos_seconds = 0;
  double xpos_over_rope = 0;
};

RopeBenchResult run_rope_bench(const RopeBenchConfig& config);

// The Highway targets this machine can run, by name ("AVX3 AVX2 SSE4 ..."), best first.
std::string available_targets();

}  // namespace posenc::bench
