// Scoring a trained character-level TransformerLM on the validation text (`lab extrapolate`):
// one-pass windows, token-by-token decoding with HF's dynamic-NTK runtime rule, and the RoPE
// extension each row names. Rows whose score is not finite are never marked available.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "model_plan.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_torch/model.h"

namespace posenc::lab {

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
// (Transformer-XL with memory: in segments of train_len). rope: the schedule to score with
// instead of the model's own (TransformerLMImpl::forward's rope_override), or null.
Score score_windows(torch_layer::TransformerLM& model, const Corpus& corpus, int len, int train_len, long max_tokens,
                    torch_layer::RotaryEmbeddingImpl* rope = nullptr);

// ext: the row's extension label (an extension's name, "dynamic-incremental", "pi+finetune").
ResultRow make_row(const ModelPlan& p, const std::string& ext, int len, const Score& s, const std::string& note = "");

// The RoPE schedule of extension ext at eval length len for a model trained at train_len.
RopeParams extension_params(const torch_layer::ModelConfig& m, RopeExtension ext, int train_len, int len);
// Rotary embeddings with that schedule, fresh (no runtime state yet), for forward's rope_override.
torch_layer::RotaryEmbedding extension_rope(const torch_layer::ModelConfig& m, RopeExtension ext, int train_len, int len);

// One scored variant of an extension: a schedule (PI, NTK, ...), or a remap at one of its
// settings (RemapSettings), named in the rows with them: "self-extend-g4-w16", "rerope-w32".
struct ExtensionVariant {
  RopeExtension extension = RopeExtension::kNone;
  std::string label;  // the rows' extension
  int group = 1;      // Self-Extend's G
  int window = 0;     // a remap's w
};
// The variants of extensions in order: one per schedule extension, one per setting of a remap.
std::vector<ExtensionVariant> extension_variants(const std::vector<RopeExtension>& extensions, const RemapSettings& remaps,
                                                 int train_len);
// The remap of a variant at eval length len (kNone for a schedule extension).
PositionRemap extension_remap(const ExtensionVariant& v, int train_len, int len);

// model->remap for one scope (a variant at one length), back to none when it ends.
struct ScopedRemap {
  ScopedRemap(torch_layer::TransformerLM& m, const PositionRemap& r) : model(m) { model->remap = r; }
  ~ScopedRemap() { model->remap = {}; }
  ScopedRemap(const ScopedRemap&) = delete;
  ScopedRemap& operator=(const ScopedRemap&) = delete;
  torch_layer::TransformerLM& model;
};

// Every row of one trained model: each eval length, and for RoPE each extension.
std::vector<ResultRow> evaluate(torch_layer::TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c,
                                const Corpus& corpus);

}  // namespace posenc::lab
