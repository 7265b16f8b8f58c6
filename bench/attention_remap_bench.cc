// posenc_attention_remap_bench: the fused attention kernel's time with each position remap beside
// plain RoPE, core only (no libtorch). One causal prefill, [1, S, H, D] f32 q, k, v, one thread
// by default; the variants are interleaved round by round (so a load change touches them alike)
// and each ratio is the variant's median over plain RoPE's median of the same run. backward 1:
// the backward pass's time instead (dq, dk, dv from the variant's own forward, run untimed).
//
//   posenc_attention_remap_bench [S=4096] [heads=8] [head_dim=64] [rounds=7] [threads=1] [backward=0]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/attention_backward.h"
#include "posenc/rope_kernels.h"
#include "posenc/rope_schedule.h"
#include "posenc_bench/timing.h"

int main(int argc, char** argv) {
  using namespace posenc;
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int S = arg(1, 4096), H = arg(2, 8), D = arg(3, 64), rounds = arg(4, 7), threads = arg(5, 1);
  const bool backward = arg(6, 0) != 0;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(static_cast<std::size_t>(S) * H * D), k(q.size()), v(q.size()), out(q.size()), dout(q.size()), dq(q.size()),
      dk(q.size()), dv(q.size()), lse(static_cast<std::size_t>(S) * H);
  for (auto* x : {&q, &k, &v, &dout})
    for (float& e : *x) e = normal(rng);
  RopeParams rp;
  rp.head_dim = D;
  const RopeSchedule schedule = compute_schedule(rp);
  AttentionParams plain;
  plain.positions = AttentionPositions::kRope;
  plain.rope = rope_apply_params(schedule);
  const RopeTable table(plain.rope, S);  // a model's long-lived table, as inference passes it
  AttentionOptions options;
  options.threads = threads;
  options.table = &table;
  struct Variant {
    std::string name;
    PositionRemap remap;
  };
  // Windows as the papers use them at a 4k context: Self-Extend w 1024, G 8 (Jin et al.'s Llama-2
  // settings are w 512-1024, G 4-16); ReRoPE w 512, leaky k 16 (Su's). DCA: Qwen2.5-1M's
  // chunk_size 262144 / local_size 8192 is plain RoPE below 253952 tokens, so its shape at 4k:
  // chunk lengths c = chunk_size - local_size of 1024 (four chunks at S = 4096: most key tiles
  // inter-chunk) and 2048 (two: intra-chunk and successive), local_size c / 4.
  std::vector<Variant> variants = {{"rope", {}},
                                   {"self-extend w1024 G8", {PositionRemapKind::kSelfExtend, 1024, 8, 0}},
                                   {"rerope w512", {PositionRemapKind::kReRope, 512, 1, 0}},
                                   {"leaky-rerope w512 k16", {PositionRemapKind::kLeakyReRope, 512, 1, 16}},
                                   {"dual-chunk 1280/256", {PositionRemapKind::kDualChunk, 0, 1, 0, 1280, 256}},
                                   {"dual-chunk 2560/512", {PositionRemapKind::kDualChunk, 0, 1, 0, 2560, 512}}};
  const RopeTensor qv = bshd(q.data(), {1, S, H, D}), kv = bshd(k.data(), {1, S, H, D}), vv = bshd(v.data(), {1, S, H, D}),
                   ov = bshd(out.data(), {1, S, H, D});
  const AttentionBackwardInputs inputs{qv, kv, vv, ov, bshd(dout.data(), {1, S, H, D}), lse.data()};
  const AttentionGradients grads{bshd(dq.data(), {1, S, H, D}), bshd(dk.data(), {1, S, H, D}), bshd(dv.data(), {1, S, H, D})};
  AttentionOptions with_lse = options;
  with_lse.lse = lse.data();
  std::vector<std::vector<double>> seconds(variants.size());
  for (int r = 0; r <= rounds; ++r)
    for (std::size_t i = 0; i < variants.size(); ++i) {
      AttentionParams p = plain;
      p.remap = variants[i].remap;
      if (backward) attention(qv, kv, vv, ov, p, with_lse);  // the out and lse its backward reads
      const double s = backward ? bench::seconds_of([&] { attention_backward(inputs, grads, p, options); })
                                : bench::seconds_of([&] { attention(qv, kv, vv, ov, p, options); });
      if (r > 0) seconds[i].push_back(s);  // round 0 warms caches and the table
    }
  std::printf("fused attention %s, causal prefill S %d, %d heads, D %d, f32, %d thread(s), attention target %s (RoPE kernels %s), median of %d interleaved rounds\n",
              backward ? "backward" : "forward", S, H, D, threads, attention_kernel_target(), rope_kernel_target(), rounds);
  const double base = bench::median(seconds[0]);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const double m = bench::median(seconds[i]);
    std::printf("  %-24s %8.1f ms   %.3fx plain RoPE\n", variants[i].name.c_str(), 1e3 * m, m / base);
  }
  return 0;
}
