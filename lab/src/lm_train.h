// Training one character-level TransformerLM (`lab extrapolate`, `lab passkey`): warm-up then cosine learning
// rate, batches that are a function of (seed, step) only, a checkpoint every checkpoint_every
// steps, so an interrupted model resumes to the numbers of an uninterrupted one. The loop itself
// (AdamW, clipping, checkpoints, data parallelism) is train_loop.h.
#pragma once

#include <torch/torch.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "distributed_world.h"
#include "model_plan.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/run_settings.h"
#include "train_loop.h"

namespace posenc::lab {

// The token batch of one training step: [batch, train_len + 1] int64 (inputs are columns
// 0..train_len-1, targets 1..train_len). It must be a pure function of the step (and the caller's
// seed) so a resumed run sees exactly the batches of an uninterrupted one. Empty: random windows
// of the training text.
using BatchSource = std::function<torch::Tensor(long step)>;

// The loop's schedule from the settings: steps, lr and its schedule, checkpoints every
// checkpoint_every steps into `checkpoint` under `key`, progress lines naming `label`.
TrainLoop settings_loop(const TrainSettings& t, const std::string& label, const std::string& checkpoint, const nlohmann::json& key);

// Randomized positions (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
// Generalization of Transformers"): for each row of tokens [B, S], a sorted random subset of S of
// 0 .. range-1 ([B, S] int64). Each row's draw is a function of its tokens and seed only, so it is
// the same on whichever rank holds the row and on a resumed run.
torch::Tensor random_positions(const torch::Tensor& tokens, int range, std::uint64_t seed);

// The training forward of tokens [B, S]: at 0 .. S-1, or (t.randomize_positions > 0) at
// random_positions over that range. Evaluation always reads 0 .. S-1.
torch::Tensor training_forward(torch_layer::TransformerLM& model, const torch::Tensor& tokens, const TrainSettings& t, std::uint64_t seed);

// A short fine-tune of a trained model at `scale` times its training length, for `steps` steps:
// the same tokens per step (batch / scale rows), a quarter of the learning rate, a warm-up of at
// most a quarter of the steps.
TrainSettings finetune_settings(const TrainSettings& base, int scale, int steps);

// From this training length on, attention trains through posenc's fused kernel, forward and
// backward (TransformerLM::fused_training; schemes it does not cover keep libtorch's path):
// there it is faster per step than materialising [B, H, L, L] scores (issue 29, `bench train`).
// Below it, where the two are equally fast, the materialising path keeps the lab's tables
// exactly as they were. The checkpoint's key says "fused_training" when it applies.
inline constexpr int kFusedTrainingMinLen = 256;

// Trains (or resumes from <t.out_dir>/<plan.name>.ckpt) to t.steps; returns false when *budget
// (steps left in this run, -1: no limit) ran out first. A checkpoint with another training key is
// an Error, or (restart_on_other_key) is trained over from the model's current weights. A
// non-finite loss is an Error naming the model and step. A batch source is for models without
// Transformer-XL memory (those train on pairs of text segments): with memory it is an Error.
// world (non-null): every rank calls train() alike and computes its shard of each batch.
bool train(torch_layer::TransformerLM& model, const ModelPlan& plan, const TrainSettings& t, const Corpus& corpus,
           const nlohmann::json& key, long* budget, bool restart_on_other_key = false, const BatchSource& batches = {},
           World* world = nullptr);

}  // namespace posenc::lab
