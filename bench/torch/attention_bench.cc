#include "posenc_bench/attention_bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/rope_schedule.h"
#include "posenc_bench/attention_positions.h"
#include "posenc_torch/blas_threads.h"
#include "posenc_bench/timing.h"
#include "posenc_bench/bench_threads.h"
#include "posenc_torch/fused_attention.h"
#include "posenc_torch/rope.h"

namespace posenc::bench {
using namespace posenc::torch_layer;  // kernel_view
namespace {

RopeTensor view_of(const torch::Tensor& t) {  // [1, S, H, D] contiguous
  return kernel_view(t.transpose(1, 2));
}

torch::ScalarType torch_dtype(DType dtype) {
  return dtype == DType::kBF16 ? torch::kBFloat16 : dtype == DType::kF16 ? torch::kHalf : torch::kFloat32;
}

template <typename F>
double median_seconds(int repeats, F&& f) {
  announce_estimate("bench attention", seconds_of(f), repeats);  // the warm-up
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) times.push_back(seconds_of(f));
  return median(times);
}

// The rate of a square float32 matrix product, 2 n^3 FLOPs at n = 2048 (the size at which BLAS
// reaches its peak on one core; 17 GFLOP, a tenth of a second), through libtorch's BLAS on the
// threads set for this run: the ceiling a compute-bound kernel is compared with.
double square_sgemm_gflops(int repeats) {
  constexpr int n = 2048;
  const torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  const double seconds = median_seconds(repeats, [&] { torch::matmul(a, b); });
  return 2.0 * n * double(n) * n / seconds / 1e9;
}

// The materialising path, as model.cc computes it: scores [1, H, S, S], bias + mask, softmax,
// weighted sum; differentiable when grad mode is on. What does not depend on q, k, v (distances,
// the causal block, slopes) is formed once, outside the timing.
struct Materialised {
  Materialised(const AttentionBenchConfig& c, const BenchPositions& positions, int S, int H)
      : c(c), schedule(positions.schedule), t5(positions.t5), S(S), pos(torch::arange(S, torch::kInt64)),
        diff((pos.view({S, 1}) - pos.view({1, S})).to(torch::kFloat32)),
        causal_block(pos.view({1, S}) > pos.view({S, 1})),
        slope_t(torch::tensor(std::vector<float>(positions.slopes.begin(), positions.slopes.end())).view({1, H, 1, 1})) {
    // The learned biases as the lab's materialising path adds them (distance_bias_scores,
    // gate_bias_scores): the table gathered at each (i, j)'s column, FoX's c_i - c_j.
    const torch::Tensor delta = pos.view({S, 1}) - pos.view({1, S});
    if (!positions.table.empty()) {
      table = torch::tensor(positions.table).view({H, -1});
      column = c.scheme == "dpb" ? delta + (S - 1) : delta.abs();
    }
    if (!positions.gate.empty()) gate = torch::tensor(positions.gate).view({1, H, S});
  }

  // q [1, H, S, D], k, v [1, Hk, S, D] -> [1, H, S, D]. table_leaf, gate_leaf: the learned
  // bias's table or FoX's c to differentiate (undefined: the fixed ones).
  torch::Tensor operator()(const torch::Tensor& qh, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& t5_table,
                           const torch::Tensor& table_leaf = {}, const torch::Tensor& gate_leaf = {}) const {
    const std::int64_t H = qh.size(1), D = qh.size(3);
    const torch::Tensor kh = k.repeat_interleave(H / k.size(1), 1), vh = v.repeat_interleave(H / v.size(1), 1);
    const torch::Tensor& table_in = table_leaf.defined() ? table_leaf : table;
    const torch::Tensor& gate_in = gate_leaf.defined() ? gate_leaf : gate;
    torch::Tensor qq = qh, kk = kh;
    if (c.scheme == "rope") {  // the libtorch formula: x cos + rotate_half(x) sin
      const torch::Tensor inv = torch::tensor(schedule.inv_freq);
      const torch::Tensor ang = pos.to(torch::kFloat32).view({S, 1}) * inv.view({1, -1});
      const torch::Tensor cs = torch::cat({ang.cos(), ang.cos()}, -1), sn = torch::cat({ang.sin(), ang.sin()}, -1);
      const auto rot = [&](const torch::Tensor& x) {
        return x * cs + torch::cat({-x.narrow(-1, D / 2, D / 2), x.narrow(-1, 0, D / 2)}, -1) * sn;
      };
      qq = rot(qh);
      kk = rot(kh);
    }
    torch::Tensor scores = torch::matmul(qq, kk.transpose(-1, -2)) / std::sqrt(static_cast<double>(D));
    if (c.scheme == "alibi") scores = scores - slope_t * (c.causal ? diff : diff.abs());
    if (c.scheme == "t5") {
      std::vector<std::int64_t> buckets(static_cast<std::size_t>(2 * S - 1));
      for (int d = -(S - 1); d <= S - 1; ++d) buckets[static_cast<std::size_t>(d + S - 1)] = t5_bucket(d, t5);
      const torch::Tensor rel = pos.view({1, S}) - pos.view({S, 1}) + (S - 1);
      scores = scores + t5_table.index({torch::tensor(buckets).index({rel})}).permute({2, 0, 1}).unsqueeze(0);
    }
    if (table_in.defined()) scores = scores + table_in.index({torch::indexing::Slice(), column}).unsqueeze(0);
    if (gate_in.defined()) scores = scores + (gate_in.unsqueeze(-1) - gate_in.unsqueeze(-2));
    if (c.causal) scores = scores.masked_fill(causal_block, -1e30f);
    return torch::matmul(torch::softmax(scores, -1), vh);
  }

  const AttentionBenchConfig& c;
  const RopeSchedule& schedule;
  T5BucketParams t5;
  int S;
  torch::Tensor pos, diff, causal_block, slope_t;
  torch::Tensor table, column, gate;  // kerple, sandwich, dpb: [H, width] and [S, S]; fox: c [1, H, S]
};

// Forward + backward, posenc's autograd op against libtorch autograd through the same
// materialising path, on the same inputs and output gradient, both taking every gradient
// (q, k, v; T5's table, a learned bias's table, FoX's c). For a learned bias, ALiBi's forward +
// backward on the same tensors too (rate_vs_alibi).
AttentionBackwardResult time_backward(const AttentionBenchConfig& c, const BenchPositions& positions, const Materialised& torch_path,
                                      const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  torch::AutoGradMode grad_mode(true);
  const std::int64_t S = q.size(1), H = q.size(2), D = q.size(3);
  // Leaves as model.cc's q, k, v: [1, heads, S, D] views of [1, S, heads, D] memory.
  const auto leaf = [](const torch::Tensor& x) { return x.permute({0, 2, 1, 3}).detach().requires_grad_(true); };
  const auto leaf_of = [](const std::vector<float>& values, torch::IntArrayRef shape) {
    return values.empty() ? torch::Tensor() : torch::tensor(values).view(shape).requires_grad_(true);
  };
  FusedAttentionTensors t{leaf(q), leaf(k), leaf(v),
                          leaf_of(positions.t5_table, {positions.t5.num_buckets, H}).requires_grad_(c.scheme == "t5"),
                          leaf_of(positions.table, {H, -1}), leaf_of(positions.gate, {1, H, S})};
  std::vector<torch::Tensor> inputs = {t.q, t.k, t.v};
  for (const torch::Tensor& x : {t.t5_table, t.distance_table, t.gate_cumulative})
    if (x.defined() && x.requires_grad()) inputs.push_back(x);
  const auto spec_of = [&](const AttentionParams& p) {
    AttentionSpec::Data data;
    data.q_positions = data.k_positions = torch::arange(S, torch::kInt64).view({1, S});
    data.rope = RopeSpec(positions.schedule);
    data.alibi_slopes = positions.slopes;
    return std::make_shared<const AttentionSpec>(p, std::move(data));
  };
  const auto spec = spec_of(positions.params);
  const torch::Tensor dout = torch::randn({1, S, H, D});  // posenc's out is [1, S, H, D]
  AttentionBackwardResult r;
  std::vector<torch::Tensor> posenc_grads, torch_grads;
  r.posenc_seconds = median_seconds(c.repeats, [&] { posenc_grads = torch::autograd::grad({fused_attention(t, spec)}, inputs, {dout}); });
  if (is_learned_bias_scheme(c.scheme)) {  // ALiBi's forward + backward on the same q, k, v, same run
    const BenchPositions alibi("alibi", c.causal, static_cast<int>(H), static_cast<int>(D), S);
    const auto alibi_spec = spec_of(alibi.params);
    const FusedAttentionTensors ta{t.q, t.k, t.v, {}, {}, {}};
    r.alibi_seconds = median_seconds(c.repeats, [&] { torch::autograd::grad({fused_attention(ta, alibi_spec)}, {t.q, t.k, t.v}, {dout}); });
    r.rate_vs_alibi = r.alibi_seconds / r.posenc_seconds;
  }
  // libtorch autograd keeps about six [H, S, S] float tensors (scores, biased and masked
  // scores, weights and their gradients).
  const double torch_bytes = 6.0 * H * double(S) * S * 4;
  if (torch_bytes > 8.0 * (1 << 30)) {
    r.torch_skipped = "libtorch autograd needs about " + std::to_string(static_cast<long>(torch_bytes / (1 << 30))) +
                      " GiB for the scores and their gradients (over 8 GiB): not run";
    return r;
  }
  const torch::Tensor dout_h = dout.transpose(1, 2);  // the materialising path gives [1, H, S, D]
  r.torch_seconds = median_seconds(c.repeats, [&] {
    torch_grads = torch::autograd::grad({torch_path(t.q, t.k, t.v, t.t5_table, t.distance_table, t.gate_cumulative)}, inputs, {dout_h});
  });
  r.speedup = r.torch_seconds / r.posenc_seconds;
  for (std::size_t x = 0; x < inputs.size(); ++x)
    r.max_rel_error = std::max(r.max_rel_error, ((posenc_grads[x] - torch_grads[x]).abs().max() / torch_grads[x].abs().max()).item<double>());
  return r;
}

}  // namespace

AttentionBenchResult run_attention_bench(const AttentionBenchConfig& c) {
  const int S = c.seq, H = c.heads, Hk = c.kv_heads > 0 ? c.kv_heads : c.heads, D = c.head_dim;
  if (c.kv_heads < 0) throw Error("bench attention: --kv-heads must be >= 0 (0: as many as --heads), got " + std::to_string(c.kv_heads));
  if (S < 8 || S > 65536) throw Error("bench attention: --seq must be in [8, 65536], got " + std::to_string(S));
  if (H < 1 || H > 256 || Hk < 1 || H % Hk != 0)
    throw Error("bench attention: --heads (1..256) must be a multiple of --kv-heads, got " + std::to_string(H) + " and " +
                std::to_string(Hk));
  if (D < 2 || D > 512 || D % 2) throw Error("bench attention: --head-dim must be even, in [2, 512], got " + std::to_string(D));
  if (c.repeats < 1 || c.repeats > 100) throw Error("bench attention: repeats must be in [1, 100]");
  check_bench_threads(c.threads, "bench attention", "torch's default");
  // Bounded like bench rope: each timed run of each path is about one forward's FLOPs (x3.5
  // with --backward); 2^43 of them is minutes on a core.
  const double run_flops = 4.0 * H * double(S) * S * D * (c.causal ? 0.5 : 1.0) * (c.backward ? 4.5 : 1.0);
  constexpr double kMaxFlops = 8796093022208.0;  // 2^43
  if (run_flops * (c.repeats + 1) > kMaxFlops) {
    // The advice: fewer repeats when one fits, else the longest --seq (a multiple of 8) whose
    // --repeats runs and warm-up fit (run_flops grows as S^2), and that --seq at one repeat.
    const long repeats = static_cast<long>(kMaxFlops / run_flops) - 1;
    const auto longest = [&](int runs) { return static_cast<long>(S * std::sqrt(kMaxFlops / (runs * run_flops))) / 8 * 8; };
    const std::string advice = repeats >= 1 ? "use at most " + std::to_string(repeats) + " repeats, or a shorter --seq"
                                            : "--seq " + std::to_string(longest(c.repeats + 1)) + " at most with these --repeats, --heads and "
                                              "--head-dim (--seq " + std::to_string(longest(2)) + " with --repeats 1)";
    throw Error("bench attention: --repeats " + std::to_string(c.repeats) + " (+1 warm-up) x " + std::to_string(static_cast<long>(run_flops / 1e9)) +
                " GFLOP per run at --seq " + std::to_string(S) + " is more than the limit of " +
                std::to_string(static_cast<long>(kMaxFlops / 1e9)) + " GFLOP (minutes on a core): " + advice);
  }
  if (run_flops * (c.repeats + 1) > 1e12)  // minutes: said before the first run, whose time then gives the estimate
    std::fprintf(stderr, "bench attention: %ld runs of %.0f GFLOP on each path at --seq %d: minutes; each path's time left "
                 "follows its first run\n", static_cast<long>(c.repeats) + 1, run_flops / 1e9, S);
  // The libtorch path holds [H, S, T] floats three times (scores, bias, weights).
  const double torch_bytes = 3.0 * H * double(S) * S * 4;
  const bool run_torch = torch_bytes <= 8.0 * (1 << 30);
  AttentionBenchResult r;
  r.threads = c.threads > 0 ? c.threads : torch::get_num_threads();
  r.blas_threads = set_torch_and_blas_threads(r.threads);  // the BLAS ceilings on the same threads as posenc
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const torch::Tensor q = torch::randn({1, S, H, D}), k = torch::randn({1, S, Hk, D}), v = torch::randn({1, S, Hk, D});
  torch::Tensor out = torch::empty({1, S, H, D});

  const BenchPositions positions(c.scheme, c.causal, H, D, S);
  const AttentionParams& p = positions.params;
  const T5BucketParams& t5 = positions.t5;
  const torch::Tensor t5_table = torch::from_blob(const_cast<float*>(positions.t5_table.data()), {t5.num_buckets, H});
  AttentionOptions options;
  options.threads = r.threads;
  // q, k, v (and out) in the benchmark's dtype: posenc's public attention on those tensors, so a
  // bf16 kernel in the core is what this times.
  const auto stored = [&](const torch::Tensor& x) { return c.dtype == DType::kF32 ? x : x.to(torch_dtype(c.dtype)); };
  const torch::Tensor qs = stored(q), ks = stored(k), vs = stored(v);
  torch::Tensor outs = stored(out);
  r.posenc_seconds = median_seconds(c.repeats, [&] { attention(view_of(qs), view_of(ks), view_of(vs), view_of(outs), p, options); });
  if (c.dtype != DType::kF32) {  // the f32 kernel on the same shape, same run
    r.f32_seconds = median_seconds(c.repeats, [&] { attention(view_of(q), view_of(k), view_of(v), view_of(out), p, options); });
    r.rate_vs_f32 = r.f32_seconds / r.posenc_seconds;
  }
  if (is_learned_bias_scheme(c.scheme)) {  // ALiBi's kernel on the same tensors, same run: the bias-free baseline
    const BenchPositions alibi("alibi", c.causal, H, D, S);
    r.alibi_seconds = median_seconds(c.repeats, [&] { attention(view_of(qs), view_of(ks), view_of(vs), view_of(outs), alibi.params, options); });
    r.rate_vs_alibi = r.alibi_seconds / r.posenc_seconds;
  }
  r.extra_bytes = attention_extra_bytes(view_of(qs), view_of(ks), p, options);
  r.target = attention_kernel_target();

  // The materialising path, as model.cc computes it.
  const Materialised torch_path(c, positions, S, H);
  const torch::Tensor qh = q.permute({0, 2, 1, 3}), kh = k.permute({0, 2, 1, 3}), vh = v.permute({0, 2, 1, 3});
  const auto materialise = [&] { torch_path(qh, kh, vh, t5_table); };
  r.torch_extra_bytes = static_cast<std::int64_t>(torch_bytes);
  if (run_torch) {
    r.torch_seconds = median_seconds(c.repeats, materialise);
    r.speedup = r.torch_seconds / r.posenc_seconds;
  } else {
    r.torch_skipped = "the libtorch path needs " + std::to_string(static_cast<long>(torch_bytes / (1 << 30))) +
                      " GiB of scores, bias and weights (over 8 GiB): not run";
  }

  // Equal FLOPs through BLAS: q k^T and p v as full products (what a causal kernel skips
  // counts in neither: the needed FLOPs are halved for both below).
  // At most 4096 x 4096 per head (the rate of a product does not grow past that), scaled.
  const int G = std::min(S, 4096);
  const torch::Tensor pm = torch::randn({1, H, G, G});
  const torch::Tensor qg = qh.narrow(2, 0, G), kg = kh.repeat_interleave(H / Hk, 1).narrow(2, 0, G),
                      vg = vh.repeat_interleave(H / Hk, 1).narrow(2, 0, G);
  const double gemm_seconds = median_seconds(c.repeats, [&] {
    torch::matmul(qg, kg.transpose(-1, -2));
    torch::matmul(pm, vg);
  });
  r.gemm_gflops = 4.0 * H * double(G) * G * D / gemm_seconds / 1e9;
  const double full_flops = 4.0 * H * double(S) * S * D;
  r.posenc_gflops = full_flops * (c.causal ? 0.5 : 1.0) / r.posenc_seconds / 1e9;
  r.fraction_of_gemm = r.posenc_gflops / r.gemm_gflops;
  r.square_gemm_gflops = square_sgemm_gflops(c.repeats);
  r.fraction_of_square_gemm = r.posenc_gflops / r.square_gemm_gflops;

  // Accuracy: the last 8 queries against the reference.
  const int tail = 8;
  const torch::Tensor q_tail = qs.narrow(1, S - tail, tail).contiguous();
  torch::Tensor ref = torch::empty({1, tail, H, D});
  AttentionParams pt = p;
  pt.q_positions.offset = S - tail;
  attention_reference(view_of(q_tail), view_of(ks), view_of(vs), view_of(ref), pt);
  attention(view_of(qs), view_of(ks), view_of(vs), view_of(outs), p, options);
  const torch::Tensor got = outs.narrow(1, S - tail, tail).to(torch::kFloat32);
  r.max_rel_error = ((got - ref).abs().max() / ref.abs().max()).item<double>();
  if (c.backward) {
    r.backward = time_backward(c, positions, torch_path, q, k, v);
    const double forward = c.dtype == DType::kF32 ? r.posenc_seconds : r.f32_seconds;  // the backward's forward is f32
    if (r.backward.posenc_seconds > forward) {
      r.backward.backward_gflops = 2.5 * full_flops * (c.causal ? 0.5 : 1.0) / (r.backward.posenc_seconds - forward) / 1e9;
      r.backward.fraction_of_square_gemm = r.backward.backward_gflops / r.square_gemm_gflops;
    }
  }
  return r;
}

}  // namespace posenc::bench
