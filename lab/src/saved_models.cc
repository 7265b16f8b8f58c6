// What the lab's saved files hold (saved_models.h): read through the checkpoint and model readers
// (checkpoint.h), which check every weight and name the file in their errors.
#include "posenc_lab/saved_models.h"

#include <torch/torch.h>

#include <filesystem>

#include "checkpoint.h"
#include "posenc/error.h"
#include "posenc_torch/model.h"

namespace posenc::lab {

std::vector<double> training_losses(const std::string& checkpoint) {
  if (!std::filesystem::exists(checkpoint)) throw Error("no checkpoint " + checkpoint + ": that model was not trained there");
  return read_checkpoint_header(checkpoint).losses;
}

LearnedPositions learned_positions(const std::string& model_path) {
  torch_layer::TransformerLM model = load_model_file(model_path);
  const auto params = model->named_parameters();
  const torch::Tensor* weight = params.find("learned.weight");  // LearnedPositionalEmbedding's table
  if (!weight)
    throw Error(model_path + " has no learned position table: its scheme is '" + to_string(model->config().scheme) +
                "' (a model of `--schemes learned` has one)");
  const torch::Tensor w = weight->detach().to(torch::kFloat64).contiguous();  // [rows, dim]
  LearnedPositions t;
  t.rows = static_cast<int>(w.size(0));
  t.dim = static_cast<int>(w.size(1));
  t.values.assign(w.data_ptr<double>(), w.data_ptr<double>() + w.numel());
  return t;
}

}  // namespace posenc::lab
