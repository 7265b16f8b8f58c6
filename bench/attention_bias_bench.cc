// posenc_attention_bias_bench: the fused attention kernel's time with a per-head distance table
// (Kerple's log variant) and with FoX's cumulative forget gate beside ALiBi, forward and backward,
// core only (no libtorch). One causal prefill, [1, S, H, D] f32 q, k, v; the variants are
// interleaved round by round (so a load change touches them alike) and each ratio is the
// variant's median over ALiBi's median of the same run. The backward computes the table's or c's
// gradient as a trainer would.
//
//   posenc_attention_bias_bench [S=4096] [heads=8] [head_dim=64] [rounds=5] [threads=1]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/kerple.h"
#include "posenc_bench/timing.h"

int main(int argc, char** argv) {
  using namespace posenc;
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int S = arg(1, 4096), H = arg(2, 8), D = arg(3, 64), rounds = arg(4, 5), threads = arg(5, 1);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = static_cast<std::size_t>(S) * H * D;
  std::vector<float> q(n), k(n), v(n), dout(n), dq(n), dk(n), dv(n);
  for (auto* x : {&q, &k, &v, &dout})
    for (float& e : *x) e = normal(rng);
  const RopeTensor qv = bshd(q.data(), {1, S, H, D}), kv = bshd(k.data(), {1, S, H, D}), vv = bshd(v.data(), {1, S, H, D});

  const std::vector<double> slopes = alibi_slopes(H);
  AttentionParams alibi;
  alibi.positions = AttentionPositions::kAlibi;
  alibi.alibi_slopes = slopes.data();
  // Kerple log, r1 = 1, r2 = ALiBi's slope: a table of length S per head, as a trainer evaluates it.
  const std::vector<float> kerple = kerple_table(KerpleParams{KerpleKind::kLog, std::vector<double>(H, 1.0), slopes}, S);
  AttentionParams table;
  table.positions = AttentionPositions::kDistanceTable;
  table.distance_table = {kerple.data(), S, DistanceSide::kAbsolute};
  // FoX: c of gates around 0.97.
  std::vector<float> c(static_cast<std::size_t>(H) * S);
  for (int h = 0; h < H; ++h) {
    double sum = 0;
    for (int t = 0; t < S; ++t) c[static_cast<std::size_t>(h) * S + t] = static_cast<float>(sum += std::log(0.97 + 0.02 * std::tanh(normal(rng))));
  }
  AttentionParams gate;
  gate.positions = AttentionPositions::kForgetGate;
  gate.gate_cumulative = c.data();

  struct Variant {
    const char* name;
    const AttentionParams* params;
    std::vector<float> out, lse, grad;  // the forward's output and lse, the table's or c's gradient
  };
  std::vector<Variant> variants;
  variants.push_back({"alibi", &alibi, std::vector<float>(n), std::vector<float>(static_cast<std::size_t>(H) * S), {}});
  variants.push_back({"distance table (kerple)", &table, std::vector<float>(n), std::vector<float>(static_cast<std::size_t>(H) * S),
                      std::vector<float>(kerple.size())});
  variants.push_back({"forget gate (fox)", &gate, std::vector<float>(n), std::vector<float>(static_cast<std::size_t>(H) * S),
                      std::vector<float>(c.size())});
  std::vector<std::vector<double>> forward(variants.size()), backward(variants.size());
  for (int r = 0; r <= rounds; ++r)
    for (std::size_t i = 0; i < variants.size(); ++i) {
      Variant& x = variants[i];
      const RopeTensor ov = bshd(x.out.data(), {1, S, H, D});
      AttentionOptions options;
      options.threads = threads;
      options.lse = x.lse.data();
      const double f = bench::seconds_of([&] { attention(qv, kv, vv, ov, *x.params, options); });
      AttentionGradients grads{bshd(dq.data(), {1, S, H, D}), bshd(dk.data(), {1, S, H, D}), bshd(dv.data(), {1, S, H, D})};
      if (x.params == &table) grads.distance_table_grad = x.grad.data();
      if (x.params == &gate) grads.gate_cumulative_grad = x.grad.data();
      const AttentionBackwardInputs in{qv, kv, vv, ov, bshd(dout.data(), {1, S, H, D}), x.lse.data()};
      KernelOptions kernel;
      kernel.threads = threads;
      const double b = bench::seconds_of([&] { attention_backward(in, grads, *x.params, kernel); });
      if (r > 0) {  // round 0 warms caches
        forward[i].push_back(f);
        backward[i].push_back(b);
      }
    }
  std::printf("fused attention, causal prefill S %d, %d heads, D %d, f32, %d thread(s), attention target %s, median of %d interleaved rounds\n",
              S, H, D, threads, attention_kernel_target(), rounds);
  const double base_f = bench::median(forward[0]), base_b = bench::median(backward[0]);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const double f = bench::median(forward[i]), b = bench::median(backward[i]);
    std::printf("  %-24s forward %8.1f ms  %.3fx alibi   backward %8.1f ms  %.3fx alibi\n", variants[i].name, 1e3 * f, f / base_f, 1e3 * b, b / base_b);
  }
  return 0;
}
