// What the lab's saved files hold, for pictures and the tour (`posenc plot heatmap --model`,
// `posenc tour`): a model's training curve (its checkpoint) and a learned model's position table
// (its .pt). Plain C++ types: callers need not include <torch/torch.h>.
#pragma once

#include <string>
#include <vector>

namespace posenc::lab {

// The mean training loss (natural log, per token) of every step of the model trained into
// `checkpoint` (<out>/<model>.ckpt of extrapolate, passkey). An Error names a missing file.
std::vector<double> training_losses(const std::string& checkpoint);

// A learned absolute table (GPT-2's wpe): rows positions of dim values, [rows][dim] row-major.
struct LearnedPositions {
  int rows = 0, dim = 0;
  std::vector<double> values;
};
// The trained table of a model the lab saved (<out>/<model>.pt, scheme learned); a model of
// another scheme is an Error naming its scheme.
LearnedPositions learned_positions(const std::string& model_path);

}  // namespace posenc::lab
