// Training one character-level TransformerLM for `lab extrapolate`: warm-up then cosine learning
// rate, batches that are a function of (seed, step) only, a checkpoint every checkpoint_every
// steps, so an interrupted model resumes to the numbers of an uninterrupted one. The loop itself
// (AdamW, clipping, checkpoints, data parallelism) is train_loop.h.
#pragma once

#include <torch/torch.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "distributed_world.h"
#include "lm_eval.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"

namespace posenc::lab {

// The token batch of one training step: [batch, train_len + 1] int64 (inputs are columns
// 0..train_len-1, targets 1..train_len). It must be a pure function of the step (and the caller's
// seed) so a resumed run sees exactly the batches of an uninterrupted one. Empty: random windows
// of the training text.
using BatchSource = std::function<torch::Tensor(long step)>;

// Trains (or resumes from <out>/<plan.name>.ckpt) to c.steps; returns false when *budget (steps
// left in this run, -1: no limit) ran out first. A checkpoint with another training key is an
// Error, or (restart_on_other_key) is trained over from the model's current weights. A
// non-finite loss is an Error naming the model and step. A batch source is for models without
// Transformer-XL memory (those train on pairs of text segments): with memory it is an Error.
// world (non-null): every rank calls train() alike and computes its shard of each batch.
bool train(torch_layer::TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c, const Corpus& corpus,
           const nlohmann::json& key, long* budget, bool restart_on_other_key = false, const BatchSource& batches = {},
           World* world = nullptr);

}  // namespace posenc::lab
