// Positional modules for libtorch: absolute encodings (added to, concatenated with or multiplied
// into the token embeddings by the model) and the biases attention adds to its scores.
//
// Fixed tables are buffers, never parameters (a table registered as a Parameter gets trained);
// nothing has a max_len ceiling except the learned table, whose end is an error.
// Positions are int64 [B, S]; biases come out as [B, heads, Sq, Sk].
#pragma once

#include <torch/torch.h>

#include "posenc/position_grid.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"

namespace posenc::torch_layer {

// Vaswani sinusoids for any positions: [B, S] int64 -> [B, S, dim] float32, the core's table
// (sinusoidal.h: computed in double, no max_len). No parameters, no buffers. Positions are read
// on the host: positions on another device (a GPU's) are copied to it, and the table returned on
// their device.
class SinusoidalPositionalEncodingImpl : public torch::nn::Module {
 public:
  explicit SinusoidalPositionalEncodingImpl(int dim, SinusoidalLayout layout = SinusoidalLayout::kInterleaved,
                                            double base = 10000.0);
  torch::Tensor forward(const torch::Tensor& positions);
  int dim() const { return params_.dim; }

 private:
  SinusoidalParams params_;
};
TORCH_MODULE(SinusoidalPositionalEncoding);

// A trainable table [num_positions + offset, dim], N(0, 0.02) at init (GPT-2); BART/OPT use offset 2.
class LearnedPositionalEmbeddingImpl : public torch::nn::Module {
 public:
  LearnedPositionalEmbeddingImpl(int num_positions, int dim, int offset = 0);
  torch::Tensor forward(const torch::Tensor& positions);  // throws posenc::Error past the table
  torch::Tensor weight;
  int num_positions() const { return num_positions_; }

 private:
  int num_positions_, offset_;
};
TORCH_MODULE(LearnedPositionalEmbedding);

// A vision tower's learned 2-D table [rows, cols, dim] resized to an image's rows' x cols' as its HF
// code does it (position_grid.h: bicubic, bilinear_antialias, grid_sample_bicubic, Idefics3's
// bucket rows): the core's numbers as float32 [rows', cols', dim] on the CPU. The reference values,
// without a gradient: a table that requires grad is refused (train through torch's F.interpolate).
torch::Tensor resize_position_grid(const torch::Tensor& table, int rows, int cols, GridResize mode);

// ALiBi: -slope_h * (q - k) (causal) or -slope_h * |q - k| (symmetric). No parameters.
class ALiBiBiasImpl : public torch::nn::Module {
 public:
  explicit ALiBiBiasImpl(int num_heads, bool symmetric = false);
  torch::Tensor forward(const torch::Tensor& q_positions, const torch::Tensor& k_positions);
  torch::Tensor slopes;  // buffer [H]

 private:
  bool symmetric_;
};
TORCH_MODULE(ALiBiBias);

// T5: a learned scalar per (bucket of key - query, head).
class T5RelativeBiasImpl : public torch::nn::Module {
 public:
  T5RelativeBiasImpl(int num_heads, const T5BucketParams& buckets);
  torch::Tensor forward(const torch::Tensor& q_positions, const torch::Tensor& k_positions);
  torch::Tensor table;  // parameter [num_buckets, H]

 private:
  T5BucketParams buckets_;
};
TORCH_MODULE(T5RelativeBias);

// Transformer-XL's positional half of the score: u, v biases and the projected relative
// sinusoid R. content_bias() is added to q for the AC term; position_scores() is BD.
class XLRelativePositionImpl : public torch::nn::Module {
 public:
  // bidirectional: future keys get their own (negative) distances; otherwise they share
  // distance 0 (a causal model masks them).
  XLRelativePositionImpl(int d_model, int num_heads, int head_dim, int clamp_len = 0, bool bidirectional = false);
  torch::Tensor content_bias() const { return u; }  // [H, Dh]
  // q [B, H, Sq, Dh]: ((q_i + v) . r_{q_i - k_j}) for every key, [B, H, Sq, Sk], distances
  // clamped to +-clamp_len when > 0.
  torch::Tensor position_scores(const torch::Tensor& q, const torch::Tensor& q_positions, const torch::Tensor& k_positions);
  torch::Tensor u, v;
  torch::nn::Linear r_net{nullptr};

 private:
  int d_model_, num_heads_, head_dim_, clamp_len_;
  bool bidirectional_;
};
TORCH_MODULE(XLRelativePosition);

// DeBERTa's disentangled terms: content->position and position->content, with log buckets.
class DebertaRelativeImpl : public torch::nn::Module {
 public:
  DebertaRelativeImpl(int d_model, int num_heads, int head_dim, int position_buckets = 256, int max_relative_positions = 512);
  // q, k [B, H, S, Dh] (content projections): c2p + p2c, [B, H, Sq, Sk]; callers scale all three
  // terms (with c2c) by 1/sqrt(3 Dh).
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& q_positions,
                        const torch::Tensor& k_positions);
  torch::Tensor rel_embeddings;  // parameter [2 span, d_model]
  torch::nn::Linear pos_key{nullptr}, pos_query{nullptr};

 private:
  int num_heads_, head_dim_, position_buckets_, max_relative_positions_, span_;
};
TORCH_MODULE(DebertaRelative);

// Shaw et al. 2018's relative keys and values, one table pair per layer shared by its heads (HF
// BERT's distance_embedding, relative_key; Python's posenc.nn.ShawRelative): row(i, j) =
// clip(q_i - k_j, +-M) + M of rel_k, rel_v [2M + 1, Dh]. Both terms go through the 2M + 1 rows
// (q . rel_k^T gathered; the weights summed per row, times rel_v), never a [Sq, Sk, Dh] tensor.
class ShawRelativeImpl : public torch::nn::Module {
 public:
  ShawRelativeImpl(int head_dim, int max_relative);
  torch::Tensor rows(const torch::Tensor& q_positions, const torch::Tensor& k_positions) const;  // [B, Sq, Sk]
  // q [B, H, Sq, Dh] -> q_i . rel_k[row(i, j)], [B, H, Sq, Sk] (added to q.k before scaling)
  torch::Tensor key_scores(const torch::Tensor& q, const torch::Tensor& rows) const;
  // weights [B, H, Sq, Sk] -> sum_j w_ij rel_v[row(i, j)], [B, H, Sq, Dh] (added to w v)
  torch::Tensor value_term(const torch::Tensor& weights, const torch::Tensor& rows) const;
  torch::Tensor rel_k, rel_v;  // parameters [2M + 1, Dh]

 private:
  int max_relative_;
};
TORCH_MODULE(ShawRelative);

// CoPE, contextual positions (Golovneva et al. 2024; the paper's code, facebookresearch/RAM
// projects/cope; Python's posenc.nn.CoPE): with gates g = sigmoid(scores) (0 on blocked keys),
// p_ij = min(sum_{t >= j} g_it, max_pos - 1) and z_i = q_i . pos_emb^T, the term added to the
// scaled scores is z_i[ceil p] (p - floor p) + z_i[floor p] (1 - p + floor p). pos_emb
// [max_pos, Dh] starts at zero (the paper's), one per layer.
class CopeImpl : public torch::nn::Module {
 public:
  CopeImpl(int head_dim, int max_pos);
  // q [B, H, Sq, Dh], scores [B, H, Sq, Sk] (scaled), blocked [B or 1, 1 or H, Sq, Sk] -> [B, H, Sq, Sk]
  torch::Tensor term(const torch::Tensor& q, const torch::Tensor& scores, const torch::Tensor& blocked) const;
  torch::Tensor pos_emb;  // parameter [max_pos, Dh]

 private:
  int max_pos_;
};
TORCH_MODULE(Cope);

}  // namespace posenc::torch_layer
