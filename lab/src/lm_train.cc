#include "lm_train.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "checkpoint.h"
#include "posenc/error.h"
#include "posenc_lab/progress.h"

namespace posenc::lab {
namespace {

using torch_layer::TransformerLM;
namespace fs = std::filesystem;

constexpr double kLn2 = 0.69314718055994530942;

double lr_at(const ExtrapolateConfig& c, long step) {
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / c.warmup;
  const double progress = static_cast<double>(step - c.warmup) / std::max(1, c.steps - c.warmup);
  return c.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(3.14159265358979 * progress)));  // cosine to 10%
}

// The batch of training step `step`: a function of (seed, step) only, so a resumed run sees
// exactly the batches an uninterrupted one would.
torch::Tensor batch_at(const Corpus& corpus, int seed, long step, int batch, int len) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed) * 1000003ull + static_cast<std::uint64_t>(step));
  // validate() made sure train.size() >= len + 2
  std::uniform_int_distribution<std::size_t> offset(0, corpus.train.size() - static_cast<std::size_t>(len) - 2);
  torch::Tensor out = torch::empty({batch, len + 1}, torch::kInt64);
  auto acc = out.accessor<std::int64_t, 2>();
  for (int b = 0; b < batch; ++b) {
    const std::size_t o = offset(rng);
    for (int i = 0; i <= len; ++i) acc[b][i] = corpus.train[o + static_cast<std::size_t>(i)];
  }
  return out;
}

}  // namespace

// Trains (or resumes) one model; returns false when stop_after_steps cut it short. A checkpoint
// with another training key is an error, or (restart_on_other_key) is trained over from scratch.
bool train(TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c, const Corpus& corpus, const nlohmann::json& key,
           long* budget, bool restart_on_other_key, const BatchSource& batches) {
  const std::string ckpt = c.out_dir + "/" + plan.name + ".ckpt";
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(c.lr).weight_decay(0.01));
  long step = 0;
  if (fs::exists(ckpt) && !(restart_on_other_key && read_checkpoint_header(ckpt).train_key != key))
    step = load_checkpoint(ckpt, model, &optimizer, key);
  Progress progress("train " + plan.name, c.steps, step);
  if (step >= c.steps) {
    progress.finish("trained earlier: " + ckpt);
    return true;
  }
  model->train();
  // Transformer-XL with memory trains on pairs of consecutive segments (twice the text per step).
  const bool xl = xl_memory(model);
  if (xl && corpus.train.size() < static_cast<std::size_t>(2 * c.train_len + 2))
    throw Error(plan.name + ": the training text (" + std::to_string(corpus.train.size()) + " tokens) is shorter than " +
                std::to_string(2 * c.train_len + 2) + ", two segments of the training length " + std::to_string(c.train_len) +
                " + 2, which Transformer-XL's memory trains on");
  if (xl && batches) throw Error(plan.name + ": a Transformer-XL model with memory trains on its own pairs of text segments, not on a batch source");
  double loss_value = 0;
  while (step < c.steps) {
    if (*budget == 0) {
      save_checkpoint(ckpt, model, &optimizer, step, key);
      return false;
    }
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_at(c, step));
    optimizer.zero_grad();
    torch::Tensor logits, targets;
    if (xl) {  // the previous segment builds the memory (no gradient), the next one learns with it
      const torch::Tensor batch = batch_at(corpus, plan.seed, step, c.batch, 2 * c.train_len);
      torch_layer::XLMemory memory;
      {
        torch::NoGradGuard no_grad;
        model->forward_segment(batch.narrow(1, 0, c.train_len), memory);
      }
      logits = model->forward_segment(batch.narrow(1, c.train_len, c.train_len), memory);
      targets = batch.narrow(1, c.train_len + 1, c.train_len);
    } else {
      const torch::Tensor batch = batches ? batches(step) : batch_at(corpus, plan.seed, step, c.batch, c.train_len);
      logits = model->forward(batch.narrow(1, 0, c.train_len));
      targets = batch.narrow(1, 1, c.train_len);
    }
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
    loss_value = loss.item<double>();
    if (!std::isfinite(loss_value))
      throw Error(plan.name + ": the training loss is " + format_number(loss_value) + " at step " + std::to_string(step) +
                  " (diverged); nothing was saved past the last checkpoint " + ckpt);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    ++step;
    if (*budget > 0) --*budget;
    progress.update(step, loss_value);
    if (step % c.checkpoint_every == 0 || step == c.steps) save_checkpoint(ckpt, model, &optimizer, step, key);
  }
  char summary[96];
  std::snprintf(summary, sizeof summary, "trained, loss %.3f (%.2f bits per token)", loss_value, loss_value / kLn2);
  progress.finish(summary);
  return true;
}

}  // namespace posenc::lab
