#include "train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "checkpoint.h"
#include "posenc/error.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/progress.h"
#include "posenc_lab/train_timing.h"

namespace posenc::lab {
namespace {


// The bits of every weight: equal on every rank exactly when the ranks agree.
std::uint64_t weights_checksum(torch::nn::Module& model) {
  std::uint64_t h = 0;
  for (const auto& p : model.parameters()) {
    const torch::Tensor c = p.detach().contiguous();
    h = h * 1099511628211ull ^ fnv1a64(c.data_ptr(), static_cast<std::size_t>(c.numel() * c.element_size()));
  }
  return h;
}

// Where to start: the checkpoint's state (read on rank 0, handed to every rank), or step 0.
CheckpointHeader resume(torch::nn::Module& model, torch::optim::Optimizer& optimizer, const TrainLoop& L) {
  std::string bytes;
  const bool primary = !L.world || L.world->rank() == 0;
  if (primary && !L.checkpoint.empty() && std::filesystem::exists(L.checkpoint) &&
      !(L.restart_on_other_key && read_checkpoint_header(L.checkpoint).train_key != L.key))
    bytes = "+" + read_checkpoint_file(L.checkpoint);  // "+": a file was there (an empty one is corrupt, not absent)
  if (L.world) bytes = L.world->broadcast(bytes, L.label + ": handing out the checkpoint");
  if (bytes.empty()) return {};
  return load_checkpoint_bytes(L.checkpoint, bytes.substr(1), model, &optimizer, L.key);
}

// The rank's loss and gradients, weighted by its share of the rows, summed over the ranks in one
// flat buffer [every gradient..., loss]; returns the global mean loss.
double all_reduce(World& world, const std::vector<torch::Tensor>& params, const torch::Tensor& loss, double share, long step) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : params) parts.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}));
  parts.push_back((loss.detach() * share).reshape({1}).to(torch::kFloat32));
  torch::Tensor flat = torch::cat(parts);
  world.sum(flat, "averaging the gradients of step " + std::to_string(step));
  std::int64_t at = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    p.mutable_grad().copy_(flat.narrow(0, at, p.numel()).view_as(p));
    at += p.numel();
  }
  return flat[at].item<double>();
}

}  // namespace

TrainOutcome run_train_loop(torch::nn::Module& model, const TrainLoop& L, long* budget) {
  World* const world = L.world;
  const int ranks = world ? world->size() : 1, rank = world ? world->rank() : 0;
  if (world) world->check_same(fnv1a64(L.key.dump().data(), L.key.dump().size()), L.label + ": the training settings");
  torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(L.lr).weight_decay(L.weight_decay));
  const CheckpointHeader start = resume(model, optimizer, L);
  long step = start.step;
  TrainOutcome out;
  out.losses = start.losses;
  out.losses.resize(static_cast<std::size_t>(step), std::nan(""));  // an older checkpoint without the curve
  std::optional<Progress> progress;
  if (rank == 0) progress.emplace("train " + L.label, L.steps, step, ranks);
  if (step >= L.steps) {
    if (progress) progress->finish("trained earlier: " + L.checkpoint);
    out.finished = true;
    out.last_loss = out.losses.empty() ? std::nan("") : out.losses.back();
    return out;
  }
  const std::vector<torch::Tensor> params = model.parameters();
  const auto began = std::chrono::steady_clock::now();
  const long first = step;
  long tokens = 0;
  model.train();
  while (step < L.steps) {
    if (*budget == 0) {
      if (rank == 0 && !L.checkpoint.empty()) save_checkpoint(L.checkpoint, model, &optimizer, step, L.key, out.losses);
      return out;
    }
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(L.lr_at ? L.lr_at(step) : L.lr);
    optimizer.zero_grad();
    const torch::Tensor batch = L.batch(step);
    const std::int64_t rows = batch.size(0);
    if (rows < ranks)
      throw Error(L.label + ": a batch of " + std::to_string(rows) + " rows cannot be shared by " + std::to_string(ranks) +
                  " ranks; give a batch of at least the world size");
    const std::int64_t lo = rank * rows / ranks, hi = (rank + 1) * rows / ranks;
    const torch::Tensor loss = L.loss(ranks > 1 ? batch.narrow(0, lo, hi - lo) : batch);
    double value;
    if (ranks > 1) {
      const double share = static_cast<double>(hi - lo) / static_cast<double>(rows);
      (loss * share).backward();
      value = all_reduce(*world, params, loss, share, step);
    } else {
      value = loss.item<double>();
    }
    if (!std::isfinite(value))
      throw Error(L.label + ": the training loss is " + format_number(value) + " at step " + std::to_string(step) +
                  " (diverged); nothing was saved past the last checkpoint" + (L.checkpoint.empty() ? "" : " " + L.checkpoint));
    if (ranks == 1) loss.backward();
    if (step == first && std::none_of(params.begin(), params.end(), [](const torch::Tensor& w) { return w.grad().defined(); }))
      throw Error(L.label + ": the loss reaches none of the model's weights (its closure holds another module)");
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    optimizer.step();
    ++step;
    tokens += rows * L.tokens_per_row;
    out.losses.push_back(value);
    out.last_loss = value;
    if (*budget > 0) --*budget;
    if (world) world->note_step(step);
    if (progress) progress->update(step, value, static_cast<double>(tokens));
    if (step % L.checkpoint_every == 0 || step == L.steps) {
      if (world) world->check_same(weights_checksum(model), L.label + ": the weights at step " + std::to_string(step));
      if (rank == 0 && !L.checkpoint.empty()) save_checkpoint(L.checkpoint, model, &optimizer, step, L.key, out.losses);
    }
  }
  out.finished = true;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  // The training speed of this run (the leaderboard's tokens/s; steps before a resume are not in it).
  if (rank == 0 && !L.checkpoint.empty()) {
    write_train_timing(L.checkpoint, {first, step - first, tokens, seconds, ranks});
  }
  if (progress) {
    char summary[160];
    std::snprintf(summary, sizeof summary, "trained, loss %.3f (%.2f bits per %s), %.0f %s/s over %d rank%s", out.last_loss,
                  out.last_loss / kLn2, L.loss_per.c_str(), step > first ? static_cast<double>(tokens) / seconds : 0.0,
                  L.tokens_name.c_str(), ranks, ranks > 1 ? "s" : "");
    progress->finish(summary);
  }
  return out;
}

}  // namespace posenc::lab
