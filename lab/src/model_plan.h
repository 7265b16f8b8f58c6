// One model of a lab run before it is trained: its name, its ModelConfig and seed, and the one
// builder of a lab model's config from its scheme, shape, training length and vocabulary (every
// lab command's). No libtorch here: planning and checking settings need none.
#pragma once

#include <algorithm>
#include <string>

#include "posenc/schemes.h"
#include "posenc_lab/run_settings.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {

// One model to train: its name, scheme and settings.
struct ModelPlan {
  std::string name;
  torch_layer::ModelConfig config;
  int seed = 0;
  bool variant = false;  // a base-sweep or fusion variant, not its scheme's plain model
};

// The relative schemes' settings, which the commands choose differently (each keeps the numbers
// its results were made with): lab extrapolate gives DeBERTa 32 buckets and Transformer-XL its
// segment memory; lab sort and lab passkey keep ModelConfig's 64 buckets and no memory.
struct RelativeSettings {
  int deberta_buckets = 64;
  // Transformer-XL with its segment recurrence: memory as long as a training segment (the
  // paper's mem_len = tgt_len), so its reach is n_layers x train_len tokens.
  bool xl_memory = false;
};

// The config of a lab model: shape, scheme, a learned table exactly as long as a training
// sequence (train_len tokens), T5 with 32 causal buckets up to distance 128, DeBERTa's relative
// distances up to 256, and `vocab` ids (the corpus's, the task's).
torch_layer::ModelConfig model_config(Scheme scheme, const ModelShape& shape, int train_len, int vocab,
                                      const RelativeSettings& relative = {});

// The learned table's length for a model that reads `tokens` positions in one training forward:
// the randomized positions' range when it is longer (TrainSettings::randomize_positions).
inline int position_range(const TrainSettings& t, int tokens) { return std::max(tokens, t.randomize_positions); }

// What a run with randomized positions did, for its results' notes.
inline std::string randomized_positions_note(const TrainSettings& t) {
  return "randomized positions (Ruoss et al. 2023): each training row read at a sorted random subset of 0.." +
         std::to_string(t.randomize_positions - 1) + " (learned tables cover them); evaluated at 0..len-1";
}

}  // namespace posenc::lab
