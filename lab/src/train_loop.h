// The lab's one training loop (`lab extrapolate`, its PI fine-tune, `lab sort`, `lab passkey`, `lab vision`'s ViT):
// AdamW, a learning rate per step, gradient clipping at norm 1, checkpoints that resume to the numbers of
// an uninterrupted run, progress on stderr, and data parallelism over a World.
//
// Data parallel: the batch of step s is a pure function of s ([B, ...] rows, the same on every
// rank); rank r computes the loss of rows [r*B/W, (r+1)*B/W) only. Its mean loss and gradients are
// weighted by its share of the rows and summed over the ranks in one flat float32 buffer, which is
// the gradient of the mean loss over all B rows, as one process computes it (up to the order of
// float32 sums). Every rank then clips and steps the same gradients: the weights stay equal (a
// checksum is compared at each checkpoint). Rank 0 alone writes the checkpoint.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distributed_world.h"
#include "posenc_torch/model.h"

namespace posenc::lab {

struct TrainLoop {
  std::string label;       // names the model in progress lines and errors
  std::string checkpoint;  // file (empty: none; the run then starts over when interrupted)
  nlohmann::json key;      // everything that determines the weights (checked against the checkpoint)
  long steps = 0;
  int checkpoint_every = 100;
  double lr = 1e-3, weight_decay = 0.01;
  std::function<double(long step)> lr_at;  // empty: lr at every step
  // The global batch of a step: [B, ...] rows (int64 tokens; the vision lab's float32 patches and
  // label), a pure function of the step.
  std::function<torch::Tensor(long step)> batch;
  // The mean loss of some rows of a batch (a scalar with a graph), from the model being trained
  // (the closure holds it: a TransformerLM, or the vision lab's ViT).
  std::function<torch::Tensor(const torch::Tensor& rows)> loss;
  long tokens_per_row = 0;    // for the throughput in the summary line
  // What one loss term scores and what tokens_per_row counts, for the summary line (the vision
  // lab: "image", "patches").
  std::string loss_per = "token", tokens_name = "tokens";
  bool restart_on_other_key = false;  // a checkpoint with another key is trained over, not an Error
  World* world = nullptr;     // null: this process alone
};

struct TrainOutcome {
  bool finished = false;  // false: the budget ran out first (a checkpoint holds the last step)
  double last_loss = 0;
  std::vector<double> losses;  // the mean loss of every step, from step 0 (kept in the checkpoint)
};

// Trains model (or resumes it from loop.checkpoint) to loop.steps; *budget counts the steps this
// run may still take (-1: no limit). A non-finite loss is an Error naming the label and the step;
// so is a first step that leaves every weight of model without a gradient (a loss closure
// holding another module would otherwise train nothing, silently).
TrainOutcome run_train_loop(torch::nn::Module& model, const TrainLoop& loop, long* budget);

}  // namespace posenc::lab
