// DeepSeek-V4 (model_type deepseek_v4), private to the core library: what its config class and
// attention do with positions beyond the generic readers, each rule citing HF transformers
// c49429ed (configuration_deepseek_v4.py, modeling_deepseek_v4.py; v5.10.1+ semantics). Read by
// hf_config.cc (the two ropes), model_layers.cc (the layer types) and model_spec.cc (channels,
// attention kind, the CSA layers' indexer). The family's row (model_families.cc) sets
// FamilyQuirks::deepseek_v4.
//
// Two ropes, by label, not by layer type (DeepseekV4RotaryEmbedding.__init__ iterates
// config.rope_parameters' keys): "main" for sliding_attention layers, "compress" for the
// compressed_sparse_attention (CSA) and heavily_compressed_attention (HCA) layers, their
// compressors and CSA's indexer (DeepseekV4Attention.__init__: rope_layer_type). posenc keeps one
// LayerRope per layer type, each with its label's parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config_doc.h"
#include "posenc/model_spec.h"

namespace posenc::deepseek_v4 {

// DeepseekV4Config defaults: num_hidden_layers 43, head_dim 512, qk_rope_head_dim 64 (its
// default_partial_rotary_factor 64 / 512), sliding_window 128.
inline constexpr int kDefaultHeadDim = 512;
inline constexpr double kDefaultRotaryFraction = 64.0 / 512.0;
inline constexpr int kDefaultSlidingWindow = 128;

// compressed_sparse_attention or heavily_compressed_attention: the layers of the "compress" rope.
bool is_compressed(const std::string& type);

// DeepseekV4Config.__post_init__ (configuration_deepseek_v4.py): layer_types from the legacy
// compress_ratios (0 sliding, 4 CSA, 128 HCA; _COMPRESS_RATIO_TO_LAYER_TYPE, a KeyError for any
// other ratio, truncated to num_hidden_layers), else HF's default: 2 HCA, then `i % 2 ? CSA : HCA`
// with i counted from layer 2, so HCA at even layers and CSA at odd ones (the docstring calls it
// V4-Pro's, but the published V4-Pro's compress_ratios put CSA at even layers from 2). A list
// shorter than the layers is refused (validate_layer_type's ValueError).
std::vector<std::string> default_layer_types(const ConfigDoc& doc, std::int64_t layers);

// The distinct layer types of the model in order of first appearance, each one of HF's
// DEEPSEEK_V4_LAYER_TYPES (validate_layer_type), else an Error naming the key; all three when the
// layer count is unknown.
std::vector<std::string> rope_layer_types(const ConfigDoc& doc);

// head_dim (default 512): the whole head, of which the trailing rotary_dim channels rotate.
int head_dim(const ConfigDoc& doc);

// The two rope dicts as DeepseekV4Config.__post_init__ leaves config.rope_parameters, and the
// path each is reported under. `dict` is the config's rope_parameters or rope_scaling (nullptr:
// neither), found at `dict_where`. Notes and warnings go to `out`.
struct RopeDicts {
  nlohmann::json main, compress;
  std::string main_where, compress_where;
};
RopeDicts rope_dicts(const ConfigDoc& doc, const nlohmann::json* dict, const std::string& dict_where, ModelRope& out);

// The lightning indexer of a compressed_sparse_attention layer (DeepseekV4Indexer): index_n_heads
// heads of index_head_dim channels, the trailing rotary_dim of them rotated in interleaved pairs
// with the compress rope (its own DeepseekV4RotaryEmbedding, layer_type "compress"), scores
// scaled by index_head_dim^-0.5 (DeepseekV4IndexerScorer).
IndexerSpec indexer(const ConfigDoc& doc, int rotary_dim);

}  // namespace posenc::deepseek_v4
