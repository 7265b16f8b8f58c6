#include "run_models.h"

#include "posenc_torch/blas_threads.h"

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "checkpoint.h"
#include "distributed_queue.h"
#include "posenc/error.h"
#include "posenc_lab/result_cache.h"
#include "run_keys.h"

namespace posenc::lab {
namespace {

// What --distribute models publishes for a job the step budget cut short (never JSON).
constexpr const char* kIncomplete = "incomplete";

struct ModelRows {
  nlohmann::json rows;  // rank 0's; null on the others
  std::string source;   // where the rows were read; empty: none here
};

// Model i: its cached rows, or trained (with world: by every rank alike) and evaluated on rank 0.
// nullopt: the step budget ran out first.
std::optional<ModelRows> run_model(std::size_t i, World* world, const RunHooks& hooks) {
  const bool primary = !world || world->rank() == 0;
  const ModelJob job = hooks.job(i);
  std::optional<nlohmann::json> cached;
  if (primary) cached = cached_rows(job.result_path, job.key);
  // A saved model is evaluated again only when it is the model its result file was computed from.
  bool saved = false;
  if (primary && !cached && job.evaluates_saved_model && std::filesystem::exists(job.model_path)) {
    const std::string recorded = cached_model_checksum(job.result_path, job.key);
    saved = !recorded.empty();
    if (saved && recorded != file_checksum(job.model_path))
      throw Error(job.model_path + " is not the model " + job.result_path +
                  " was computed from (its checksum differs); delete both to retrain");
  }
  if (world && primary) world->set(run_keys::model_trains(i), cached || saved ? "0" : "1");
  if (world && !primary) {
    if (world->wait_for(run_keys::model_trains(i), 0, "waiting for rank 0 to look up " + job.label) == "0") return ModelRows{};
    nlohmann::json rows_here = nlohmann::json::array();  // rank 0 keeps the rows
    if (!hooks.train(i, world, &rows_here)) return std::nullopt;
    if (world->wait_for(run_keys::model_done(i), 0, "waiting for rank 0 to evaluate " + job.label) == "ok") return ModelRows{};
    return std::nullopt;
  }
  if (cached) {
    std::fprintf(stderr, "%s: finished earlier, reusing %s\n", job.label.c_str(), job.result_path.c_str());
    return ModelRows{*cached, job.result_path};
  }
  nlohmann::json rows = nlohmann::json::array();
  torch_layer::TransformerLM model = saved ? load_model_file(job.model_path) : hooks.train(i, world, &rows);
  if (!model) return std::nullopt;
  if (!saved && !job.model_path.empty()) save_model_file(model, job.model_path);
  if (!hooks.evaluate(i, model, &rows)) {
    if (world) world->set(run_keys::model_done(i), "stop");
    return std::nullopt;
  }
  write_cached_rows(job.result_path, job.key, rows, job.model_path.empty() ? "" : file_checksum(job.model_path));
  if (world) world->set(run_keys::model_done(i), "ok");
  return ModelRows{rows, job.result_path};
}

}  // namespace

RunRanks open_run(const TrainSettings& training, const LaunchConfig& launch, const std::string& command, std::size_t count,
                  const std::function<ModelJob(std::size_t i)>& job) {
  // Default one thread: measured on the 2-vCPU machines this project runs on, libtorch trained
  // these small models 3x slower with 2 threads than with 1.
  torch_layer::set_torch_and_blas_threads(training.threads > 0 ? training.threads : 1);  // OpenBLAS too: blas_threads.h
  nlohmann::json models = nlohmann::json::array(), settings = nlohmann::json::object();
  for (std::size_t i = 0; i < count; ++i) {
    const ModelJob j = job(i);
    models.push_back(j.label);
    settings[j.label] = {{"training", j.key.train}, {"evaluation", j.key.eval}};
  }
  return join_run(launch, training.out_dir, training.batch, {{"command", command}, {"models", models}, {"settings", settings}});
}

bool run_models(const RunRanks& run, std::size_t count, const RunHooks& hooks) {
  World* const world = run.world.get();
  if (distributes_models(run.launch)) {
    const auto outcomes = share_jobs(*world, count, [&](std::size_t i) {
      const auto model = run_model(i, nullptr, hooks);
      return model ? model->rows.dump() : std::string(kIncomplete);
    });
    bool complete = true;
    for (std::size_t i = 0; i < outcomes.size(); ++i) {  // rank 0 only: the others have none
      if (outcomes[i] == kIncomplete) {
        complete = false;
        continue;
      }
      hooks.collect(i, nlohmann::json::parse(outcomes[i]), hooks.job(i).label + " (from its rank)");
    }
    return complete;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const auto model = run_model(i, world, hooks);
    if (!model) return false;
    if (!model->source.empty()) hooks.collect(i, model->rows, model->source);
  }
  return true;
}

}  // namespace posenc::lab
