#include "posenc_lab/extrapolate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "check_range.h"
#include "checkpoint.h"
#include "extrapolate_plan.h"
#include "run_models.h"
#include "lm_eval.h"
#include "lm_train.h"
#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/results_io.h"
#include "posenc_torch/model.h"

namespace posenc::lab {
namespace {

using torch_layer::TransformerLM;

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
  const TrainSettings& t = c.training;
  const TrainSettings ft = finetune_settings(t, kPiScale, c.pi_finetune_steps);
  torch::manual_seed(static_cast<std::uint64_t>(plan.seed));
  TransformerLM model(plan.config);
  // Start from the trained model's final weights (its checkpoint, verified against its key).
  load_checkpoint(t.out_dir + "/" + base.name + ".ckpt", *model, nullptr, base_key);
  nlohmann::json key = training_key(plan, ft, corpus);
  key["base"] = base_key;
  if (!train(model, plan, ft, corpus, key, budget, true)) return {};
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<ResultRow> rows;
  for (int len : c.eval_lens) {
    RopeParams p = plan.config.rope;
    p.head_dim = plan.config.head_dim();
    p.factor = std::max<double>(kPiScale, static_cast<double>(len) / t.train_len);
    torch_layer::RotaryEmbedding schedule(p);
    char note[80];
    std::snprintf(note, sizeof note, "PI x%d fine-tuned %d steps at length %d", kPiScale, c.pi_finetune_steps, ft.train_len);
    rows.push_back(make_row(base, "pi+finetune", len, score_windows(model, corpus, len, t.train_len, c.eval_chars, schedule.get()), note));
  }
  return rows;
}

// The run's notes above the table: YaRN's zone at this training length, how windows are scored,
// the corpus's unit, how the ranks shared the work.
std::vector<std::string> run_notes(const ExtrapolateConfig& c, const Corpus& corpus, const RunRanks& run) {
  std::vector<std::string> notes;
  const int train_len = c.training.train_len;
  const auto scores = [&](RopeExtension e) { return std::find(c.extensions.begin(), c.extensions.end(), e) != c.extensions.end(); };
  const bool rope = std::find(c.schemes.begin(), c.schemes.end(), "rope") != c.schemes.end() || !c.rope_bases.empty() || !c.rope_clips.empty();
  if (rope && scores(RopeExtension::kYarn)) {
    // YaRN's beta_fast zone at this training length (HF's floor/ceil of the correction range).
    RopeParams probe;
    probe.head_dim = c.shape.d_model / c.shape.heads;
    probe.type = RopeType::kYarn;
    probe.factor = 4;
    probe.original_max_position_embeddings = train_len;
    const auto range = *compute_schedule(probe).correction_range;
    if (range[0] <= 0)
      notes.push_back("yarn: at training length " + std::to_string(train_len) + " and head_dim " + std::to_string(probe.head_dim) +
                      " the beta_fast=32 correction dimension is below 0: no frequency keeps its value (HF rounds the range to [" +
                      format_number(range[0]) + ", " + format_number(range[1]) + "]); YaRN is all ramp and temperature here");
  }
  notes.push_back("evaluation: non-overlapping windows over the first " + std::to_string(c.eval_chars) +
                  " validation tokens (one window where the length is longer), each scored in one pass" +
                  std::string(rope && scores(RopeExtension::kDynamic) ? "; 'dynamic' is then NTK at the window's scale" : "") +
                  (rope && scores_incremental(c) ? "; 'dynamic' and '" + std::string(kIncrementalRow) + "' are both scored on the first " +
                                                  std::to_string(std::min(c.incremental_tokens, c.eval_chars)) +
                                                  " tokens (one window, where the length is longer), one pass vs "
                                                  "token by token under HF's runtime rule"
                                            : std::string()));
  if (!corpus.ascii) notes.push_back(c.corpus + " is not ASCII: tokens are bytes, scores are bits per byte");
  if (c.training.randomize_positions > 0) notes.push_back(randomized_positions_note(c.training));
  const int ranks = run.world ? run.world->size() : 1;
  if (ranks > 1)
    notes.push_back(distributes_models(run.launch)
                        ? "world size " + std::to_string(ranks) + ": whole models handed out to the ranks"
                        : "world size " + std::to_string(ranks) + ": each step's batch of " + std::to_string(c.training.batch) +
                              " rows split across the ranks, gradients averaged");
  return notes;
}

}  // namespace

ExtrapolateResult run_extrapolate(const ExtrapolateConfig& c) {
  validate(c);  // names and schemes checked before the corpus is read
  const Corpus corpus = load_corpus(c.corpus);
  check_corpus(c, corpus);
  const std::vector<ModelPlan> plans = plan_models(c, corpus.vocab_size());
  const std::string& out = c.training.out_dir;
  RunHooks hooks;
  hooks.job = [&](std::size_t i) {
    const ModelPlan& plan = plans[i];
    ModelJob job;
    job.label = plan.name;
    job.result_path = out + "/" + plan.name + ".result.json";
    job.key = {training_key(plan, c.training, corpus), evaluation_key(plan, c)};
    job.model_path = out + "/" + plan.name + ".pt";  // for `posenc plot attention`
    return job;
  };
  // The ranks meet once the settings and the corpus are known good.
  const RunRanks run = open_run(c.training, c.launch, "lab extrapolate", plans.size(), hooks.job);
  // The vocabulary (byte values; -1: the unknown id) beside the models, for `posenc plot attention
  // --text`: rank 0's, and with --distribute models every rank's (its own --out on another host).
  nlohmann::json vocab(corpus.vocab);
  vocab.push_back(-1);
  if (is_primary(run.launch) || distributes_models(run.launch)) write_file_atomic(out + "/vocab.json", vocab.dump());
  ExtrapolateResult result;
  result.unit = corpus.unit();
  result.notes = run_notes(c, corpus, run);
  long budget = c.stop_after_steps;
  hooks.train = [&](std::size_t i, World* world, nlohmann::json*) {
    const ModelPlan& plan = plans[i];
    budget = rank0s_number(world, budget, plan.name + ": the steps left");  // rank 0's PI fine-tunes spent steps the others did not
    torch::manual_seed(static_cast<std::uint64_t>(plan.seed));
    TransformerLM model(plan.config);
    if (!train(model, plan, c.training, corpus, training_key(plan, c.training, corpus), &budget, false, {}, world)) return TransformerLM(nullptr);
    return model;
  };
  hooks.evaluate = [&](std::size_t i, TransformerLM& model, nlohmann::json* rows) {
    const ModelPlan& plan = plans[i];
    for (const auto& r : evaluate(model, plan, c, corpus)) rows->push_back(row_json(r));
    if (!fine_tunes(plan, c)) return true;
    const auto tuned = pi_finetune(plan, training_key(plan, c.training, corpus), c, corpus, &budget);
    for (const auto& r : tuned) rows->push_back(row_json(r));
    return !tuned.empty();
  };
  hooks.collect = [&](std::size_t, const nlohmann::json& rows, const std::string& source) {
    for (const auto& row : rows) result.rows.push_back(row_from_json(row, source));
  };
  result.complete = run_models(run, plans.size(), hooks);
  if (!is_primary(run.launch)) return result;  // rank 0 writes the results
  write_file_atomic(out + "/results.json", results_json(result, c));
  write_file_atomic(out + "/results.csv", results_csv(result));
  write_file_atomic(out + "/chart.svg", results_svg(result, c));
  return result;
}

}  // namespace posenc::lab
