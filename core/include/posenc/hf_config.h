// A model's config.json (Hugging Face layout) → validated RopeParams, per attention-layer type.
//
// Accepts what publishers ship: legacy `rope_scaling` and v5 `rope_parameters` (flat or keyed by
// layer type), the legacy `type` key, `text_config` of multimodal models, integers where floats
// belong, `null` for "not set", and the rope keys model families keep outside the dict
// (GPT-NeoX `rotary_pct`/`rotary_emb_base`, Phi-3's top-level `original_max_position_embeddings`,
// DeepSeek's `qk_rope_head_dim`, Gemma-3's `rope_local_base_freq`, DBRX's `attn_config.rope_theta`,
// MiniMax-M2's `rotary_dim`, ChatGLM's `kv_channels`/`rope_ratio`).
//
// Strict where HF only warns: inside the rope dict an unknown key, an unknown rope type, a wrong
// JSON type or an out-of-range value is a posenc::Error naming the key and the value. A known
// key the chosen type ignores is a warning. Keys outside the rope dict that posenc does not read
// are never errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/rope_params.h"

namespace posenc {

struct ConfigOptions {
  bool lenient = false;        // unknown keys inside the rope dict: warning instead of error
  bool hf_compatible = false;  // ignore the keys HF ignores (DBRX attn_config.rope_theta,
                               // MiniMax-M2 rotary_dim), as HF computes
};

struct LayerRope {
  std::string layer_type;  // "full_attention", "sliding_attention", ...; "" for a uniform model
  bool has_rope = true;    // false for layer types that rotate nothing (linear attention)
  RopeParams params;
  // Qwen-1 (modeling_qwen.py QWenModel.forward, get_ntk_alpha; use_dynamic_ntk): a prefill of L
  // tokens past this length (the config's seq_length) fixes alpha for the whole generation;
  // nullopt: no such rule. prefill_params() applies it.
  std::optional<std::int64_t> ntk_prefill_length;
};

// Qwen-1's NTK-alpha for a prefill of L tokens over seq_length S (get_ntk_alpha):
// max(2^ceil(log2(L / S) + 1) - 1, 1) -- 1 up to S, 3 up to 2S, 7 up to 4S, ...
double qwen_ntk_alpha(std::int64_t L, std::int64_t S);

// The params in force after a prefill of L tokens: with ntk_prefill_length, rope_theta becomes
// QWen's RotaryEmbedding base theta * alpha^(d/(d-2)) (d = rotated dim), which decode reuses;
// otherwise layer.params unchanged (their own rope type handles L: dynamic, longrope).
RopeParams prefill_params(const LayerRope& layer, std::optional<std::int64_t> L);

struct ModelRope {
  std::string model_type;
  std::vector<LayerRope> layers;      // one per distinct layer type, in order of appearance
  std::vector<std::string> warnings;  // HF would accept silently; worth a look
  std::vector<std::string> notes;     // what posenc derived or where it deliberately differs

  // The layer type to show: "" picks full_attention if present, else the first with RoPE.
  // Throws posenc::Error for a type the model does not have, or one without RoPE.
  const LayerRope& select(const std::string& layer_type = "") const;
};

ModelRope parse_hf_config(const std::string& json_text, const ConfigOptions& options = {});
ModelRope load_hf_config(const std::string& path, const ConfigOptions& options = {});

}  // namespace posenc
