// Scoring a trained model on the passkey grid and on plain text, position by position (torch).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "posenc_lab/corpus.h"
#include "posenc_lab/passkey_task.h"
#include "posenc_torch/model.h"

namespace posenc::lab {

struct PasskeyScore {
  double accuracy = 0;  // exact match: every answer digit right
  double logprob = 0;   // mean natural-log probability of an answer digit (teacher-forced)
  int samples = 0;
};

// Scores examples of one length from their logits [N, length, vocab] (row i: examples[i].tokens
// [0, length) as input). Answer digit j (token answer_at + j) is predicted at position
// answer_at + j - 1. Greedy decoding writes the whole answer exactly when the argmax at each of
// those positions, given the right digits before it, is the right digit; so one teacher-forced
// pass gives both the log-probabilities and greedy exact match.
PasskeyScore score_answers(const torch::Tensor& logits, const std::vector<PasskeyExample>& examples);

// One grid cell through the model (eval mode, no grad), in groups that keep ~16k tokens per
// forward (the fused attention kernel never forms the length x length scores). rope: the
// schedule to score with instead of the model's own (forward's rope_override), or null; so for
// position_bits. scored: called after each group with the tokens it scored (progress inside a
// cell: 4096 samples at 32x the training length take minutes), or empty.
PasskeyScore score_cell(torch_layer::TransformerLM& model, const std::vector<PasskeyExample>& cell,
                        torch_layer::RotaryEmbeddingImpl* rope = nullptr,
                        const std::function<void(std::int64_t tokens)>& scored = {});

// Bits per character at each position [0, len) of non-overlapping windows over the first
// max_tokens tokens of text, averaged over windows (at least one window).
std::vector<double> position_bits(torch_layer::TransformerLM& model, const std::vector<std::int64_t>& text, int len, long max_tokens,
                                  torch_layer::RotaryEmbeddingImpl* rope = nullptr);

}  // namespace posenc::lab
