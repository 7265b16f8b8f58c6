// posenc_attention_bf16_bench: fused attention's GFLOP/s on bf16 q, k, v through the CPU's
// AVX512-BF16 dot products (posenc/attention_bf16.h) beside the f32 kernel on f32 inputs and
// the f32 kernel on the same bf16 inputs (bf16_dot_products = false: today's path), core only.
// Causal prefill [1, S, H, D] (bshd), ALiBi and RoPE, D = 64 and 128, 1 and 2 threads; the three
// are interleaved round by round (a load change touches them alike) and each rate_vs_f32 is a
// median over the f32 kernel's median of the same run. FLOPs: 4 S^2 H D / 2 (q.k and P.V, half
// the pairs visible), as `posenc bench attention` counts them.
//
//   posenc_attention_bf16_bench [S=4096] [heads=8] [rounds=3] [max_threads=2]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/attention_bf16.h"
#include "posenc/half.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_schedule.h"
#include "posenc_bench/timing.h"

int main(int argc, char** argv) {
  using namespace posenc;
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int S = arg(1, 4096), H = arg(2, 8), rounds = arg(3, 3), max_threads = arg(4, 2);
  if (S < 1 || H < 1 || rounds < 1 || max_threads < 1) {
    std::fprintf(stderr, "posenc_attention_bf16_bench: S, heads, rounds and max_threads must be >= 1\n");
    return 2;
  }
  std::printf("fused attention, causal prefill S %d, %d heads, bshd; attention target %s; AVX512-BF16 path %s; median of %d "
              "interleaved rounds\n",
              S, H, attention_kernel_target(), attention_bf16_available() ? "available" : "NOT available (bf16 rows run the f32 kernel)",
              rounds);
  std::printf("%-6s %4s %7s  %14s  %14s %11s  %14s %11s\n", "scheme", "D", "threads", "f32 GFLOP/s", "bf16-f32 GFLOP/s",
              "rate_vs_f32", "bf16-dot GFLOP/s", "rate_vs_f32");
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<double> slopes = alibi_slopes(H);
  for (int D : {64, 128}) {
    const std::size_t n = static_cast<std::size_t>(S) * H * D;
    std::vector<float> q(n), k(n), v(n), out(n);
    std::vector<std::uint16_t> qb(n), kb(n), vb(n), outb(n);
    for (auto* x : {&q, &k, &v})
      for (float& e : *x) e = normal(rng);
    for (std::size_t i = 0; i < n; ++i) {  // the same values in both dtypes: the f32 inputs are the bf16 ones widened
      qb[i] = float_to_bf16(q[i]), kb[i] = float_to_bf16(k[i]), vb[i] = float_to_bf16(v[i]);
      q[i] = bf16_to_float(qb[i]), k[i] = bf16_to_float(kb[i]), v[i] = bf16_to_float(vb[i]);
    }
    const RopeShape shape{1, S, H, D};
    const RopeTensor f32[4] = {bshd(q.data(), shape), bshd(k.data(), shape), bshd(v.data(), shape), bshd(out.data(), shape)};
    const RopeTensor b16[4] = {bshd(qb.data(), DType::kBF16, shape), bshd(kb.data(), DType::kBF16, shape),
                               bshd(vb.data(), DType::kBF16, shape), bshd(outb.data(), DType::kBF16, shape)};
    RopeParams rp;
    rp.head_dim = D;
    const RopeSchedule schedule = compute_schedule(rp);
    for (const char* scheme : {"alibi", "rope"}) {
      AttentionParams p;
      p.positions = std::string(scheme) == "alibi" ? AttentionPositions::kAlibi : AttentionPositions::kRope;
      p.alibi_slopes = slopes.data();
      p.rope = rope_apply_params(schedule);
      const RopeTable table(p.rope, S);  // a model's long-lived table, as inference passes it
      for (int threads = 1; threads <= max_threads; ++threads) {
        AttentionOptions options;
        options.threads = threads;
        options.table = &table;
        AttentionOptions f32_kernel = options;
        f32_kernel.bf16_dot_products = false;
        if (!attention_runs_bf16(b16[0], b16[1], b16[2], p, options))
          std::fprintf(stderr, "note: %s D %d, %d thread(s) does not take the bf16 path\n", scheme, D, threads);
        std::vector<double> seconds[3];
        for (int r = 0; r <= rounds; ++r) {  // round 0 warms caches
          const double a = bench::seconds_of([&] { attention(f32[0], f32[1], f32[2], f32[3], p, options); });
          const double b = bench::seconds_of([&] { attention(b16[0], b16[1], b16[2], b16[3], p, f32_kernel); });
          const double c = bench::seconds_of([&] { attention(b16[0], b16[1], b16[2], b16[3], p, options); });
          if (r == 0) continue;
          seconds[0].push_back(a);
          seconds[1].push_back(b);
          seconds[2].push_back(c);
        }
        const double flops = 4.0 * S * double(S) * H * D * 0.5;
        const double f32_rate = flops / bench::median(seconds[0]) / 1e9, bf16_f32_rate = flops / bench::median(seconds[1]) / 1e9,
                     dot_rate = flops / bench::median(seconds[2]) / 1e9;
        std::printf("%-6s %4d %7d  %14.1f  %14.1f %11.2f  %14.1f %11.2f\n", scheme, D, threads, f32_rate, bf16_f32_rate,
                    bf16_f32_rate / f32_rate, dot_rate, dot_rate / f32_rate);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
