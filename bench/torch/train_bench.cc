#include "posenc_bench/train_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "distributed_world.h"
#include "posenc/error.h"
#include "posenc_bench/bench_threads.h"
#include "posenc_bench/timing.h"
#include "posenc_lab/run_settings.h"
#include "train_loop.h"
#include "posenc_torch/blas_threads.h"
#include "posenc_torch/model.h"
#include "posenc_torch/rope.h"

namespace posenc::bench {
using namespace posenc::torch_layer;  // TransformerLM, ModelConfig, the RoPE autograd ops
namespace {

torch::Tensor rotate_half(const torch::Tensor& x) {
  const std::int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// token_major: q as the model makes it, a [B, H, S, D] view of [B, S, H, D] memory.
RopeAutogradSpeed rope_speed(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, int repeats, bool token_major) {
  RopeParams params;
  params.head_dim = static_cast<int>(d);
  const RopeSpec spec(compute_schedule(params));
  const torch::Tensor positions = torch::arange(s, torch::kInt64).repeat({b, 1});
  // HF's eager path with cos/sin given (as its rotary module hands them to attention).
  const torch::Tensor inv = torch::tensor(spec.inv_freq());
  const torch::Tensor freqs = positions.to(torch::kFloat32).unsqueeze(-1) * inv;
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);
  const torch::Tensor cos = emb.cos(), sin = emb.sin();
  const torch::Tensor leaf = (token_major ? torch::randn({b, s, h, d}) : torch::randn({b, h, s, d})).requires_grad_(true);
  const torch::Tensor g = torch::randn({b, h, s, d});
  std::vector<double> fused, eager;
  for (int i = -1; i < repeats; ++i) {
    const double tf = seconds_of([&] {
      const torch::Tensor x = token_major ? leaf.transpose(1, 2) : leaf;
      rope(x, positions, spec).backward(g);
    });
    const double te = seconds_of([&] {
      const torch::Tensor x = token_major ? leaf.transpose(1, 2) : leaf;
      (x * cos + rotate_half(x) * sin).backward(g);
    });
    if (i >= 0) {
      fused.push_back(tf);
      eager.push_back(te);
    }
  }
  RopeAutogradSpeed r;
  r.shape = "[" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(s) + ", " + std::to_string(d) + "]" +
            (token_major ? " view" : "");
  r.fused_seconds = median(fused);
  r.eager_seconds = median(eager);
  r.speedup = r.eager_seconds / r.fused_seconds;
  return r;
}

// GFLOP with three significant digits ("0.00151", "1.31e+09").
std::string gflop_text(double flops) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", flops / 1e9);
  return text;
}

void check_at_least(const char* flag, long value, long least) {
  if (value < least) throw Error(std::string("bench train: ") + flag + " must be >= " + std::to_string(least) + ", got " + std::to_string(value));
}

void check_config(const TrainBenchConfig& c) {
  check_at_least("--steps", c.steps, 1);
  check_at_least("--tokens", c.seq, 2);
  check_at_least("--batch", c.batch, 1);
  for (std::size_t i = 0; i < c.schemes.size(); ++i)
    if (std::find(c.schemes.begin(), c.schemes.begin() + static_cast<std::ptrdiff_t>(i), c.schemes[i]) != c.schemes.begin() + static_cast<std::ptrdiff_t>(i))
      throw Error("bench train: --schemes: '" + c.schemes[i] + "' is given twice");
  check_bench_threads(c.threads, "bench train", "torch's default");
  // Bounded like bench rope: a training step is about 6 x weights x tokens plus the attention
  // products, each scheme timed on two paths for steps + 1 steps; 2^44 FLOPs is minutes.
  const double tokens = double(c.batch) * c.seq, d = c.d_model;
  const double step_flops = c.layers * (6.0 * 12.0 * d * d * tokens + 12.0 * tokens * c.seq * d);
  constexpr double kMaxFlops = 17592186044416.0;  // 2^44
  const double per_step = 2.0 * step_flops * double(std::max<std::size_t>(1, c.schemes.size()));
  if (per_step * (c.steps + 1.0) > kMaxFlops)
    throw Error("bench train: --steps " + std::to_string(c.steps) + " x " + gflop_text(step_flops) +
                " GFLOP per step (--layers " + std::to_string(c.layers) + ", --d-model " + std::to_string(c.d_model) + ", " +
                std::to_string(c.batch) + " x " + std::to_string(c.seq) + " tokens) on two paths for " +
                std::to_string(c.schemes.size()) + " schemes is more than the limit of " +
                std::to_string(static_cast<long>(kMaxFlops / 1e9)) + " GFLOP (minutes on a core): " +
                (per_step * 2 <= kMaxFlops ? "--steps " + std::to_string(static_cast<long>(kMaxFlops / per_step) - 1) +
                                                 " at most for this shape"
                                           : std::string("a smaller model, fewer --tokens or a smaller --batch")));
  // The libtorch path holds several [B, H, S, S] float32 tensors per layer for the backward pass.
  const double score_bytes = 4.0 * c.batch * c.heads * static_cast<double>(c.seq) * c.seq;
  if (score_bytes > double(1 << 30))
    throw Error("bench train: " + std::to_string(c.batch) + " rows of " + std::to_string(c.seq) + " tokens need " +
                std::to_string(static_cast<long>(score_bytes / (1 << 20))) +
                " MiB per [B, H, S, S] score tensor on the libtorch path it is compared with (limit 1024 MiB); use fewer rows or tokens");
  // Training itself, as the lab estimates it (weights, AdamW, activations), within what this process may use.
  const double need = lab::training_bytes({c.layers, c.d_model, c.heads}, c.batch, c.seq);
  const lab::MemoryBudget memory = lab::usable_memory();
  if (memory.bytes > 0 && need > 0.8 * memory.bytes)
    throw Error("bench train: --batch " + std::to_string(c.batch) + " x --tokens " + std::to_string(c.seq) + " (--layers " +
                std::to_string(c.layers) + ", --d-model " + std::to_string(c.d_model) + ") needs about " +
                format_number(need / 1e9) + " GB to train, more than the " + format_number(0.8 * memory.bytes / 1e9) +
                " GB it can have (80% of " + memory.what + "): use fewer rows or tokens");
}

// The benchmark's model of scheme `name`, its weights from seed 0.
TransformerLM bench_model(const TrainBenchConfig& c, const std::string& name) {
  ModelConfig mc;
  mc.vocab_size = 64;
  mc.d_model = c.d_model;
  mc.n_layers = c.layers;
  mc.n_heads = c.heads;
  mc.scheme = language_model_scheme(name, "bench train");
  mc.learned_positions = c.seq;
  torch::manual_seed(0);
  return TransformerLM(mc);
}

// Seconds of `steps` steps of the lab's training loop on one batch of random tokens (after one
// warm-up step); world null: this process alone, else *allreduce gets the seconds of those steps
// spent in the gradient all-reduce.
double loop_seconds(const TrainBenchConfig& c, const std::string& name, lab::World* world, double* allreduce) {
  TransformerLM model = bench_model(c, name);
  torch::manual_seed(1);
  const torch::Tensor tokens = torch::randint(0, 64, {c.batch, c.seq + 1}, torch::kInt64);
  lab::TrainLoop loop;
  loop.label = name;
  loop.key = {{"bench", "train"}, {"scheme", name}};
  loop.checkpoint_every = c.steps + 1;
  loop.batch = [&](long) { return tokens; };
  loop.loss = [&, m = model](const torch::Tensor& rows) mutable {
    const torch::Tensor logits = m->forward(rows.narrow(1, 0, c.seq));
    return torch::nn::functional::cross_entropy(logits.reshape({-1, 64}), rows.narrow(1, 1, c.seq).reshape({-1}));
  };
  loop.tokens_per_row = c.seq;
  loop.world = world;
  long budget = -1;
  loop.steps = 1;
  lab::run_train_loop(*model, loop, &budget);
  loop.steps = c.steps;
  const double before = world ? world->sum_seconds() : 0;
  const double seconds = seconds_of([&] { lab::run_train_loop(*model, loop, &budget); });
  if (world) *allreduce = world->sum_seconds() - before;
  return seconds;
}

}  // namespace

DataParallelResult run_data_parallel_bench(const TrainBenchConfig& c, const lab::LaunchConfig& launch) {
  check_config(c);
  DataParallelResult result;
  result.world_size = lab::world_size_of(launch);
  result.threads_per_rank = c.threads > 0 ? c.threads : 1;
  result.single_threads = result.world_size * result.threads_per_rank;
  if (c.batch < result.world_size)
    throw Error("a batch of " + std::to_string(c.batch) + " rows cannot be split across " + std::to_string(result.world_size) + " ranks");
  std::vector<DataParallelSpeed> speeds;
  {
    const nlohmann::json plan = {{"command", "bench train"}, {"models", c.schemes}, {"world_size", result.world_size}};
    lab::World world(launch, plan.dump());
    torch_layer::set_torch_and_blas_threads(result.threads_per_rank);
    for (const std::string& name : c.schemes) {
      DataParallelSpeed s;
      s.scheme = name;
      double allreduce = 0;
      s.step_seconds = loop_seconds(c, name, &world, &allreduce) / c.steps;
      s.allreduce_seconds_per_step = allreduce / c.steps;
      speeds.push_back(s);
    }
    if (world.rank() != 0) return result;
  }
  torch_layer::set_torch_and_blas_threads(result.single_threads);
  for (DataParallelSpeed& s : speeds) {
    s.single_step_seconds = loop_seconds(c, s.scheme, nullptr, nullptr) / c.steps;
    const double tokens = static_cast<double>(c.batch) * c.seq;
    s.tokens_per_second = tokens / s.step_seconds;
    s.single_tokens_per_second = tokens / s.single_step_seconds;
    s.ratio = s.tokens_per_second / s.single_tokens_per_second;
  }
  result.schemes = speeds;
  return result;
}

TrainBenchResult run_train_bench(const TrainBenchConfig& c) {
  check_config(c);
  if (c.threads > 0) torch_layer::set_torch_and_blas_threads(c.threads);
  TrainBenchResult result;
  result.threads = torch::get_num_threads();
  for (const std::string& name : c.schemes) {
    TransformerLM model = bench_model(c, name);
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
    const torch::Tensor tokens = torch::randint(0, 64, {c.batch, c.seq + 1}, torch::kInt64);
    const torch::Tensor input = tokens.narrow(1, 0, c.seq), target = tokens.narrow(1, 1, c.seq);
    // FIRE takes the kernel only while its queries are below L (512 at initialisation).
    const bool fused = fused_attention_covers(model->config()) && (model->config().scheme != Scheme::kFire || c.seq <= 512);
    const auto step = [&](bool fused_training) {
      model->fused_training = fused_training;
      return seconds_of([&] {
        optimizer.zero_grad();
        const torch::Tensor logits = model->forward(input);
        torch::nn::functional::cross_entropy(logits.reshape({-1, 64}), target.reshape({-1})).backward();
        optimizer.step();
      });
    };
    std::vector<double> times, fused_times;
    for (int i = -1; i < c.steps; ++i) {  // i = -1: warm-up
      const double t = step(false), tf = fused ? step(true) : 0;
      if (i < 0) announce_estimate(("bench train " + name).c_str(), t + tf, c.steps);
      if (i >= 0) {
        times.push_back(t);
        fused_times.push_back(tf);
      }
    }
    SchemeSpeed s{name, median(times), 0};
    s.tokens_per_second = static_cast<double>(c.batch) * c.seq / s.step_seconds;
    if (fused) {
      s.fused_step_seconds = median(fused_times);
      s.fused_speedup = s.step_seconds / s.fused_step_seconds;
    }
    result.schemes.push_back(s);
  }
  // The model's own shape (one layer's q) and an inference-engine shape.
  // The model's shape as its attention lays it out (a view of [B, S, H, D] memory), the same
  // shape contiguous, and an inference-engine shape.
  result.rope.push_back(rope_speed(c.batch, c.heads, c.seq, c.d_model / c.heads, std::max(c.steps, 7), true));
  result.rope.push_back(rope_speed(c.batch, c.heads, c.seq, c.d_model / c.heads, std::max(c.steps, 7), false));
  result.rope.push_back(rope_speed(1, 32, 2048, 128, std::max(c.steps, 7), false));
  return result;
}

}  // namespace posenc::bench
