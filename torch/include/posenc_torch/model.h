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

#include <memory>
#include <string>
#include <vector>

#include "posenc_torch/distance_bias.h"
#include "posenc_torch/fused_attention.h"
#include "posenc_torch/model_config.h"
#include "posenc_torch/polar.h"
#include "posenc_torch/positional.h"
#include "posenc_torch/rope.h"

namespace posenc::torch_layer {

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
  std::vector<torch::Tensor> gate;  // FoX: per layer the cumulative gate c [B, H, T] of the keys
  // Added to the position of every token of the next forward: a sink cache that does not
  // re-rotate (sink_cache.h) keeps each new token at its place in the stream after evictions.
  std::int64_t position_offset = 0;
  // Keys cached rotated with xPos's scales (hf_stale_keys and the xpos scheme): a key's scale is
  // its position's, so a sink cache cannot move it to another slot by re-rotating (sink_cache.h).
  bool xpos_keys = false;
  std::int64_t length() const { return mask.defined() ? mask.size(1) : 0; }
  void clear() { *this = KVCache{{}, {}, {}, {}, {}, rebuilds, hf_stale_keys, {}, 0, false}; }
};

// Transformer-XL memory: per layer, the last xl_mem_len inputs it saw, [B, M, d_model], detached.
struct XLMemory {
  std::vector<torch::Tensor> layers;
  std::int64_t length() const { return layers.empty() ? 0 : layers[0].size(1); }
  void clear() { layers.clear(); }
};

// What every layer of one forward shares, built once by TransformerLM::forward.
struct ForwardContext {
  torch::Tensor q_positions;  // [B, S]
  torch::Tensor k_positions;  // [B, T] (T = cached + S)
  torch::Tensor key_mask;     // [B, T] bool
  std::int64_t past = 0;
  const RopeSpec* rope = nullptr;   // RoPE's frequencies and table (both paths)
  bool cache_rotated_keys = false;  // KVCache::hf_stale_keys
  // The fused kernel (core attention.h, differentiable through fused_attention.h) instead of
  // scores + bias + mask + softmax: its parameters for this forward, and T5's table (layer 0's
  // parameter, shared by every layer). Null: the materialising libtorch path.
  std::shared_ptr<const AttentionSpec> fused;
  torch::Tensor t5_table;
  // Kerple's or Sandwich's table over distances [H, L] (L = the largest position + 1), shared by
  // every layer: the fused kernel's input, and the source of `bias` on the materialising path.
  torch::Tensor distance_table;
  // The materialising path: ALiBi's or T5's bias [B or 1, H, S, T] (undefined: none), and the
  // queries per block at inference (TransformerLM::attention_query_rows).
  torch::Tensor bias;
  std::int64_t query_rows = 0;
  // FIRE's bias (the model's one module, shared by every layer), computed per query block on the
  // materialising path: it depends on the query position as well as the distance.
  FireBiasImpl* fire = nullptr;
  // rope-learned: the model's trained frequencies [head_dim / 2] (q and k rotated by rope_native,
  // rope_op.h, before either path attends without positions); pope: the model's PolarEmbedding
  // (q and k mapped after grouped keys are repeated; the materialising path).
  torch::Tensor learned_inv_freq;
  const PolarEmbeddingImpl* polar = nullptr;
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);
  // x [B, S, d_model]; with a cache layer (k, v), the new keys and values are appended to it.
  // memory [B, M, d_model] (Transformer-XL, already normalised): extra keys and values before x.
  // cache_gate: FoX's cumulative gate of the cached keys, [B, H, T], extended by this call's.
  torch::Tensor forward(const torch::Tensor& x, const ForwardContext& ctx, torch::Tensor* cache_k, torch::Tensor* cache_v,
                        const torch::Tensor& memory = {}, torch::Tensor* cache_gate = nullptr);

  // The attention probabilities of the last forward ([B, H, S, T]), when recording is on
  // (which keeps the materialising path: the fused kernel never forms them).
  bool record = false;
  torch::Tensor last_weights;

 private:
  // Scores, masks, softmax and values for queries q0 .. q0 + rows of q [B, H, S, Dh] against k, v
  // [B, H, T, Dh] (RoPE applied, heads repeated): [B, rows, H * Dh], before wo.
  // gate: FoX's c [B, H, T] of every key (queries read theirs at past + i); undefined otherwise.
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const ForwardContext& ctx,
                       std::int64_t q0, std::int64_t rows, const torch::Tensor& gate);
  ModelConfig config_;
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  torch::nn::Dropout dropout{nullptr};
  XLRelativePosition xl{nullptr};
  DebertaRelative deberta{nullptr};
  ForgetGate fox{nullptr};  // FoX: this layer's forget gate
  ShawRelative shaw{nullptr};  // Shaw's relative keys and values of this layer
  Cope cope{nullptr};          // CoPE's position embeddings of this layer
};
TORCH_MODULE(Attention);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& config);
  // memory: this layer's inputs from earlier segments (Transformer-XL), [B, M, d_model].
  torch::Tensor forward(const torch::Tensor& x, const ForwardContext& ctx, torch::Tensor* cache_k, torch::Tensor* cache_v,
                        const torch::Tensor& memory = {}, torch::Tensor* cache_gate = nullptr);
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
  // cache grows by S. rope_override: rotary embeddings used instead of the model's own `rotary`
  // (another schedule at inference: the lab's length extensions); it keeps its runtime state
  // (dynamic NTK's cache) across calls, so pass the same one to every step of a decode.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& attention_mask = {}, KVCache* cache = nullptr,
                        RotaryEmbeddingImpl* rope_override = nullptr);

  // Transformer-XL's segment recurrence (Dai et al. 2019, section 3.2): tokens [B, S] are the
  // next segment of each row's stream; every layer attends to its own inputs from the previous
  // segments (the last xl_mem_len of them, in memory, gradients stopped) and to the segment,
  // causally, with relative distances spanning both. memory is updated. A token's influence
  // reaches n_layers * xl_mem_len back (each layer looks xl_mem_len further). Needs scheme xl
  // and xl_mem_len >= 1; with an empty memory it equals forward(tokens).
  torch::Tensor forward_segment(const torch::Tensor& tokens, XLMemory& memory);

  // Positions of the new tokens: past + arange(S), or from the mask.
  torch::Tensor positions_for(const torch::Tensor& full_mask, std::int64_t new_tokens) const;

  // tokens [B, S] at the given positions [B, S] (int64, each row strictly increasing, >= 0; a
  // learned table's must be below its length) instead of 0 .. S-1: no cache, no padding. Every
  // scheme reads them as forward reads its own (absolute tables, RoPE's angles, the distance
  // biases' i - j); Ruoss et al. 2023's randomized positions train with a sorted random subset of
  // a range longer than S. Not for Transformer-XL's segments (forward_segment), and not with a
  // remap.
  torch::Tensor forward_at(const torch::Tensor& tokens, const torch::Tensor& positions);

  const ModelConfig& config() const { return config_; }
  // Inference (eval mode, no grad, float32 on the CPU) through the fused kernel for NoPE,
  // absolute, RoPE, ALiBi and T5 models; false: always the materialising libtorch path (for
  // comparisons). The two agree on every query that sees a key; a query that sees none (a
  // left-pad position) gets zeros from the kernel and an average of every value from libtorch.
  // Both scale q.k by 1/sqrt(head_dim) before T5's bias (HF's T5 does not scale: a table trained
  // here is not an HF table).
  bool use_fused_attention = true;
  // Training through the fused kernel too (fused_attention.h: its backward pass recomputes the
  // softmax from each row's log-sum-exp), so memory grows with S x D, not S x T. Off by default:
  // the lab's tables come from the libtorch path, and the two round differently, which training
  // amplifies. Not with dropout > 0 in training mode (the kernel drops no attention weights).
  bool fused_training = false;
  // The materialising path (XL, DeBERTa, or use_fused_attention off) at inference without recorded
  // weights scores the queries in blocks of this many rows, so no [B, H, S, T] score tensor is
  // formed (ALiBi's and T5's bias on this path is still built whole, then sliced per block);
  // a causal block also drops the keys after its last query's. 0: as many rows as keep one
  // block's scores near model.cc's kQueryBlockScores. Training and `record`: one block.
  std::int64_t attention_query_rows = 0;
  // An inference-time remap of RoPE's query-key distance (core attention.h's PositionRemap:
  // Self-Extend, ReRoPE, leaky ReRoPE), for a RoPE model on the fused kernel: forward in eval mode
  // without gradients, with or without a KV cache (whose keys stay unrotated). kNone: plain. A
  // forward that would take another path (gradients, recorded weights, another scheme,
  // hf_stale_keys) is an Error naming it; the remap has no backward pass.
  PositionRemap remap;
  RotaryEmbedding rotary{nullptr};
  std::vector<Block> blocks;

 private:
  ModelConfig config_;
  torch::nn::Embedding embed{nullptr};
  SinusoidalPositionalEncoding sinusoidal{nullptr};
  LearnedPositionalEmbedding learned{nullptr};
  ALiBiBias alibi{nullptr};
  T5RelativeBias t5{nullptr};
  KerpleBias kerple{nullptr};      // shared by every layer, as T5's table
  SandwichBias sandwich{nullptr};
  DynamicPositionBias dpb{nullptr};  // width d_model / 4 (x-transformers'), depth 2
  FireBias fire{nullptr};            // width 32 (the paper's), shared by every layer
  torch::Tensor rope_inv_freq;       // rope-learned: a parameter, from the config's RoPE schedule
  PolarEmbedding polar{nullptr};     // pope: one delta [H, head_dim] for every layer (x-transformers')
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
  torch::nn::Dropout dropout{nullptr};

  // The fused kernel's parameters for one forward (ctx's masks, positions and RoPE; ALiBi's
  // slopes from its module's buffer; T5's buckets).
  std::shared_ptr<const AttentionSpec> fused_spec(const ForwardContext& ctx) const;
  // How the distance table is indexed: by Delta (DPB) or by |Delta| (Kerple, Sandwich).
  DistanceSide side() const { return dpb ? DistanceSide::kSigned : DistanceSide::kAbsolute; }
  // forward_at's positions for the forward it runs (undefined: forward's own).
  torch::Tensor given_positions_;
};
TORCH_MODULE(TransformerLM);

// Whether the fused kernel covers this model's attention (NoPE, absolute, RoPE, ALiBi, T5, Kerple,
// Sandwich, DPB, FoX, and FIRE for the forwards whose queries are all below its threshold L; not
// XL, DeBERTa, Shaw or CoPE, whose position terms depend on the content).
bool fused_attention_covers(const ModelConfig& config);

// The config and the weights in one file (torch serialization), written whole (posenc/file_io.h:
// a failed write is an Error naming the file, the previous file intact); load rebuilds the model.
void save_model(TransformerLM& model, const std::string& path);
TransformerLM load_model(const std::string& path);

}  // namespace posenc::torch_layer
