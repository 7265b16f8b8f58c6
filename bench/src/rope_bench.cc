#include "posenc_bench/rope_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <hwy/targets.h>

#include "posenc/error.h"
#include "posenc_bench/memory_pass.h"
#include "posenc_bench/timing.h"
#include "posenc/rope_kernels.h"
#include "posenc_bench/bench_threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace posenc::bench {
namespace {

// A zeroed, 64-byte aligned byte buffer.
class AlignedBytes {
 public:
  explicit AlignedBytes(std::size_t n) : size_(n), data_(static_cast<std::uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {
    if (!data_) throw Error("cannot allocate " + std::to_string(n) + " bytes for the benchmark");
    std::memset(data_, 0, n);
  }
  ~AlignedBytes() { std::free(data_); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  std::uint8_t* data() { return data_; }
  std::size_t size() const { return size_; }
  std::uint8_t& operator[](std::size_t i) { return data_[i]; }

 private:
  std::size_t size_;
  std::uint8_t* data_;
};

// Restricts dispatch to one target for the benchmark's lifetime (kernel and ceiling alike).
class TargetScope {
 public:
  explicit TargetScope(const std::string& name) {
    if (name.empty()) return;
    for (const auto t : hwy::SupportedAndGeneratedTargets())
      if (name == hwy::TargetName(t)) {
        hwy::SetSupportedTargetsForTest(t);
        active_ = true;
        return;
      }
    throw Error("--target must be one of " + available_targets() + " (this machine and build), got '" + name + "'");
  }
  ~TargetScope() {
    if (active_) hwy::SetSupportedTargetsForTest(0);
  }
  TargetScope(const TargetScope&) = delete;
  TargetScope& operator=(const TargetScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace

std::string available_targets() {
  std::string names;
  for (const auto t : hwy::SupportedAndGeneratedTargets()) names += (names.empty() ? "" : " ") + std::string(hwy::TargetName(t));
  return names;
}

RopeBenchResult run_rope_bench(const RopeBenchConfig& c) {
  const TargetScope target_scope(c.target);
  // Each setting named with its value (issue 33, bench-010..014: one message for all named none).
  const auto need = [](bool ok, const char* flag, int value, const char* expected) {
    if (!ok) throw Error(std::string("bench rope: ") + flag + " must be " + expected + ", got " + std::to_string(value));
  };
  need(c.tokens >= 1, "--tokens", c.tokens, ">= 1");
  need(c.heads >= 1, "--heads", c.heads, ">= 1");
  need(c.kv_heads >= 0, "--kv-heads", c.kv_heads, ">= 0");
  need(c.head_dim >= 2 && c.head_dim % 2 == 0, "--head-dim", c.head_dim, "even and >= 2");
  need(c.repeats >= 1, "--repeats", c.repeats, ">= 1");
  check_bench_threads(c.threads, "bench rope", "all");
  if (c.xpos && c.kv_heads < 1)
    throw Error("bench --xpos needs --kv-heads >= 1, got " + std::to_string(c.kv_heads) +
                ": q and k swap places every other run so that xPos's opposite scales keep the values in range");
  // q and k, plus a ceiling buffer of the same bytes: 2^27 elements of f32 is 1 GiB in all.
  // Repeats x elements bounds the time (each repeat is a kernel pass and a ceiling pass); a
  // repeat costs at least kMinRepeatElements however small the shape (threads start, timers).
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 27, kMaxWork = std::int64_t{1} << 31;
  constexpr std::int64_t kMinRepeatElements = std::int64_t{1} << 16;
  // Each product checked as it is formed: --tokens 2^30 --heads 2^30 wrapped to 0 and the
  // repeats check below divided by it (SIGFPE).
  std::int64_t q_elems = 0, k_elems = 0, qk = 0;
  const bool overflow = __builtin_mul_overflow(std::int64_t{c.tokens}, std::int64_t{c.heads}, &q_elems) ||
                        __builtin_mul_overflow(q_elems, std::int64_t{c.head_dim}, &q_elems) ||
                        __builtin_mul_overflow(std::int64_t{c.tokens}, std::int64_t{c.kv_heads}, &k_elems) ||
                        __builtin_mul_overflow(k_elems, std::int64_t{c.head_dim}, &k_elems) ||
                        __builtin_add_overflow(q_elems, k_elems, &qk);
  if (overflow || qk > kMaxElements)
    throw Error("bench shape --tokens " + std::to_string(c.tokens) + " x (--heads " + std::to_string(c.heads) +
                " + --kv-heads " + std::to_string(c.kv_heads) + ") x --head-dim " + std::to_string(c.head_dim) +
                " is " + (overflow ? std::string("beyond 2^63") : std::to_string(qk)) +
                " q + k elements, more than the limit of " + std::to_string(kMaxElements) +
                " (2^27: 1 GiB of float32 with the ceiling buffer)");
  const std::int64_t per_repeat = std::max(qk, kMinRepeatElements);
  if (c.repeats > kMaxWork / per_repeat)
    throw Error("bench --repeats " + std::to_string(c.repeats) + " x " + std::to_string(per_repeat) +
                " elements (at least " + std::to_string(kMinRepeatElements) + " per repeat) is more than " +
                std::to_string(kMaxWork) + " element passes (2^31: some seconds); use at most " +
                std::to_string(kMaxWork / per_repeat) + " repeats for this shape");
  const std::size_t esize = dtype_size(c.dtype);
  // 64-byte aligned, as tensors from torch or any allocator for SIMD are.
  AlignedBytes q(static_cast<std::size_t>(q_elems) * esize), k(static_cast<std::size_t>(k_elems) * esize);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto* buf : {&q, &k})
    for (std::size_t i = 0; i < buf->size(); i += 2) {  // finite values in every dtype: a small exponent
      (*buf)[i] = static_cast<std::uint8_t>(byte(rng));
      (*buf)[i + 1] = static_cast<std::uint8_t>(0x3c + (byte(rng) & 1));
    }
  RopeParams rp;
  rp.head_dim = c.head_dim;
  const RopeSchedule schedule = compute_schedule(rp);
  RopeApplyParams p = rope_apply_params(schedule, c.layout);
  RopeApplyParams xpos = p;
  xpos.xpos.scale_base = 512;
  xpos.xpos.center = c.tokens / 2;  // x-transformers' and rotary-embedding-torch's floor(L/2)
  RopeTable table(p, c.tokens);
  RopeKernelOptions options;
  options.threads = c.threads;
  options.table = c.table ? &table : nullptr;
  const RopeTensor qv = c.head_major ? bhsd(q.data(), c.dtype, {1, c.tokens, c.heads, c.head_dim})
                                     : bshd(q.data(), c.dtype, {1, c.tokens, c.heads, c.head_dim});
  const RopeTensor kv = c.head_major ? bhsd(k.data(), c.dtype, {1, c.tokens, c.kv_heads, c.head_dim})
                                     : bshd(k.data(), c.dtype, {1, c.tokens, c.kv_heads, c.head_dim});
  const RopeTensor* kp = c.kv_heads > 0 ? &kv : nullptr;
  // bf16/f16 runs also time float32 q and k of the same shape, interleaved with them, so that
  // the element-rate ratio comes from one run (the machine's load changes between runs).
  const bool compare = c.dtype != DType::kF32;
  AlignedBytes q32(compare ? static_cast<std::size_t>(q_elems) * 4 : 0), k32(compare ? static_cast<std::size_t>(k_elems) * 4 : 0);
  for (auto* buf : {&q32, &k32})
    for (std::size_t i = 0; i < buf->size(); i += 4) (*buf)[i + 3] = static_cast<std::uint8_t>(0x3c + (byte(rng) & 1));
  const RopeTensor q32v = c.head_major ? bhsd(q32.data(), DType::kF32, {1, c.tokens, c.heads, c.head_dim})
                                       : bshd(q32.data(), DType::kF32, {1, c.tokens, c.heads, c.head_dim});
  const RopeTensor k32v = c.head_major ? bhsd(k32.data(), DType::kF32, {1, c.tokens, c.kv_heads, c.head_dim})
                                       : bshd(k32.data(), DType::kF32, {1, c.tokens, c.kv_heads, c.head_dim});
  const std::size_t bytes = q.size() + k.size();
  AlignedBytes ceiling_bytes(bytes);
  float* ceiling_buf = reinterpret_cast<float*>(ceiling_bytes.data());
  const std::size_t ceiling_floats = bytes / sizeof(float);
  std::fill(ceiling_buf, ceiling_buf + ceiling_floats, 1.0f);

  RopeBenchResult r;
#ifdef _OPENMP
  r.threads = c.threads > 0 ? c.threads : omp_get_max_threads();
#else
  r.threads = 1;
#endif
  r.target = rope_kernel_target();
  r.elements = q_elems + k_elems;
  r.native_bf16 = rope_native_bf16() && c.layout == RopeLayout::kHalfSplit;  // the layout that uses it
  // The walks' prefetch policy is measured on this process's first large calls (rope_kernels.h,
  // rope_prefetch_choice): they run here, before timing, so every timed call takes the settled one.
  const auto settle = [&](const RopeTensor& qt, const RopeTensor* kt, std::size_t call_bytes) {
    if (call_bytes < rope_prefetch_choice(qt, p, options).measured_from_bytes || c.tokens < 2) return;
    for (int call = 0; call < 64 && !rope_prefetch_choice(qt, p, options).settled; ++call) rope_rotate(qt, kt, {}, p, options);
  };
  settle(qv, kp, bytes);
  if (compare) settle(q32v, kp ? &k32v : nullptr, q32.size() + k32.size());
  const RopePrefetchChoice prefetch = rope_prefetch_choice(qv, p, options);
  r.prefetch = prefetch.policy;
  r.prefetch_settled = prefetch.settled;
  r.prefetch_measured_from_bytes = prefetch.measured_from_bytes;
  std::vector<double> kernel, ceiling, kernel_f32, kernel_xpos;
  const float up = 1.0f + 1.0f / (1 << 20), down = 1.0f / up;
  for (int i = -1; i < c.repeats; ++i) {  // i = -1: warm-up (page faults, thread start)
    // xPos: q as the query and k as the key, then the other way round (each scale undone by the
    // next run); every other repeat it runs first, so that xPos and plain RoPE each follow the
    // memory pass half the time (xPos always after it read 0.1 slower against plain RoPE).
    const auto time_xpos = [&] {
      return i % 2 ? seconds_of([&] { rope_rotate(kv, &qv, {}, xpos, options); })
                   : seconds_of([&] { rope_rotate(qv, &kv, {}, xpos, options); });
    };
    const bool xpos_first = c.xpos && i % 2 != 0;
    double tx = xpos_first ? time_xpos() : 0;
    const double tk = seconds_of([&] { rope_rotate(qv, kp, {}, p, options); });
    const double tc = seconds_of([&] { r.ceiling_threads = memory_rmw_pass(ceiling_buf, ceiling_floats, c.threads, i % 2 ? up : down); });
    const double tf = compare ? seconds_of([&] { rope_rotate(q32v, kp ? &k32v : nullptr, {}, p, options); }) : 0;
    if (c.xpos && !xpos_first) tx = time_xpos();
    if (i >= 0) {
      kernel_xpos.push_back(tx);
      kernel.push_back(tk);
      ceiling.push_back(tc);
      kernel_f32.push_back(tf);
    }
  }
  if (compare) {
    r.f32_ns_per_element = median(kernel_f32) * 1e9 / static_cast<double>(q_elems + k_elems);
    r.rate_vs_f32 = median(kernel_f32) / median(kernel);
  }
  if (c.xpos) {
    r.xpos_seconds = median(kernel_xpos);
    r.xpos_over_rope = r.xpos_seconds / median(kernel);
  }
  r.seconds = median(kernel);
  r.ceiling_seconds = median(ceiling);
  r.gbps = 2.0 * static_cast<double>(bytes) / r.seconds / 1e9;
  r.ceiling_gbps = 2.0 * static_cast<double>(ceiling_floats * sizeof(float)) / r.ceiling_seconds / 1e9;
  r.fraction_of_ceiling = r.gbps / r.ceiling_gbps;
  r.ns_per_element = r.seconds * 1e9 / static_cast<double>(r.elements);
  if (!compare) {  // float32 is its own reference: every dtype reports both ratios
    r.f32_ns_per_element = r.ns_per_element;
    r.rate_vs_f32 = 1;
  }
  return r;
}

}  // namespace posenc::bench
