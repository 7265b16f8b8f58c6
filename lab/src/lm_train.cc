#include "lm_train.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "lm_eval.h"
#include "posenc_lab/file_io.h"
#include "posenc/error.h"
#include "posenc/numerics.h"
#include "train_loop.h"

namespace posenc::lab {
namespace {

using torch_layer::TransformerLM;

double warmup_cosine(const TrainSettings& t, long step) {
  if (step < t.warmup) return t.lr * static_cast<double>(step + 1) / t.warmup;
  const double progress = static_cast<double>(step - t.warmup) / std::max(1, t.steps - t.warmup);
  return t.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(kPi * progress)));  // cosine to 10%
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

torch::Tensor random_positions(const torch::Tensor& tokens, int range, std::uint64_t seed) {
  const torch::Tensor rows = tokens.to(torch::kInt64).contiguous();
  const std::int64_t B = rows.size(0), S = rows.size(1);
  if (S > range) throw Error("randomized positions: " + std::to_string(S) + " tokens need a range of at least as many, got " + std::to_string(range));
  torch::Tensor out = torch::empty({B, S}, torch::kInt64);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t* row = rows.data_ptr<std::int64_t>() + b * S;
    std::mt19937_64 rng(fnv1a64(row, static_cast<std::size_t>(S) * sizeof(std::int64_t)) ^ (seed * 0x9e3779b97f4a7c15ull));
    // Floyd's algorithm: S distinct values of 0 .. range-1, each subset equally likely.
    std::vector<std::int64_t> picked;
    picked.reserve(static_cast<std::size_t>(S));
    for (std::int64_t j = range - S; j < range; ++j) {
      const std::int64_t t = std::uniform_int_distribution<std::int64_t>(0, j)(rng);
      picked.push_back(std::find(picked.begin(), picked.end(), t) == picked.end() ? t : j);
    }
    std::sort(picked.begin(), picked.end());
    std::copy(picked.begin(), picked.end(), out.data_ptr<std::int64_t>() + b * S);
  }
  return out;
}

torch::Tensor training_forward(TransformerLM& model, const torch::Tensor& tokens, const TrainSettings& t, std::uint64_t seed) {
  if (t.randomize_positions <= 0) return model->forward(tokens);
  return model->forward_at(tokens, random_positions(tokens, t.randomize_positions, seed));
}

TrainLoop settings_loop(const TrainSettings& t, const std::string& label, const std::string& checkpoint, const nlohmann::json& key) {
  TrainLoop loop;
  loop.label = label;
  loop.checkpoint = checkpoint;
  loop.key = key;
  loop.steps = t.steps;
  loop.checkpoint_every = t.checkpoint_every;
  loop.lr = t.lr;
  if (t.schedule == LrSchedule::kWarmupCosine) loop.lr_at = [t](long step) { return warmup_cosine(t, step); };
  return loop;
}

TrainSettings finetune_settings(const TrainSettings& base, int scale, int steps) {
  TrainSettings ft = base;
  ft.train_len = base.train_len * scale;
  ft.steps = steps;
  ft.batch = std::max(1, base.batch / scale);  // the same tokens per step
  ft.lr = base.lr / 4;
  ft.warmup = std::min(base.warmup, steps / 4 + 1);
  ft.randomize_positions = 0;  // the fine-tune is at the longer length's own positions
  return ft;
}

bool train(TransformerLM& model, const ModelPlan& plan, const TrainSettings& c, const Corpus& corpus, const nlohmann::json& key,
           long* budget, bool restart_on_other_key, const BatchSource& batches, World* world) {
  // Transformer-XL with memory trains on pairs of consecutive segments (twice the text per step).
  const bool xl = xl_memory(model);
  if (xl && corpus.train.size() < static_cast<std::size_t>(2 * c.train_len + 2))
    throw Error(plan.name + ": the training text (" + std::to_string(corpus.train.size()) + " tokens) is shorter than " +
                std::to_string(2 * c.train_len + 2) + ", two segments of the training length " + std::to_string(c.train_len) +
                " + 2, which Transformer-XL's memory trains on");
  if (xl && batches) throw Error(plan.name + ": a Transformer-XL model with memory trains on its own pairs of text segments, not on a batch source");
  model->fused_training = c.train_len >= kFusedTrainingMinLen;
  nlohmann::json loop_key = key;
  if (model->fused_training) loop_key["fused_training"] = true;  // other float rounding: not the materialising path's weights
  TrainLoop loop = settings_loop(c, plan.name, c.out_dir + "/" + plan.name + ".ckpt", loop_key);
  loop.tokens_per_row = c.train_len;
  loop.restart_on_other_key = restart_on_other_key;
  loop.world = world;
  const int len = c.train_len;
  if (batches) loop.batch = batches;
  else loop.batch = [&, xl](long step) { return batch_at(corpus, plan.seed, step, c.batch, xl ? 2 * len : len); };
  if (xl && c.randomize_positions > 0)
    throw Error(plan.name + ": Transformer-XL's segments carry their own positions; randomized positions are for the other schemes");
  loop.loss = [m = model, xl, len, &c, seed = static_cast<std::uint64_t>(plan.seed)](const torch::Tensor& rows) mutable {
    torch::Tensor logits, targets;
    if (xl) {  // the previous segment builds the memory (no gradient), the next one learns with it
      torch_layer::XLMemory memory;
      {
        torch::NoGradGuard no_grad;
        m->forward_segment(rows.narrow(1, 0, len), memory);
      }
      logits = m->forward_segment(rows.narrow(1, len, len), memory);
      targets = rows.narrow(1, len + 1, len);
    } else {
      logits = training_forward(m, rows.narrow(1, 0, len), c, seed);
      targets = rows.narrow(1, 1, len);
    }
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  };
  return run_train_loop(*model, loop, budget).finished;
}

}  // namespace posenc::lab
