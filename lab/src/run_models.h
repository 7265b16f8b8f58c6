// One lab run, written once for every command (extrapolate, sort, passkey): for each model of the
// plan, its cached rows, or trained (data parallel over the ranks when there are several), saved,
// evaluated on rank 0 and cached; or, with --distribute models, whole models handed to the ranks
// (distributed_queue.h). The commands say what is theirs through RunHooks: the cache file and
// keys of a model, how it trains, how it is scored, and what its rows become.
//
// Rank 0 alone reads and writes the files and tells the other ranks what it found and when it is
// done (the keys of run_keys.h): a model it has rows for is skipped by every rank; a model it
// trains is trained by every rank alike; the others then wait until rank 0 has evaluated it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "distributed_run.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/run_settings.h"
#include "posenc_torch/model.h"

namespace posenc::lab {

// Where one model's rows are kept and what they depend on.
struct ModelJob {
  std::string label;        // names the model in messages ("rope", "sort rope")
  std::string result_path;  // its rows with their keys (result_cache.h)
  CacheKey key;
  std::string model_path;   // the trained model is saved here (save_model_file); empty: not saved
  // Same training key, other evaluation key, and a model saved at model_path: evaluate that model
  // again instead of resuming its training (lab sort).
  bool evaluates_saved_model = false;
};

struct RunHooks {
  std::function<ModelJob(std::size_t i)> job;
  // Trains model i from its seed (or resumes it from its checkpoint); world non-null: every rank
  // calls this alike, data parallel. *rows: rows that training itself yields (passkey's probe
  // points), the start of the model's rows. Null when the step budget ran out first.
  std::function<torch_layer::TransformerLM(std::size_t i, World* world, nlohmann::json* rows)> train;
  // Rank 0: appends the rows of trained model i to *rows (a JSON array, what the cache keeps);
  // false when the step budget ran out first (a fine-tune).
  std::function<bool(std::size_t i, torch_layer::TransformerLM& model, nlohmann::json* rows)> evaluate;
  // Rank 0, in plan order: model i's rows; source names where they were read (for errors).
  std::function<void(std::size_t i, const nlohmann::json& rows, const std::string& source)> collect;
};

// The ranks of the run (distributed_run.h's join_run, after torch takes training.threads
// threads: 0 is one). Call once the settings and the inputs are known good. The run's plan,
// which every rank must share (join_run): command, and models 0 .. count-1 of job (RunHooks's
// job), each with its training and evaluation keys, so ranks started with other settings stop
// before training, naming the setting and both values.
RunRanks open_run(const TrainSettings& training, const LaunchConfig& launch, const std::string& command, std::size_t count,
                  const std::function<ModelJob(std::size_t i)>& job);

// Runs models 0 .. count-1 of the plan; false when the step budget ran out before the last
// one. Without --distribute models the run stops at the first model the budget cut short.
bool run_models(const RunRanks& run, std::size_t count, const RunHooks& hooks);

}  // namespace posenc::lab
