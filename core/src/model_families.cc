#include "posenc/model_families.h"

#include <string>
#include <vector>

#include "family_row.h"

namespace posenc {
namespace {

using family_table::Row;

const std::vector<FamilyQuirks>& table() {
  using L = RopeLayout;
  static const std::vector<FamilyQuirks> rows = [] {
    std::vector<Row> r = {
        Row("|llama|", "modeling_llama.py: LlamaAttention, apply_rotary_pos_emb (rotate_half)"),
        Row("|mllama|mllama_text_model|",
            "modeling_mllama.py: MllamaTextSelfAttention rotates, MllamaTextCrossAttention (cross_attention_layers) does "
            "not; configuration_mllama.py: default_theta 500000")
            .rope_layers(RopeLayers::kNotCrossAttention)
            .default_theta(5e5),
        Row("|mistral|", "modeling_mistral.py: sliding_window=config.sliding_window on every layer")
            .window(Window::kEveryLayer),
        Row("|mixtral|", "modeling_mixtral.py: sliding_window=config.sliding_window on every layer; "
                         "configuration_mixtral.py: default_theta 1e6")
            .window(Window::kEveryLayer)
            .default_theta(1e6),
        Row("|ministral3|",
            "modeling_ministral3.py: Ministral3Attention, get_llama_4_attn_scale (q *= 1 + beta log(1 + floor(p / "
            "original_max_position_embeddings)))")
            .window(Window::kEveryLayer)
            .query_scale(QueryScale::kLlama4ScalingBeta),
        Row("|qwen2|qwen2_moe|",
            "modeling_qwen2.py: Qwen2Attention (sliding layers: use_sliding_window and i >= max_window_layers)")
            .window(Window::kQwen2),
        Row("|qwen2_vl|qwen2_vl_text|qwen2_5_vl|qwen2_5_vl_text|",
            "modeling_qwen2_vl.py: Qwen2 attention (use_sliding_window, max_window_layers), "
            "apply_multimodal_rotary_pos_emb (mrope_section chunks); configuration_qwen2_vl.py: default_theta 1e6")
            .window(Window::kQwen2)
            .mrope(MropeStyle::kContiguous)
            .default_theta(1e6),
        Row("|qwen2_5_omni|qwen2_5_omni_thinker|qwen2_5_omni_text|",
            "modeling_qwen2_5_omni.py: the thinker's Qwen2_5OmniAttention (sliding layers from use_sliding_window and "
            "max_window_layers), apply_multimodal_rotary_pos_emb (mrope_section chunks); default_theta 1e6")
            .window(Window::kQwen2).mrope(MropeStyle::kContiguous).default_theta(1e6),
        Row("|qwen3_omni_moe|qwen3_omni_moe_thinker|qwen3_omni_moe_text|", "modeling_qwen3_omni_moe.py: the thinker's "
            "text attention (q_norm/k_norm, then apply_interleaved_mrope whatever the config says; mrope_section [24, 20, 20] by default)")
            .qk_norm(QkNorm::kBeforeRope).mrope(MropeStyle::kInterleaved).default_theta(1e6)
            .ignored_rope_keys("|interleaved|").default_mrope_section({24, 20, 20}),
        Row("|qwen3|qwen3_moe|", "modeling_qwen3.py: Qwen3Attention (q_norm/k_norm, then apply_rotary_pos_emb)")
            .window(Window::kQwen2)
            .qk_norm(QkNorm::kBeforeRope),
        Row("|qwen3_next|qwen3_5|qwen3_5_text|qwen3_5_moe|qwen3_5_moe_text|",
            "modeling_qwen3_next.py: Qwen3NextAttention on full_attention layers (q_norm/k_norm, then partial "
            "apply_rotary_pos_emb); Qwen3NextGatedDeltaNet on linear_attention layers has no positions; "
            "configuration_qwen3_next.py: default layer_types from full_attention_interval (4)")
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kLinearButEveryNth)
            .qk_norm(QkNorm::kBeforeRope),
        Row("|qwen3_vl|qwen3_vl_text|qwen3_vl_moe|qwen3_vl_moe_text|",
            "modeling_qwen3_vl.py: Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope, q_norm/k_norm before RoPE")
            .qk_norm(QkNorm::kBeforeRope)
            .mrope(MropeStyle::kInterleaved)
            .default_theta(5e5),
        Row("|deepseek_v2|",
            "modeling_deepseek_v2.py: DeepseekV2Attention (q = [qk_nope_head_dim | qk_rope_head_dim], apply_rotary_emb "
            "on complex pairs, self.scaling *= yarn_get_mscale(factor, mscale_all_dim)^2)")
            .layout(L::kInterleaved)
            .mla()
            .softmax(SoftmaxScale::kDeepSeekMla),
        Row("|deepseek_v3|kimi_k2|",
            "modeling_deepseek_v3.py: DeepseekV3Attention (q = [qk_nope_head_dim | qk_rope_head_dim]; "
            "apply_rotary_pos_emb_interleave when rope_interleave, default true; self.scaling *= "
            "yarn_get_mscale(factor, mscale_all_dim)^2)")
            .mla()
            .rope_interleave_key()
            .softmax(SoftmaxScale::kDeepSeekMla),
        Row("|deepseek_v32|",
            "modeling_deepseek_v32.py: DeepseekV32Attention (q = [qk_nope_head_dim | qk_rope_head_dim], "
            "apply_rotary_pos_emb_interleave always: the config has no rope_interleave; self.scaling = "
            "yarn_apply_mscale(rope_parameters, qk_head_dim^-0.5)); DeepseekV32Indexer (rotate_half on the first "
            "qk_rope_head_dim of index_head_dim channels, same cos/sin, softmax_scale = index_head_dim^-0.5)")
            .layout(L::kDeepSeekV3)
            .mla()
            .softmax(SoftmaxScale::kDeepSeekMla)
            .dsa_indexer(),
        Row("|deepseek_v4|",
            "modeling_deepseek_v4.py (c49429ed): DeepseekV4Attention (rope 'main' on sliding_attention layers, "
            "'compress' on compressed_sparse_attention / heavily_compressed_attention; apply_rotary_pos_emb: "
            "interleaved pairs on the trailing qk_rope_head_dim of head_dim; scaling = head_dim^-0.5, no mscale; "
            "sliding_window on every layer), DeepseekV4Indexer on CSA layers (index_n_heads x index_head_dim, "
            "trailing channels, compress rope, index_head_dim^-0.5); configuration_deepseek_v4.py __post_init__: "
            "layer_types from compress_ratios, rope_parameters {main: default rope_theta, compress: rope_scaling at "
            "compress_rope_theta, attention_factor 1.0 for yarn}")
            .layout(L::kInterleaved)
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kDeepSeekV4)
            .default_sliding_window(128)
            .deepseek_v4(),
        Row("|kimi_linear|",
            "modeling_kimi_linear.py: KimiLinearAttention (DeepSeek-V3 MLA, q = [qk_nope_head_dim | "
            "qk_rope_head_dim]) on full_attention layers, no RoPE when mla_use_nope; KDA (Kimi Delta Attention) "
            "on linear layers has no positions; configuration_kimi_linear.py: layer_types from linear_attn_config's "
            "1-based full_attn_layers / kda_layers, mla_use_nope also when qk_rope_head_dim == 0")
            .mla()
            .rope_interleave_key()
            .rope_layers(RopeLayers::kNoneIfMlaUseNope)
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kKimiLinear),
        Row("|gpt_oss|", "modeling_gpt_oss.py: GptOssAttention (_apply_rotary_emb on halves; sliding_window on "
                         "sliding_attention layers)")
            .window(Window::kLayerTypes, 2)
            .default_theta(150000),
        Row("|smollm3|", "modeling_smollm3.py: SmolLM3Attention (use_rope = no_rope_layers[layer_idx])")
            .rope_layers(RopeLayers::kNoRopeLayersList)
            .window(Window::kQwen2)
            .default_theta(2e6),
        Row("|llama4|llama4_text|",
            "modeling_llama4.py: Llama4TextAttention (use_rope from no_rope_layers; apply_rotary_emb on complex pairs; "
            "chunked attention on RoPE layers; L2 qk_norm after RoPE; attn_temperature_tuning on NoPE layers)")
            .layout(L::kInterleaved)
            .rope_layers(RopeLayers::kNoRopeLayersList)
            .window(Window::kChunkedOnRopeLayers)
            .query_scale(QueryScale::kLlama4Temperature)
            .qk_norm(QkNorm::kL2AfterRopeIfFlag)
            .default_theta(5e5),
        Row("|cohere|", "modeling_cohere.py: CohereRotaryEmbedding (repeat_interleave), rotate_half on (2j, 2j+1); "
                        "q/k LayerNorm before RoPE when use_qk_norm")
            .layout(L::kInterleaved)
            .qk_norm(QkNorm::kBeforeRopeIfFlag)
            .default_theta(5e5),
        Row("|cohere2|", "modeling_cohere2.py: Cohere2Attention (RoPE only when sliding_window is set, i.e. on "
                         "sliding_attention layers; rotate_half on (2j, 2j+1))")
            .layout(L::kInterleaved)
            .rope_layers(RopeLayers::kSlidingOnly)
            .window(Window::kLayerTypes, 4),
        // EXAONE 4.5 (configuration_exaone4_5.py): Exaone4_5_Config's text_config is an Exaone4Config,
        // model_type exaone4 (first released as exaone4_5_text, which HF maps to exaone4).
        Row("|exaone4|exaone4_5|exaone4_5_text|",
            "modeling_exaone4.py: Exaone4Attention (\"global NoPE for hybrid attention\": RoPE when "
            "config.sliding_window is None or the layer slides; q_norm/k_norm before RoPE); "
            "configuration_exaone4.py: sliding_window 4096 and sliding_window_pattern 4 by default")
            .rope_layers(RopeLayers::kSlidingOnlyIfHybrid)
            .window(Window::kLayerTypes, 4)
            .default_sliding_window(4096)
            .qk_norm(QkNorm::kBeforeRope),
        Row("|gemma|", "modeling_gemma.py: GemmaAttention, apply_rotary_pos_emb"),
        Row("|gemma2|", "modeling_gemma2.py: Gemma2Attention (scaling = query_pre_attn_scalar^-0.5; sliding_window on "
                        "sliding_attention layers)")
            .window(Window::kLayerTypes, 2)
            .softmax(SoftmaxScale::kQueryPreAttnScalar),
        Row("|gemma3|gemma3_text|",
            "modeling_gemma3.py: Gemma3Attention (q_norm/k_norm, then RoPE: rope_local_base_freq on sliding layers; "
            "scaling = query_pre_attn_scalar^-0.5)")
            .window(Window::kLayerTypes, 6)
            .softmax(SoftmaxScale::kQueryPreAttnScalar)
            .qk_norm(QkNorm::kBeforeRope)
            .sliding_layers_unscaled("rope_local_base_freq")
            .default_theta(1e6),  // default_theta {"global": 1e6, "local": 1e4}
        Row("|gemma3n|gemma3n_text|",
            "modeling_gemma3n.py: Gemma3nTextAttention (q_norm/k_norm, then RoPE; scaling = 1.0; the last "
            "num_kv_shared_layers layers read the K/V of the last earlier layer of their type, kv_shared_layer_index); "
            "configuration_gemma3n.py: layer i full_attention when (i + 1) % 5 == 0, sliding_window 512, sliding "
            "layers at rope_local_base_freq (1e4), a legacy rope_scaling on full_attention only")
            .window(Window::kLayerTypes, 5)
            .default_sliding_window(512)
            .softmax(SoftmaxScale::kOne)
            .qk_norm(QkNorm::kBeforeRope)
            .sliding_layers_unscaled("rope_local_base_freq")
            .kv_sharing()
            .default_theta(1e6),
        Row("|gemma4|gemma4_text|",
            "modeling_gemma4.py: Gemma4TextAttention (q_norm/k_norm, then apply_rotary_pos_emb (rotate_half) over "
            "the layer's head_dim; scaling = 1.0; the last num_kv_shared_layers layers read the K/V of the last "
            "earlier layer of their type); configuration_gemma4.py Gemma4TextConfig.__post_init__: layer_types every "
            "6th full (last layer forced full), sliding_window 512, rope_parameters per layer type (sliding default "
            "1e4, full proportional 1e6 prf 0.25), full layers' head_dim = global_head_dim (512) by per_layer_config; "
            "RU _compute_proportional_rope_parameters: exponent over head_dim, zero frequencies after int(prf * "
            "head_dim // 2)")
            .window(Window::kLayerTypes, 6)
            .last_layer_full()
            .default_sliding_window(512)
            .softmax(SoftmaxScale::kOne)
            .qk_norm(QkNorm::kBeforeRope)
            .global_head_dim(512)
            .kv_sharing()
            .default_rope_parameters(
                R"({"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}, )"
                R"("full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}})"),
        Row("|glm|glm4|", "modeling_glm.py / modeling_glm4.py: apply_rotary_pos_emb (cos/sin repeat_interleave'd, "
                          "rotate_half on x[..., 0::2], x[..., 1::2]) over the partial rotary slice")
            .layout(L::kInterleaved),
        // GLM-4.1V / GLM-4.5V: flat legacy configs keep the text keys at the top level, which
        // ConfigDoc reads when there is no text_config.
        Row("|glm4v|glm4v_text|glm4v_moe|glm4v_moe_text|",
            "modeling_glm4v.py:445-496: apply_multimodal_rotary_pos_emb (mrope_section chunks of the rotated "
            "part's frequencies, partial_rotary_factor 0.5), then cos/sin[..., :d/2].repeat_interleave(2) on the "
            "first d channels: GPT-J pairs (2j, 2j+1), the rest pass through")
            .layout(L::kInterleaved)
            .mrope(MropeStyle::kContiguous),
        Row("|glm4_moe|", "modular_glm4_moe.py: apply_rotary_pos_emb from modeling_gpt_neox (half-split on the "
                          "partial rotary slice); q/k norm before RoPE when use_qk_norm")
            .qk_norm(QkNorm::kBeforeRopeIfFlag),
        Row("|chatglm|", "THUDM modeling_chatglm.py (hub): apply_rotary_pos_emb over (2j, 2j+1) pairs of the first "
                         "half of kv_channels")
            .layout(L::kInterleaved)
            .layer_count("num_layers")
            .head_dim_key("kv_channels")
            .theta_from_rope_ratio()
            .default_partial_rotary(0.5),
        Row("|ernie4_5|ernie4_5_moe|", "modeling_ernie4_5.py: apply_rotary_pos_emb (cos/sin built half-split, "
                                        "applied to (2j, 2j+1) pairs)")
            .layout(L::kInterleaved)
            .default_theta(5e5),
        Row("|lfm2|", "modeling_lfm2.py: Lfm2Attention on full_attention layers (q_layernorm/k_layernorm, then RoPE); "
                      "Lfm2ShortConv layers have no positions; configuration_lfm2.py: default layer_types from "
                      "full_attn_idxs (every layer when absent)")
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kFullAttnIdxs)
            .qk_norm(QkNorm::kBeforeRope)
            .default_theta(1e6),
        Row("|gpt_neox|", "modeling_gpt_neox.py: GPTNeoXAttention, partial apply_rotary_pos_emb; "
                          "configuration_gpt_neox.py: convert_rope_params_to_dict fills the rope dict's rope_theta "
                          "from rotary_emb_base and its partial_rotary_factor from rotary_pct (0.25 by default)")
            .legacy_keys("rotary_emb_base", "rotary_pct")
            .default_partial_rotary(0.25),
        Row("|gpt_neox_japanese|", "modeling_gpt_neox_japanese.py: GPTNeoXJapaneseAttention, rotate_half on the "
                                   "first rotary_ndims channels; configuration_gpt_neox_japanese.py: "
                                   "convert_rope_params_to_dict reads rotary_emb_base and rotary_pct (1.0 by default)")
            .legacy_keys("rotary_emb_base", "rotary_pct"),
        Row("|stablelm|", "modeling_stablelm.py: StableLmAttention, partial apply_rotary_pos_emb; "
                          "configuration_stablelm.py: partial_rotary_factor 0.25 by default")
            .default_partial_rotary(0.25),
        Row("|stablelm_epoch|", "StableLM-epoch modeling_stablelm_epoch.py (hub, stabilityai/stablelm-3b-4e1t before "
                                "its HF port): Attention._init_rope, rotary_ndims = int(head_dim * config.rope_pct), "
                                "RotaryEmbedding(base=config.rope_theta), rotate_half on the first rotary_ndims channels")
            .legacy_keys(nullptr, "rope_pct"),
        Row("|phi|", "modeling_phi.py: PhiAttention, partial apply_rotary_pos_emb"),
        Row("|phi3|", "modeling_phi3.py: Phi3Attention (sliding_window=config.sliding_window on every layer)")
            .window(Window::kEveryLayer)
            .yarn_means_longrope(),
        Row("|olmo3|", "modeling_olmo3.py: Olmo3Attention (q_norm/k_norm, then RoPE; sliding layers plain RoPE)")
            .window(Window::kLayerTypes, 4)
            .qk_norm(QkNorm::kBeforeRope)
            .sliding_layers_unscaled()
            .default_theta(5e5),
        Row("|minimax_m2|", "modeling_minimax_m2.py: MiniMaxM2Attention (q/k norm when use_qk_norm, partial RoPE "
                            "over rotary_dim)")
            .qk_norm(QkNorm::kBeforeRopeIfFlag)
            .default_theta(5e6),
        Row("|gptj|codegen|", "modeling_gptj.py / modeling_codegen.py: create_sinusoidal_positions(n_positions, rotary_dim) "
                              "at base 10000, apply_rotary_pos_emb with rotate_every_two on each head's first rotary_dim "
                              "channels; configuration_gptj.py: rotary_dim 64 by default")
            .layout(L::kInterleaved).layer_count("n_layer").shape_keys("n_embd", "n_head").max_pos_key("n_positions")
            .own_rotary_dim(64),
        Row("|dbrx|", "modeling_dbrx.py: DbrxAttention, apply_rotary_pos_emb; configuration_dbrx.py: d_model, n_heads, "
                      "max_seq_len, attn_config.rope_theta")
            .layer_count("n_layers")
            .shape_keys("d_model", "n_heads")
            .max_pos_key("max_seq_len")
            .theta_in_attn_config(),
        Row("|qwen|", "Qwen modeling_qwen.py (hub): apply_rotary_pos_emb (rotate_half); QWenModel.forward: with "
                      "use_dynamic_ntk a prefill of L > seq_length tokens takes get_ntk_alpha(L) = 2^ceil(log2(L / "
                      "seq_length) + 1) - 1 and RotaryEmbedding base = rotary_emb_base * alpha^(d/(d-2)), kept "
                      "(_ntk_alpha_cached_list) for decode; QWenAttention: with use_logn_attn the query at cache "
                      "index p is multiplied by logn_list[p] = log(p + 1) / log(seq_length) when p + 1 > seq_length "
                      "(p <= 32766, the list's end); QWenModel.__init__: rotary_ndims = int(kv_channels * "
                      "config.rotary_pct), RotaryEmbedding(base=config.rotary_emb_base)")
            .query_scale(QueryScale::kQwenLogN)
            .qwen_seq_length()
            .legacy_keys("rotary_emb_base", "rotary_pct"),
        Row("|internlm2|", "InternLM2 modeling_internlm2.py (hub): apply_rotary_pos_emb (rotate_half)"),
        Row("|minicpm|", "MiniCPM modeling_minicpm.py (hub): apply_rotary_pos_emb (rotate_half)"),
        Row("|minicpm3|", "modeling_minicpm3.py: MiniCPM3Attention (MLA, q = [qk_nope_head_dim | qk_rope_head_dim], "
                          "standard apply_rotary_pos_emb (rotate_half) on the rope slice; self.scaling = "
                          "yarn_apply_mscale(config.rope_parameters, qk_head_dim^-0.5), which reads "
                          "rope_parameters[\"factor\"] for any non-default rope type)")
            .mla()
            .softmax(SoftmaxScale::kDeepSeekMla)
            .mscale_reads_factor(),
        Row("|hunyuan_v1_dense|hunyuan_v1_moe|",
            "modeling_hunyuan_v1_dense.py :311-341 / modeling_hunyuan_v1_moe.py :389-413: the rotary's own NTK-alpha "
            "(rope_type dynamic with alpha: base = rope_theta * alpha^(head_dim/(head_dim-2)), attention_scaling 1); "
            "query_layernorm/key_layernorm after apply_rotary_pos_emb when use_qk_norm "
            "(modeling_hunyuan_v1_moe.py:196-199); attention_head_dim when head_dim is absent")
            .qk_norm(QkNorm::kAfterRopeIfFlag)
            .head_dim_key("attention_head_dim")
            .ntk_alpha(),
        Row("|hunyuan_vl|hunyuan_vl_text|",
            "modeling_hunyuan_vl.py: HunYuanVLRotaryEmbedding (NTK-alpha as HunYuan dense, cos = cat(freqs, freqs) "
            "per position axis), apply_multimodal_rotary_pos_emb (mrope_section doubled over the full head: "
            "XD-RoPE), rotate_half, query_layernorm/key_layernorm after RoPE; configuration_hunyuan_vl.py: "
            "xdrope -> dynamic, xdrope_section -> mrope_section, flat configs fold text keys into text_config")
            .qk_norm(QkNorm::kAfterRopeIfFlag)
            .ntk_alpha()
            .xdrope(),
        Row("|granite|granitemoe|granitemoeshared|",
            "modeling_granite.py / modeling_granitemoe.py / modeling_granitemoeshared.py: GraniteAttention "
            "(self.scaling = config.attention_multiplier), apply_rotary_pos_emb (rotate_half)")
            .softmax(SoftmaxScale::kAttentionMultiplier),
        Row("|granitemoehybrid|",
            "modeling_granitemoehybrid.py: GraniteMoeHybridAttention on layer_types 'attention' (scaling = "
            "attention_multiplier; rotary only when position_embedding_type == 'rope', :1049), Mamba2 on 'mamba'")
            .rope_layers(RopeLayers::kIfPositionEmbeddingRope)
            .window(Window::kLayerTypes)
            .softmax(SoftmaxScale::kAttentionMultiplier),
        Row("|jamba|", "modeling_jamba.py: JambaAttention applies no positional encoding (attention every "
                       "attn_layer_period-th layer from attn_layer_offset, Mamba otherwise)")
            .rope_layers(RopeLayers::kNone)
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kJamba),
        Row("|nemotron_h|", "modeling_nemotron_h.py: NemotronHAttention applies no positional encoding; "
                            "configuration_nemotron_h.py: hybrid_override_pattern (M mamba, * attention, - mlp, E moe)")
            .rope_layers(RopeLayers::kNone)
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kNemotronH),
        Row("|falcon_h1|", "modeling_falcon_h1.py: FalconH1DecoderLayer runs FalconH1Mixer (Mamba2) and "
                           "FalconH1Attention side by side in every layer (FalconH1Config.layers_block_type: 'hybrid' "
                           "for each); FalconH1Attention: key_states = k_proj(x) * key_multiplier, then "
                           "apply_rotary_pos_emb (rotate_half), scaling head_dim^-0.5")
            .softmax(SoftmaxScale::kKeyMultiplier),
        Row("|zamba2|", "modeling_zamba2.py: Zamba2Model runs the shared Zamba2AttentionDecoderLayer before the "
                        "Mamba2 layer at the 'hybrid' entries of layers_block_type (configuration_zamba2.py: its "
                        "default list, hybrid_layer_ids); Zamba2Attention: head_dim = attention_head_dim = 2 * "
                        "hidden_size / heads, scaling (head_dim / 2)^-0.5, apply_rotary_pos_emb (rotate_half) only "
                        "when config.use_mem_rope")
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kZamba2)
            .layer_types_key("layers_block_type")
            .rope_layers(RopeLayers::kIfUseMemRope)
            .softmax(SoftmaxScale::kHalfHeadDim)
            .head_dim_twice_hidden(),
        Row("|bamba|", "modeling_bamba.py: BambaAttention, partial apply_rotary_pos_emb (rotate_half) on layers "
                       "at attn_layer_indices, Mamba2 otherwise")
            .window(Window::kLayerTypes)
            .default_layers(DefaultLayers::kBamba),
    };
    std::vector<FamilyQuirks> out;
    for (const Row& row : r) out.push_back(row.q);
    return out;
  }();
  return rows;
}

}  // namespace

const FamilyQuirks* find_family(std::string_view model_type) {
  if (model_type.empty()) return nullptr;
  const std::string bounded = "|" + std::string(model_type) + "|";
  for (const FamilyQuirks& row : table())
    if (std::string_view(row.model_types).find(bounded) != std::string_view::npos) return &row;
  return nullptr;
}

const FamilyQuirks* find_family_of(std::string_view family_list) {
  // The list is "|top|text|": the text model's type names the decoder, so it is tried first.
  std::vector<std::string_view> types;
  std::size_t start = 0;
  while (start < family_list.size()) {
    const std::size_t end = family_list.find('|', start);
    const std::size_t stop = end == std::string_view::npos ? family_list.size() : end;
    if (stop > start) types.push_back(family_list.substr(start, stop - start));
    start = stop + 1;
  }
  for (auto it = types.rbegin(); it != types.rend(); ++it)
    if (const FamilyQuirks* row = find_family(*it)) return row;
  return nullptr;
}

}  // namespace posenc
