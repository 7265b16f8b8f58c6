"""Step 2 of rope_keys.py: what llama.cpp's loader makes of the GGUF keys the converter wrote
(src/llama-model.cpp load_hparams, src/models/<arch>.cpp load_arch_hparams and build graph), per
layer type of `posenc golden`'s manifest: the hparams llama_context turns into ggml_rope_ext's
arguments (README.md here)."""


def find(hp, keys, default=None):
    """conversion/base.py ModelBase.find_hparam: the first key present (the loader reads config.json alike)."""
    for k in keys:
        if k in hp:
            return hp[k]
    return default


def loader_hparams(arch, rope_type, keys, tensors, layer, config_hp):
    """src/llama-model.cpp load_hparams (lines 1339-1400) and the arch's load_arch_hparams: the
    llama_hparams fields ggml's RoPE reads, for one golden layer type."""
    n_embd = find(config_hp, ["hidden_size", "n_embd", "d_model"])
    n_head = find(config_hp, ["num_attention_heads", "n_head", "n_heads"])
    n_embd_head = keys.get("attention.key_length", n_embd // n_head)
    h = {
        "n_ctx_train": keys.get("context_length", 0),
        "n_ctx_orig_yarn": keys.get("rope.scaling.original_context_length", keys.get("context_length", 0)),
        "rope_freq_base_train": keys.get("rope.freq_base", 10000.0),
        "rope_scaling_type": keys.get("rope.scaling.type", "linear"),
        "rope_freq_scale_train": 1.0 / keys["rope.scaling.factor"] if keys.get("rope.scaling.factor") else 1.0,
        "rope_attn_factor": keys.get("rope.scaling.attn_factor", 1.0),
        "yarn_ext_factor": -1.0, "yarn_attn_factor": 1.0, "yarn_beta_fast": 32.0, "yarn_beta_slow": 1.0,
        "rope_yarn_log_mul": 0.0,
        "n_rot": keys.get("rope.dimension_count", n_embd_head),
        "rope_type": rope_type,
        "sections": keys.get("rope.dimension_sections", [0, 0, 0, 0]),
        "freq_factors": tensors.get("rope_freqs"),
        "graph": {},
    }
    swa = layer == "sliding_attention"
    # Keys every loader reads (src/llama-model.cpp load_hparams and llama_model_loader::get_key):
    # the yarn keys are read in src/llama-model.cpp only for the arches below.
    if arch in ("deepseek2",):  # src/models/deepseek2.cpp load_arch_hparams: divides by 0.1
        if "rope.scaling.yarn_log_multiplier" in keys:
            h["rope_yarn_log_mul"] = keys["rope.scaling.yarn_log_multiplier"] / 0.1
    if arch in ("mistral3",):  # src/models/mistral3.cpp load_arch_hparams
        h["yarn_beta_fast"] = keys.get("rope.scaling.yarn_beta_fast", 32.0)
        h["yarn_beta_slow"] = keys.get("rope.scaling.yarn_beta_slow", 1.0)
        h["rope_yarn_log_mul"] = keys.get("rope.scaling.yarn_log_multiplier", 0.0)
    if arch in ("gemma4",) and swa:
        h["n_rot"] = keys.get("rope.dimension_count_swa", h["n_rot"])
    if arch in ("gemma4",) and not swa:
        h["freq_factors"] = tensors.get("rope_freqs")  # src/models/gemma4.cpp: full layers only
    elif arch in ("gemma4",):
        h["freq_factors"] = None
    if arch in ("phi3", "llama", "minicpm", "mistral3") and "rope_factors_long" in tensors:
        # src/llama-model.cpp llama_model::get_rope_factors: long when n_ctx_seq > n_ctx_orig_yarn
        h["freq_factors_long"] = tensors["rope_factors_long"]
        h["freq_factors_short"] = tensors["rope_factors_short"]
    if swa:
        # src/llama-model.cpp get_rope_freq_base/scale: the _swa hparams on SWA layers; their
        # defaults (llama-hparams.h) are 10000 and 1, and each arch's load_arch_hparams sets them.
        if arch in ("gemma2", "exaone4", "gpt-oss"):
            h["swa_freq_base"], h["swa_freq_scale"] = keys.get("rope.freq_base_swa", h["rope_freq_base_train"]), h["rope_freq_scale_train"]
        elif arch in ("gemma3", "gemma4"):
            h["swa_freq_base"], h["swa_freq_scale"] = keys.get("rope.freq_base_swa", 10000.0), 1.0
        elif arch == "olmo2":  # src/models/olmo2.cpp graph: SWA layers freq_scale 1, ext 0, attn 1
            h["graph"] = {"freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0}
    return h
