#include "posenc_bench/attention_decode_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/half.h"
#include "posenc/host_cache.h"
#include "posenc/rope_kernels.h"
#include "posenc_bench/attention_positions.h"
#include "posenc_bench/memory_pass.h"
#include "posenc_bench/timing.h"

namespace posenc::bench {
namespace {

// [1, tokens, heads, D] stored as dtype (bshd: a KV cache's token-major rows), values drawn from
// N(0, 1) with a fixed seed, so every dtype holds the same numbers up to its rounding.
struct Storage {
  Storage(DType dtype, int tokens, int heads, int D, unsigned seed) : bytes(static_cast<std::size_t>(tokens) * heads * D * dtype_size(dtype)) {
    view = bshd(bytes.data(), dtype, {1, tokens, heads, D});
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < bytes.size() / dtype_size(dtype); ++i) {
      const float x = normal(rng);
      if (dtype == DType::kF32) std::memcpy(&bytes[4 * i], &x, 4);
      const std::uint16_t h = dtype == DType::kBF16 ? float_to_bf16(x) : float_to_f16(x);
      if (dtype != DType::kF32) std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  std::vector<std::uint8_t> bytes;
  RopeTensor view;
};

// One decode step's operands: q, k, v in one dtype, out in f32 (what max_rel_error reads).
struct Step {
  Step(DType dtype, int T, int H, int Hk, int D)
      : q(dtype, 1, H, D, 1), k(dtype, T, Hk, D, 2), v(dtype, T, Hk, D, 3), out(DType::kF32, 1, H, D, 4) {}
  Storage q, k, v, out;
};

}  // namespace

DecodeBenchResult run_decode_bench(const DecodeBenchConfig& c) {
  const int T = c.keys, H = c.heads, Hk = c.kv_heads > 0 ? c.kv_heads : c.heads, D = c.head_dim;
  if (T < 1 || T > (1 << 22)) throw Error("bench attention --decode: --keys must be in [1, 4194304], got " + std::to_string(T));
  if (H < 1 || H > 256 || Hk < 1 || H % Hk != 0)
    throw Error("bench attention --decode: --heads (1..256) must be a multiple of --kv-heads, got " + std::to_string(H) + " and " +
                std::to_string(Hk));
  if (D < 2 || D > 512 || D % 2) throw Error("bench attention --decode: --head-dim must be even, in [2, 512], got " + std::to_string(D));
  if (c.repeats < 1 || c.repeats > 100) throw Error("bench attention --decode: repeats must be in [1, 100], got " + std::to_string(c.repeats));
  DecodeBenchResult r;
  r.threads = kernel_threads(c.threads, "bench attention --decode");
  r.kv_bytes = 2.0 * T * Hk * D * static_cast<double>(dtype_size(c.dtype));
  if (r.kv_bytes > 4.0 * (1 << 30))
    throw Error("bench attention --decode: K and V would take " + std::to_string(static_cast<long>(r.kv_bytes / (1 << 20))) +
                " MiB (over 4 GiB): use fewer --keys or --kv-heads");

  if (is_learned_bias_scheme(c.scheme))
    throw Error("bench attention --decode times none, rope, alibi and t5; --scheme " + c.scheme + " is a prefill benchmark");
  BenchPositions positions(c.scheme, true, H, D, T);
  AttentionParams& p = positions.params;
  p.q_positions.offset = T - 1;  // the new token, after T - 1 cached ones
  AttentionOptions options;
  options.threads = r.threads;
  // A model's long-lived cos/sin table (attention.h): built once, not per step.
  std::unique_ptr<RopeTable> table;
  if (p.positions == AttentionPositions::kRope) {
    table = std::make_unique<RopeTable>(p.rope, T);
    options.table = table.get();
  }

  const Step step(c.dtype, T, H, Hk, D);
  std::unique_ptr<Step> f32;  // the same step on f32 K and V, for rate_vs_f32
  if (c.dtype != DType::kF32) f32 = std::make_unique<Step>(DType::kF32, T, H, Hk, D);
  std::vector<float> buffer(static_cast<std::size_t>(r.kv_bytes / sizeof(float)), 1.0f);  // the read pass's bytes
  // Every timed call starts with the caches holding none of its bytes, as a layer's K and V are
  // when a model of many layers reaches it. Timed warm, a cache that fits in the last-level
  // cache (16 MiB of bf16 over 2 kv heads) was read by the repeated read pass from L3 (47-121
  // GB/s here) and by the step from memory, a ceiling the step could not see.
  const std::size_t flush_floats = std::clamp<std::size_t>(4 * last_level_cache_bytes(), std::size_t{64} << 20, std::size_t{1} << 30) / sizeof(float);
  std::vector<float> flush_buffer(flush_floats, 1.0f);
  r.cache_flush_bytes = static_cast<double>(flush_floats * sizeof(float));
  double sink = 0;
  const auto flush = [&] { sink += memory_read_pass(flush_buffer.data(), flush_buffer.size(), r.threads); };
  const auto run = [&](const Step& s) { attention(s.q.view, s.k.view, s.v.view, s.out.view, p, options); };
  const auto read = [&] { sink += memory_read_pass(buffer.data(), buffer.size(), r.threads); };
  const auto cold_seconds = [&](const auto& f) {
    flush();
    return seconds_of(f);
  };
  run(step);  // warm-up: pages touched, the thread pool started
  read();
  if (f32) run(*f32);
  std::vector<double> steps, reads, f32_steps;
  for (int s = 0; s < c.repeats; ++s) {  // interleaved: the machine's state is shared by all three
    steps.push_back(cold_seconds([&] { run(step); }));
    reads.push_back(cold_seconds(read));
    if (f32) f32_steps.push_back(cold_seconds([&] { run(*f32); }));
  }
  if (sink == 0.5) std::fputs("", stderr);  // keeps the read pass's sums alive
  r.seconds = median(steps);
  r.kv_gbps = r.kv_bytes / r.seconds / 1e9;
  r.read_gbps = r.kv_bytes / median(reads) / 1e9;
  r.fraction_of_memory_ceiling = r.kv_gbps / r.read_gbps;
  if (f32) {
    r.f32_seconds = median(f32_steps);
    r.rate_vs_f32 = r.f32_seconds / r.seconds;
  }
  r.extra_bytes = attention_extra_bytes(step.q.view, step.k.view, p, options);
  r.target = attention_kernel_target();

  const Storage ref(DType::kF32, 1, H, D, 5);
  attention_reference(step.q.view, step.k.view, step.v.view, ref.view, p, options);
  run(step);
  double worst = 0, largest = 0;
  for (int h = 0; h < H; ++h)
    for (int x = 0; x < D; ++x) {
      const std::int64_t at = h * ref.view.head_stride + x;
      const float want = static_cast<const float*>(ref.view.data)[at];
      const float got = static_cast<const float*>(step.out.view.data)[at];
      worst = std::max(worst, static_cast<double>(std::abs(got - want)));
      largest = std::max(largest, static_cast<double>(std::abs(want)));
    }
  r.max_rel_error = largest > 0 ? worst / largest : worst;
  return r;
}

}  // namespace posenc::bench
