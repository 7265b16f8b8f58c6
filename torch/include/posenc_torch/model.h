// Attention with every positional scheme, a KV cache whose decode steps continue positions, and
// TransformerLM: a decoder-only, pre-LayerNorm language model whose positional scheme and the
// fusion of position with content are options.
//
// Decoding with a KV cache gives exactly the logits of a full forward over the same prefix, for
// every scheme. Schedules that change with length (dynamic NTK past its reference length,
// LongRoPE's switch at original_max_position_embeddings + 1) change the hidden states of *every*
// earlier token from the second layer on, so no cache of keys and values survives the change:
// when the schedule differs from the one the cache was built with, the model re-runs the whole
// prefix into a fresh cache (HF's Phi-3 drops its cache at the LongRoPE switch for the same
// reason; with dynamic NTK, HF keeps the stale cache and its decode drifts from its prefill).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "posenc/rope_params.h"
#include "posenc/schemes.h"
#include "posenc/t5_bias.h"
#include "posenc_torch/positional.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {

// How an absolute encoding meets the token embedding (none for relative and rotary schemes).
enum class Fusion {
  kAdd,       // x + PE (Vaswani; the norm)
  kConcat,    // [x_tokens (d_model - pe_dim) | PE (pe_dim)]
  kMultiply,  // x * (1 + PE): a position-dependent gain, the identity where PE = 0
};
const char* to_string(Fusion f);

struct ModelConfig {
  int vocab_size = 128;
  int d_model = 128;
  int n_layers = 3;
  int n_heads = 4;
  int n_kv_heads = 0;  // 0: n_heads (multi-head); fewer: grouped-query attention
  int d_ff = 0;        // 0: 4 d_model
  double dropout = 0.0;
  bool causal = true;
  bool embed_scale = false;  // multiply token embeddings by sqrt(d_model) (Vaswani)
  Scheme scheme = Scheme::kRope;
  Fusion fusion = Fusion::kAdd;
  int pe_dim = 0;  // concat: width of the positional part (0: d_model / 4)
  RopeParams rope;  // type, theta, scaling; head_dim is set from d_model / n_heads
  int learned_positions = 1024;
  T5BucketParams t5{32, 128, false};
  int deberta_buckets = 64, deberta_max_relative = 256;
  int xl_clamp_len = 0;

  int head_dim() const { return d_model / n_heads; }
  int kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  void validate() const;  // throws posenc::Error
};

// Keys (before RoPE), values, tokens and key mask of everything seen so far, and the RoPE
// frequencies the keys were computed with.
struct KVCache {
  std::vector<torch::Tensor> k, v;  // per layer [B, Hk, T, Dh]
  torch::Tensor mask;               // [B, T] bool, true = a real token
  torch::Tensor tokens;             // [B, T]: to rebuild after a schedule change
  std::vector<float> inv_freq;      // the schedule of the cached keys (RoPE only)
  int rebuilds = 0;                 // how many times a schedule change forced a re-run
  // HF's behaviour instead: keys are cached already rotated, with the schedule of the step
  // that computed them, and never rebuilt (decode then drifts from prefill when the schedule
  // changes, as it does in transformers with dynamic NTK). For measuring that drift.
  bool hf_stale_keys = false;
  std::int64_t length() const { return mask.defined() ? mask.size(1) : 0; }
  void clear() { *this = KVCache{{}, {}, {}, {}, {}, rebuilds, hf_stale_keys}; }
};

// What every layer of one forward shares.
struct ForwardContext {
  torch::Tensor q_positions;  // [B, S]
  torch::Tensor k_positions;  // [B, T] (T = cached + S)
  torch::Tensor key_mask;     // [B, T] bool
  std::int64_t past = 0;
  torch::Tensor bias;         // [B or 1, H, S, T] (ALiBi, T5) or undefined
  const RopeSpec* rope = nullptr;
  bool cache_rotated_keys = false;  // KVCache::hf_stale_keys
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);
  // x [B, S, d_model]; with a cache layer (k, v), the new keys and values are appended to it.
  torch::Tensor forward(const torch::Tensor& x, const ForwardContext& ctx, torch::Tensor* cache_k, torch::Tensor* cache_v);

  // The attention probabilities of the last forward ([B, H, S, T]), when recording is on.
  bool record = false;
  torch::Tensor last_weights;

 private:
  ModelConfig config_;
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  torch::nn::Dropout dropout{nullptr};
  XLRelativePosition xl{nullptr};
  DebertaRelative deberta{nullptr};
};
TORCH_MODULE(Attention);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const ForwardContext& ctx, torch::Tensor* cache_k, torch::Tensor* cache_v);
  Attention attention{nullptr};

 private:
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Block);

class TransformerLMImpl : public torch::nn::Module {
 public:
  explicit TransformerLMImpl(const ModelConfig& config);

  // tokens [B, S] int64 -> logits [B, S, vocab]. attention_mask [B, S] (1 real, 0 pad; left
  // padding) gives positions cumsum(mask) - 1. With a cache, positions continue from it and the
  // cache grows by S.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& attention_mask = {}, KVCache* cache = nullptr);

  // Positions of the new tokens: past + arange(S), or from the mask.
  torch::Tensor positions_for(const torch::Tensor& full_mask, std::int64_t new_tokens) const;

  const ModelConfig& config() const { return config_; }
  RotaryEmbedding rotary{nullptr};
  std::vector<Block> blocks;

 private:
  ModelConfig config_;
  torch::nn::Embedding embed{nullptr};
  SinusoidalPositionalEncoding sinusoidal{nullptr};
  LearnedPositionalEmbedding learned{nullptr};
  ALiBiBias alibi{nullptr};
  T5RelativeBias t5{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(TransformerLM);

// The config and the weights in one file (torch serialization); load rebuilds the model.
void save_model(TransformerLM& model, const std::string& path);
TransformerLM load_model(const std::string& path);

// ModelConfig <-> JSON text (the lab writes it beside its results).
std::string config_to_json(const ModelConfig& config);
ModelConfig config_from_json(const std::string& text);

}  // namespace posenc::torch_layer
