// Which layers a model has and which of them rotate (private to the core library): the one
// place for the rules of layer types, NoPE layers and windows, read from a ConfigDoc by both
// hf_config.cc (one rope per layer type, what `posenc freqs` shows) and model_spec.cc (the
// per-layer facts of `posenc spec`), so the two cannot disagree.
//
// Each rule follows its family's HF code, cited in that family's row (model_families.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config_doc.h"

namespace posenc::model_layers {

inline constexpr std::int64_t kMaxLayers = 1 << 16;

// Llama4TextConfig / SmolLM3Config: without no_rope_layers, every no_rope_layer_interval-th
// layer (default 4) is NoPE; Llama4TextConfig has 48 layers by default.
inline constexpr std::int64_t kDefaultNoRopeLayerInterval = 4;
inline constexpr std::int64_t kLlama4DefaultLayers = 48;

// The config's layer_types (each entry checked to be a string); nullopt when absent or null.
std::optional<std::vector<std::string>> config_layer_types(const ConfigDoc& doc);

// The number of layers: the family's layer-count key (num_hidden_layers, DBRX n_layers, ...),
// else the length of layer_types; nullopt when neither is there. Not range-checked.
std::optional<std::int64_t> layer_count(const ConfigDoc& doc);

// Layer i's type when the config has no layer_types: the family's default pattern (HF's config
// __init__; sliding_attention on every layer for Mistral-style windows); nullopt when the family
// has no default (or it needs keys the config lacks).
std::optional<std::vector<std::string>> default_layer_types(const ConfigDoc& doc, std::int64_t layers);

// The sliding window: the config's, else (key absent, not null) the family's HF default.
std::optional<std::int64_t> sliding_window(const ConfigDoc& doc);

// Whether layers of `type` attend at all: not the state-space and feed-forward blocks of the
// hybrids (mamba, Nemotron-H's mlp / moe) or LFM2's convolutions.
bool is_attention(const std::string& type);

// Whether layers of `type` rotate at all: not linear attention (Gated DeltaNet, KDA) or
// convolutions; not Cohere 2's or hybrid EXAONE 4's full-attention layers; none under Kimi
// Linear's mla_use_nope. "" (a model without layer types) rotates unless every layer is NoPE.
bool type_rotates(const ConfigDoc& doc, const std::string& type);

// Per layer index, the rules that turn RoPE off for single layers of a type that rotates:
// Llama 4 / SmolLM3 no_rope_layers (or its interval), Mllama's cross_attention_layers.
std::vector<bool> index_rotates(const ConfigDoc& doc, std::int64_t layers);

// Whether any layer of the model rotates: each layer's type (layer_types, else the family's
// default pattern) and the index rules; true when the layer count is unknown (nothing says
// otherwise). LFM2 with full_attn_idxs [] or Qwen3-Next with full_attention_interval past the
// layer count have none.
bool some_layer_rotates(const ConfigDoc& doc);

// no_rope_layers as the config gives it (empty when absent): 1 means the layer rotates.
std::vector<std::int64_t> no_rope_layers(const ConfigDoc& doc);

// The layer types that get a rope each: the distinct entries of layer_types, else those of
// the family's default pattern when they change the rope (a schedule of their own, Gemma 3's
// and OLMo-3's sliding layers; or NoPE); empty for a model whose layers share one rope.
std::vector<std::string> rope_layer_types(const ConfigDoc& doc);

// The rope of the layers of `type`. `params` is the rope read for that type: the shared dict's
// (then the sliding layers of Gemma 3 and OLMo-3 get their own plain schedule), or the type's
// own v5 rope_parameters entry (`own_params`, used as given). Adds a note for NoPE layers whose
// reason is not obvious from their type (hybrid EXAONE 4).
LayerRope layer_rope(const ConfigDoc& doc, const std::string& type, const RopeParams& params, bool own_params,
                     std::vector<std::string>& notes);

}  // namespace posenc::model_layers
