// Scoring a trained character-level TransformerLM on the validation text (`lab extrapolate`):
// one-pass windows, token-by-token decoding with HF's dynamic-NTK runtime rule, and the RoPE
// extension each row names. Rows whose score is not finite are never marked available.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_torch/model.h"

namespace posenc::lab {

// One model to train: its name, scheme and settings.
struct ModelPlan {
  std::string name;
  torch_layer::ModelConfig config;
  int seed = 0;
  bool variant = false;  // a base-sweep or fusion variant, not its scheme's plain model
};

struct Score {
  double nll = 0, nll_beyond = 0;
  long tokens = 0, tokens_beyond = 0;
};

// Transformer-XL with segment memory: the model reads text in segments (lab: of the training
// length), each layer attending to its own states of the previous segment (Dai et al. 2019).
bool xl_memory(torch_layer::TransformerLM& model);
// Logits of tokens [B, L] read segment by segment with a fresh memory, [B, L, vocab].
torch::Tensor forward_in_segments(torch_layer::TransformerLM& model, const torch::Tensor& tokens, int segment);

// Non-overlapping windows of len tokens over the first max_tokens validation tokens, one pass each
// (Transformer-XL with memory: in segments of train_len).
Score score_windows(torch_layer::TransformerLM& model, const Corpus& corpus, int len, int train_len, long max_tokens);

ResultRow make_row(const ModelPlan& p, const std::string& ext, int len, const Score& s, const std::string& note = "");

// The RoPE schedule of extension ext at eval length len for a model trained at train_len
// (throws Error naming ext when it is not none, pi, ntk, dynamic or yarn).
RopeParams extension_params(const torch_layer::ModelConfig& m, const std::string& ext, int train_len, int len);

// Every row of one trained model: each eval length, and for RoPE each extension.
std::vector<ResultRow> evaluate(torch_layer::TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c,
                                const Corpus& corpus);

}  // namespace posenc::lab
