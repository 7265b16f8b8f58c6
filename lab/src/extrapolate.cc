#include "posenc_lab/extrapolate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <nlohmann/json.hpp>

#include "check_range.h"
#include "checkpoint.h"
#include "extrapolate_plan.h"
#include "distributed_queue.h"
#include "distributed_run.h"
#include "lm_eval.h"
#include "lm_train.h"
#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/results_io.h"
#include "posenc_torch/model.h"

namespace posenc::lab {
namespace {

using torch_layer::Fusion;
using torch_layer::ModelConfig;
using torch_layer::TransformerLM;
namespace fs = std::filesystem;

// PI with a short fine-tune (Chen et al. 2023 recover a 4x PI model in ~1000 steps; scaled
// down here): the trained RoPE model, positions divided by 4, trained on at 4x the length,
// then scored with that schedule (and PI's own scale beyond 4x). Its checkpoint is part of the
// base model's evaluation: other fine-tune settings train it over from the base weights.
std::vector<ResultRow> pi_finetune(const ModelPlan& base, const nlohmann::json& base_key, const ExtrapolateConfig& c,
                                   const Corpus& corpus, long* budget) {
  ModelPlan plan = base;
  plan.name = base.name + "-pi-finetune";
  plan.config.rope.type = RopeType::kLinear;
  plan.config.rope.factor = kPiScale;
  ExtrapolateConfig ft = c;
  ft.train_len = c.train_len * kPiScale;
  ft.steps = c.pi_finetune_steps;
  ft.batch = std::max(1, c.batch / kPiScale);  // the same tokens per step
  ft.lr = c.lr / 4;
  ft.warmup = std::min(c.warmup, c.pi_finetune_steps / 4 + 1);
  torch::manual_seed(static_cast<std::uint64_t>(plan.seed));
  TransformerLM model(plan.config);
  // Start from the trained model's final weights (its checkpoint, verified against its key).
  load_checkpoint(c.out_dir + "/" + base.name + ".ckpt", model, nullptr, base_key);
  nlohmann::json key = training_key(plan, ft, corpus);
  key["base"] = base_key;
  if (!train(model, plan, ft, corpus, key, budget, true)) return {};
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<ResultRow> rows;
  for (int len : c.eval_lens) {
    RopeParams p = plan.config.rope;
    p.head_dim = plan.config.head_dim();
    p.factor = std::max<double>(kPiScale, static_cast<double>(len) / c.train_len);
    model->rotary = model->replace_module("rotary", torch_layer::RotaryEmbedding(p));
    char note[80];
    std::snprintf(note, sizeof note, "PI x%d fine-tuned %d steps at length %d", kPiScale, c.pi_finetune_steps, ft.train_len);
    rows.push_back(make_row(base, "pi+finetune", len, score_windows(model, corpus, len, c.train_len, c.eval_chars), note));
  }
  return rows;
}

// One model of the plan: its cached rows, or trained (data parallel over world when given: every
// rank calls this alike) and evaluated on rank 0. nullopt: the step budget ran out first. Rank 0
// tells the others whether it trains (the files are its own) and when it is done.
std::optional<std::vector<ResultRow>> model_rows(ModelPlan plan, std::size_t index, const ExtrapolateConfig& c, const Corpus& corpus,
                                                 long* budget, World* world) {
  const bool primary = !world || world->rank() == 0;
  const std::string tag = "posenc/model/" + std::to_string(index) + "/";
  plan.config.vocab_size = corpus.vocab_size();
  const std::string result_path = c.out_dir + "/" + plan.name + ".result.json";
  const CacheKey key{training_key(plan, c, corpus), evaluation_key(plan, c)};
  std::optional<nlohmann::json> cached;
  if (primary) cached = cached_rows(result_path, key);
  if (world && primary) world->set(tag + "cached", cached ? "1" : "0");
  if (world && !primary && world->wait_for(tag + "cached", 0, "waiting for rank 0 to look up " + plan.name) == "1")
    return std::vector<ResultRow>{};
  if (cached) {
    std::vector<ResultRow> rows;
    for (const auto& row : *cached) rows.push_back(row_from_json(row, result_path));
    std::fprintf(stderr, "%s: finished earlier, reusing %s\n", plan.name.c_str(), result_path.c_str());
    return rows;
  }
  torch::manual_seed(static_cast<std::uint64_t>(plan.seed));
  TransformerLM model(plan.config);
  if (!train(model, plan, c, corpus, key.train, budget, false, {}, world)) return std::nullopt;
  if (!primary) {
    if (world->wait_for(tag + "done", 0, "waiting for rank 0 to evaluate " + plan.name) == "ok") return std::vector<ResultRow>{};
    return std::nullopt;
  }
  // the trained model and the vocabulary (byte values; -1: the unknown id), for `posenc plot attention --text`
  save_model_file(model, c.out_dir + "/" + plan.name + ".pt");
  nlohmann::json vocab(corpus.vocab);
  vocab.push_back(-1);
  write_file_atomic(c.out_dir + "/vocab.json", vocab.dump());
  auto rows = evaluate(model, plan, c, corpus);
  if (fine_tunes(plan, c)) {
    const auto tuned = pi_finetune(plan, key.train, c, corpus, budget);
    if (tuned.empty()) {
      if (world) world->set(tag + "done", "stop");
      return std::nullopt;
    }
    rows.insert(rows.end(), tuned.begin(), tuned.end());
  }
  nlohmann::json saved = nlohmann::json::array();
  for (const auto& r : rows) saved.push_back(row_json(r));
  write_cached_rows(result_path, key, saved);
  if (world) world->set(tag + "done", "ok");
  return rows;
}

}  // namespace

int max_lab_threads() { return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxThreads); }

ExtrapolateResult run_extrapolate(const ExtrapolateConfig& c) {
  validate(c);
  const std::vector<ModelPlan> plans = plan_models(c, 2);  // names and schemes checked before the corpus is read
  const Corpus corpus = load_corpus(c.corpus);
  const int longest = *std::max_element(c.eval_lens.begin(), c.eval_lens.end());
  if (static_cast<long>(corpus.valid.size()) < longest + 1)
    throw Error("the validation text of " + c.corpus + " (" + std::to_string(corpus.valid.size()) +
                " tokens) is shorter than the longest eval length " + std::to_string(longest) + " + 1");
  const long need = static_cast<long>(c.pi_finetune_steps > 0 ? kPiScale * c.train_len : c.train_len) + 2;
  if (static_cast<long>(corpus.train.size()) < need)
    throw Error("the training text of " + c.corpus + " (" + std::to_string(corpus.train.size()) + " tokens) is shorter than " +
                std::to_string(need) + ", the training length " + std::to_string(need - 2) + " + 2");
  // Default one thread: measured on the 2-vCPU machines this project runs on, libtorch trained
  // these small models 3x slower with 2 threads than with 1.
  torch::set_num_threads(c.threads > 0 ? c.threads : 1);
  // Ranks meet once the settings and the corpus are known good (distributed_run.h).
  const RunRanks run = join_run(c.launch, c.out_dir, c.batch);
  const LaunchConfig& launch = run.launch;
  World* const world = run.world.get();
  ExtrapolateResult result;
  result.unit = corpus.unit();
  {
    // YaRN's beta_fast zone at this training length (HF's floor/ceil of the correction range).
    RopeParams probe;
    probe.head_dim = c.d_model / c.heads;
    probe.type = RopeType::kYarn;
    probe.factor = 4;
    probe.original_max_position_embeddings = c.train_len;
    const auto range = *compute_schedule(probe).correction_range;
    if (range[0] <= 0)
      result.notes.push_back("yarn: at training length " + std::to_string(c.train_len) + " and head_dim " + std::to_string(probe.head_dim) +
                             " the beta_fast=32 correction dimension is below 0: no frequency keeps its value (HF rounds the range to [" +
                             format_number(range[0]) + ", " + format_number(range[1]) + "]); YaRN is all ramp and temperature here");
  }
  result.notes.push_back("evaluation: non-overlapping windows over the first " + std::to_string(c.eval_chars) +
                         " validation tokens (one window where the length is longer), each scored in one pass; "
                         "'dynamic' is then NTK at the window's scale" +
                         (scores_incremental(c) ? "; 'dynamic' and 'dynamic-incremental' are both scored on the first " +
                                                         std::to_string(std::min(c.incremental_tokens, c.eval_chars)) +
                                                         " tokens (one window, where the length is longer), one pass vs "
                                                         "token by token under HF's runtime rule"
                                                   : std::string()));
  if (!corpus.ascii) result.notes.push_back(c.corpus + " is not ASCII: tokens are bytes, scores are bits per byte");
  long budget = c.stop_after_steps;
  const int ranks = world ? world->size() : 1;
  if (ranks > 1)
    result.notes.push_back(distributes_models(launch)
                               ? "world size " + std::to_string(ranks) + ": whole models handed out to the ranks"
                               : "world size " + std::to_string(ranks) + ": each step's batch of " + std::to_string(c.batch) +
                                     " rows split across the ranks, gradients averaged");
  if (distributes_models(launch)) {
    const auto outcomes = share_jobs(*world, plans.size(), [&](std::size_t i) {
      const auto rows = model_rows(plans[i], i, c, corpus, &budget, nullptr);
      if (!rows) return std::string("incomplete");
      nlohmann::json saved = nlohmann::json::array();
      for (const auto& r : *rows) saved.push_back(row_json(r));
      return saved.dump();
    });
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i] == "incomplete") {
        result.complete = false;
        continue;
      }
      for (const auto& row : nlohmann::json::parse(outcomes[i])) result.rows.push_back(row_from_json(row, plans[i].name + " (from its rank)"));
    }
    return result;
  }
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const auto rows = model_rows(plans[i], i, c, corpus, &budget, world);
    if (!rows) {
      result.complete = false;
      return result;
    }
    result.rows.insert(result.rows.end(), rows->begin(), rows->end());
  }
  return result;
}

}  // namespace posenc::lab
