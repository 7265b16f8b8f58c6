// What each model family does with positions beyond its rope init function: one row per family,
// each citing the Hugging Face modeling code it follows (transformers v5; remote-code families
// cite their hub modeling file). model_spec.h turns a row plus a config into per-layer facts.
//
// A family absent from this table is unknown: posenc still computes its schedule, but reports
// that its per-layer semantics are unknown instead of guessing.
#pragma once

#include <optional>
#include <string_view>

#include "posenc/names.h"
#include "posenc/rope_apply.h"

namespace posenc {

// How M-RoPE spreads the frequencies over the position axes (mrope.h draws each).
enum class MropeStyle {
  kContiguous,   // Qwen2-VL: mrope_section chunks of consecutive frequencies
  kInterleaved,  // Qwen3-VL: frequency i of 3 * section takes H if i % 3 == 1, W if i % 3 == 2, else T
  kXdrope,       // HunYuan-VL: the sections doubled over the full cat(freqs, freqs) width, per cos/sin
                 // column, so the two channels of a rotate_half pair can read two axes (xdrope_column_axes)
};
POSENC_ENUM_NAMES(MropeStyle, "mrope_style", {MropeStyle::kContiguous, "contiguous"},
                  {MropeStyle::kInterleaved, "interleaved"}, {MropeStyle::kXdrope, "xdrope"});

// Which layers rotate.
enum class RopeLayers {
  kAll,
  kNoRopeLayersList,    // Llama 4, SmolLM3: no_rope_layers[i] == 1 rotates; default every
                        // no_rope_layer_interval-th (4) layer is NoPE
  kSlidingOnly,         // Cohere 2: only sliding-window layers rotate
  kSlidingOnlyIfHybrid, // EXAONE 4: with sliding_window set, full layers are NoPE
  kNotCrossAttention,   // Mllama text: cross_attention_layers have no RoPE
  kNoneIfMlaUseNope,    // Kimi Linear: no layer rotates when mla_use_nope (or qk_rope_head_dim == 0)
  kNone,                // Jamba, Nemotron-H: attention layers apply no positional encoding
  kIfPositionEmbeddingRope,  // Granite 4 (granitemoehybrid): rotary only when position_embedding_type == "rope"
  kIfUseMemRope,        // Zamba2: the shared attention rotates only when use_mem_rope (default false)
};

// Where the attention kind and window of each layer come from.
enum class Window {
  kNone,                 // every layer full attention
  kEveryLayer,           // sliding_window (when not null) on every layer (Mistral, Phi-3)
  kQwen2,                // use_sliding_window: layers i >= max_window_layers slide
  kLayerTypes,           // layer_types (or the family's default pattern) says per layer
  kChunkedOnRopeLayers,  // Llama 4: attention_chunk_size on RoPE layers, NoPE layers global
};

// The default layer_types when the config has none (HF's config __init__): layer i is
// full_attention when (i + 1) % n == 0, sliding_attention otherwise, n = sliding_window_pattern
// when the config has it, else the row's full_every (Gemma2Config, GptOssConfig: 2;
// Gemma3TextConfig: 6; Cohere2Config, Olmo3Config: 4). 0: no default pattern.

// Where the default layer_types come from when the config has none.
enum class DefaultLayers {
  kFullEvery,            // the pattern above (full_every / sliding_window_pattern)
  kLinearButEveryNth,    // Qwen3NextConfig: full_attention every full_attention_interval-th (4) layer,
                         // linear_attention otherwise
  kFullAttnIdxs,         // Lfm2Config: full_attention at full_attn_idxs (default: every layer), conv otherwise
  kKimiLinear,           // KimiLinearConfig: linear_attn_config's 1-based full_attn_layers / kda_layers
                         // (transformers versions disagree on the default without them: unknown)
  kJamba,                // JambaConfig.layers_block_type: attention when i % attn_layer_period ==
                         // attn_layer_offset (defaults 8, 4), mamba otherwise
  kNemotronH,            // NemotronHConfig.layers_block_type: hybrid_override_pattern, one character
                         // per layer: M mamba, * attention, - mlp, E moe
  kBamba,                // BambaConfig.layers_block_type: attention at attn_layer_indices, mamba otherwise
  kZamba2,               // Zamba2Config.__post_init__: 54 fixed entries, "hybrid" (shared attention block
                         // then Mamba2) at 6, 12, ..., 42, 47, 51, Mamba2 otherwise (HF: "linear_attention")
  kDeepSeekV4,           // DeepseekV4Config.__post_init__: compress_ratios (0 sliding, 4 CSA, 128 HCA), else
                         // 2 HCA then CSA / HCA alternating (deepseek_v4.h)
};

enum class QueryScale {
  kNone,
  kLlama4Temperature,  // NoPE layers: q *= 1 + attn_scale * log1p(floor((p + 1) / floor_scale))
  kLlama4ScalingBeta,  // every layer: q *= 1 + beta * log(1 + floor(p / original_max))
  kQwenLogN,           // Qwen-1 use_logn_attn: q *= log(p + 1) / log(seq_length) when p + 1 > seq_length
};

enum class SoftmaxScale {
  kHeadDim,             // head_dim^-0.5
  kQueryPreAttnScalar,  // query_pre_attn_scalar^-0.5 (Gemma 2, Gemma 3)
  kDeepSeekMla,         // (qk_nope + qk_rope)^-0.5 * mscale(factor, mscale_all_dim)^2
  kAttentionMultiplier, // attention_multiplier itself (Granite: 1/head_dim in the shipped configs)
  kOne,                 // 1.0: q/k RMS-normed, no scale (Gemma 3n, Gemma 4)
  kKeyMultiplier,       // head_dim^-0.5 * key_multiplier: Falcon-H1 scales k before q.k (k_proj(x) * key_multiplier)
  kHalfHeadDim,         // (head_dim / 2)^-0.5: Zamba2Attention, whose heads span 2 * hidden_size / heads
};

enum class QkNorm {
  kNone,
  kBeforeRope,         // RMSNorm per head on q and k, then RoPE (Qwen3, Gemma 3, OLMo, EXAONE 4)
  kBeforeRopeIfFlag,   // the same when use_qk_norm is true (MiniMax-M2, GLM-4.5)
  kL2AfterRopeIfFlag,  // Llama 4: L2 norm after RoPE on RoPE layers when use_qk_norm
  kAfterRopeIfFlag,    // HunYuan: RMSNorm per head on q and k after RoPE when use_qk_norm
};

struct FamilyQuirks {
  // model_type values of this row, '|'-separated and '|'-bounded: "|qwen2|qwen2_moe|".
  const char* model_types;
  const char* hf_source;  // the modeling code each rule below follows
  RopeLayout layout = RopeLayout::kHalfSplit;  // how the rotated channels pair up (rope_apply.h)
  RopeLayers rope_layers = RopeLayers::kAll;
  Window window = Window::kNone;
  int full_every = 0;
  DefaultLayers default_layers = DefaultLayers::kFullEvery;
  // HF's default sliding_window when the key is absent (Exaone4Config: 4096); 0 for none.
  int default_sliding_window = 0;
  QueryScale query_scale = QueryScale::kNone;
  SoftmaxScale softmax_scale = SoftmaxScale::kHeadDim;
  QkNorm qk_norm = QkNorm::kNone;
  // The config key holding the layer count (DBRX n_layers, ChatGLM num_layers).
  const char* layer_count_key = "num_hidden_layers";
  bool mla = false;          // DeepSeek MLA: only qk_rope_head_dim channels rotate, after the NoPE part
  bool rope_interleave_key = false;  // DeepSeek-V3: rope_interleave (default true) picks the layout
  std::optional<MropeStyle> mrope_style;  // the family's M-RoPE when its rope dict does not say

  // ---- how its config.json is read (hf_config.cc), where it leaves HF's generic keys ------
  const char* hidden_key = "hidden_size";        // DBRX: d_model
  const char* heads_key = "num_attention_heads";  // DBRX: n_heads
  const char* head_dim_key = nullptr;             // ChatGLM: kv_channels
  const char* max_pos_key = nullptr;              // DBRX: max_seq_len (after max_position_embeddings)
  // The key of the per-layer types (Zamba2Config's attribute_map: layer_types -> layers_block_type).
  const char* layer_types_key = "layer_types";
  // Zamba2Config.__post_init__: attention_head_dim (HF's head_dim) = 2 * hidden_size / heads, the
  // shared block attending over the concatenation [hidden, original embedding]; any given value is overwritten.
  bool head_dim_twice_hidden = false;
  bool theta_in_attn_config = false;              // DBRX: attn_config.rope_theta
  bool theta_from_rope_ratio = false;             // ChatGLM: base = 10000 * rope_ratio
  double default_partial_rotary = 0;              // without a fraction key: GPT-NeoX 0.25, ChatGLM 0.5
  // GPT-J, CodeGen: the attention reads config.rotary_dim (this default when absent) and builds its
  // own sinusoids at base 10000; rope_theta, partial_rotary_factor and rope dicts are not read. 0: no.
  int own_rotary_dim = 0;
  // Rope-dict keys the family's config class skips at validation (HF ignore_keys_at_rope_validation)
  // and its code never reads, '|'-bounded: Qwen3-Omni's "|interleaved|". Accepted with a note.
  const char* ignored_rope_keys = nullptr;
  // The mrope_section the family's code uses when the rope dict has none (Qwen3-Omni: [24, 20, 20]);
  // empty: none (Qwen2.5-Omni v5 raises KeyError).
  std::vector<int> default_mrope_section;
  // The top-level keys the family's code reads for theta and the rotary fraction instead of the
  // mixin's rope_theta / partial_rotary_factor; nullptr: the mixin's. GPTNeoXConfig (and
  // GPTNeoXJapaneseConfig).convert_rope_params_to_dict: rope_parameters.setdefault("rope_theta",
  // rotary_emb_base) and setdefault("partial_rotary_factor", rotary_pct), so the dict's value
  // wins and the mixin's top-level keys are never read; Qwen-1's hub code: config.rotary_emb_base,
  // config.rotary_pct; StableLM-epoch's hub code: config.rope_pct. The legacy spellings a family
  // does not read are warned about and ignored (hf_config.cc), never taken silently.
  const char* theta_key = nullptr;
  const char* fraction_key = nullptr;
  bool yarn_means_longrope = false;               // Phi-3: rope type "yarn" is longrope (Phi3Config)
  // Sliding-window layers with a schedule of their own: Gemma 3's rope_local_base_freq (default
  // 10000), unscaled; OLMo-3 (local_theta_key null): rope_theta, unscaled.
  const char* local_theta_key = nullptr;
  bool sliding_layers_unscaled = false;
  // HF's default_theta when the config has no rope_theta (the class attribute; the mixin's is
  // 10000; model-families-3.md §1 lists them).
  double default_theta = 10000.0;
  // HunYuan: rope dict key `alpha` with type dynamic is NTK-alpha (its modeling file's own
  // rotary); every other family's dynamic (RU _compute_dynamic_ntk_parameters) ignores it.
  bool ntk_alpha = false;
  // MiniCPM3: the attention's yarn_apply_mscale reads rope_parameters["factor"] for any
  // non-default rope type, so HF raises KeyError('factor') on a dict without it.
  bool mscale_reads_factor = false;

  // ---- Gemma 3n / Gemma 4 ------------------------------------------------------------------
  // Gemma4TextConfig.__post_init__: full_attention layers get head_dim = global_head_dim (this
  // default when the key is absent) through per_layer_config; 0: no such key.
  int default_global_head_dim = 0;
  // Gemma4TextConfig.__post_init__: the last layer is forced to full_attention (HF warns).
  bool last_layer_full = false;
  // The last num_kv_shared_layers layers read the K/V (rotated keys included) of the last earlier
  // layer of their type (Gemma3nTextAttention / Gemma4TextAttention kv_shared_layer_index).
  bool kv_sharing = false;
  // The rope dicts HF uses when the config has none (Gemma4TextConfig's default_rope_params),
  // as JSON text; nullptr: the generic rope_theta reading.
  const char* default_rope_parameters = nullptr;
  // Qwen-1 (remote modeling_qwen.py): seq_length is the context both rules use, and
  // use_dynamic_ntk fixes an NTK-alpha at prefill (LayerRope::ntk_prefill_length).
  bool qwen_seq_length = false;
  // DeepSeek-V3.2 (modeling_deepseek_v32.py Indexer.forward): every layer's lightning indexer
  // scores keys with its own index_n_heads heads of index_head_dim channels, rotating the
  // *first* qk_rope_head_dim of them half-split (rotate_half) with the layer's cos/sin, at softmax
  // scale index_head_dim^-0.5 (LayerSpec::indexer).
  bool dsa_indexer = false;
  // HunYuanVLTextConfig.convert_rope_params_to_dict (configuration_hunyuan_vl.py): rope type
  // "xdrope" is "dynamic" (NTK-alpha with alpha), and the dict's xdrope_section is mrope_section
  // (both given, they must agree); the sections are XD-RoPE's (RopeParams::mrope_xdrope).
  bool xdrope = false;
  // DeepSeek-V4 (deepseek_v4.h): two ropes by label ("main" for sliding_attention layers, YaRN
  // "compress" for the compressed ones, built from rope_theta / compress_rope_theta / rope_scaling
  // or given nested), the trailing head_dim * partial_rotary_factor channels in interleaved pairs,
  // and the compressed_sparse_attention layers' indexer.
  bool deepseek_v4 = false;
};

// The row for a model_type (the top level's or text_config's); nullptr when unknown.
const FamilyQuirks* find_family(std::string_view model_type);

// '|'-bounded list of the model_types of a config ("|qwen3_vl|qwen3_vl_text|"): the row whose
// model_types share one of them, text model first; nullptr when none.
const FamilyQuirks* find_family_of(std::string_view family_list);

}  // namespace posenc
