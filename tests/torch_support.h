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
  // CoPE's position embeddings start at zero (the paper's), which would make its term vanish
  // in every comparison: drawn from N(0, 1) here so its gates and interpolation count.
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters())
    if (p.key().find("cope.pos_emb") != std::string::npos) p.value().normal_();
  model->eval();
  return model;
}

}  // namespace posenc::torch_layer::testing
