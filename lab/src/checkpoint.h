// Checkpoints and model files of the lab (every command; a checkpoint holds any torch module: a
// TransformerLM, or `lab vision`'s ViT).
//
// <model>.ckpt: one header line "posenc-lab-checkpoint 1 <payload bytes> <FNV-1a 64 hex>\n", then a
// torch archive holding the training key (JSON text), the step, the model and the optimizer. On
// load the size and checksum are verified and every weight must be finite, so a truncated,
// overwritten or diverged checkpoint is an Error naming the file and the fix, never a run that
// trains on from garbage. Writes go through file_io (temp file, then rename).
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "posenc_torch/model.h"

namespace posenc::lab {

// losses: the mean training loss of every step so far (kept so a resumed run reports the whole curve).
void save_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer, long step,
                     const nlohmann::json& train_key, const std::vector<double>& losses = {});

// What a checkpoint holds, read without loading weights (throws Error naming path when corrupt).
struct CheckpointHeader {
  long step = 0;
  nlohmann::json train_key;
  std::vector<double> losses;  // empty in checkpoints written before the loss curve was kept
};
CheckpointHeader read_checkpoint_header(const std::string& path);

// Loads the weights (and the optimizer state when optimizer is non-null); returns the step.
// Throws Error naming path when the training key differs, the file is corrupt, or a weight is
// not finite.
long load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                     const nlohmann::json& train_key);
// The same from the bytes of a checkpoint file (read on one rank, handed to all); path names it
// in errors. Returns the header (step, key and loss curve).
CheckpointHeader load_checkpoint_bytes(const std::string& path, const std::string& bytes, torch::nn::Module& model,
                                       torch::optim::Optimizer* optimizer, const nlohmann::json& train_key);
// The whole file, bounded (a checkpoint is at most a few GB).
std::string read_checkpoint_file(const std::string& path);

// The file torch_layer::save_model writes, through write_file_atomic: errors name path and the
// reason, no .tmp is left (load_model_file reads it back; the lab tests check the round trip).
void save_model_file(torch_layer::TransformerLM& model, const std::string& path);
// torch_layer::load_model with every weight checked finite; errors name path and the fix.
torch_layer::TransformerLM load_model_file(const std::string& path);

// Throws Error naming what when a weight of model is NaN or infinite.
void check_finite_weights(torch::nn::Module& model, const std::string& what);

}  // namespace posenc::lab
