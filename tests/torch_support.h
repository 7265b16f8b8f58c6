// What the libtorch-layer tests share: a small TransformerLM config (two layers, GQA 4:2, every
// scheme's tables small enough for a test) — one definition, so the tests agree on it — and a
// seeded model in eval mode.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "posenc_torch/model_config.h"
#include "posenc_torch/model.h"

namespace posenc::torch_layer::testing {

inline ModelConfig small_model(Scheme scheme, int vocab_size = 50) {
  ModelConfig c;
  c.vocab_size = vocab_size;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.scheme = scheme;
  c.learned_positions = 64;
  c.deberta_buckets = 8;
  c.deberta_max_relative = 32;
  return c;
}

// A TransformerLM of `config` initialised after torch::manual_seed(seed), in eval mode.
inline TransformerLM eval_model(const ModelConfig& config, std::uint64_t seed) {
  torch::manual_seed(seed);
  TransformerLM model(config);
  model->eval();
  return model;
}

}  // namespace posenc::torch_layer::testing
