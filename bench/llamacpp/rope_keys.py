#!/usr/bin/env python3
"""The RoPE parameters llama.cpp would run for a Hugging Face config.json (README.md here).

  rope_keys.py CONFIG.json MANIFEST.json  ->  JSON on stdout

Two steps, each written after llama.cpp's own code (paths relative to a llama.cpp checkout; the
commit is the one run.sh pins):
  1. the GGUF keys and tensors the converter writes (conversion/*.py, gguf-py), per architecture;
  2. what the loader makes of them (src/llama-model.cpp load_hparams, src/models/<arch>.cpp
     load_arch_hparams and build graph): per layer type of `posenc golden`'s manifest, the
     hparams that llama_context turns into ggml_rope_ext's arguments. That last step
     (src/llama-context.cpp, float32) is done by rope_vs_hf.cc.
The converter is not run: it needs torch and transformers. It is mirrored here from config.json as
conversion/base.py ModelBase.load_hparams reads it when AutoConfig is unavailable (its fallback).
"""
import json
import math
import struct
import sys

from rope_loader import find, loader_hparams


def f32(x):
    """Rounds to float32, as torch.tensor(..., dtype=torch.float32) and GGUF's f32 keys store it."""
    return struct.unpack("f", struct.pack("f", x))[0]


class NotConverted(Exception):
    pass


def text_hparams(config):
    """conversion/base.py TextModel.__init__: text_config moved to the root, rope_parameters
    mirrored from the top-level keys (lines 1310-1335)."""
    hp = dict(config)
    if "text_config" in hp:
        hp = {**hp, **hp["text_config"]}
    rp = dict(hp.get("rope_parameters", hp.get("rope_scaling")) or {})
    rope_theta = find(hp, ["global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"])
    local = find(hp, ["local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"])
    prf = find(hp, ["partial_rotary_factor", "rope_pct", "rope_percent"])
    orig = find(hp, ["original_max_position_embeddings"])
    if "full_attention" not in rp and "sliding_attention" not in rp:
        if local is not None:
            rp["sliding_attention"] = {"rope_theta": local}
        if "rope_theta" not in rp and rope_theta is not None:
            rp["rope_theta"] = rope_theta
        if "rope_type" not in rp and rp.get("type") is not None:
            rp["rope_type"] = rp["type"]
        if "partial_rotary_factor" not in rp and prf is not None:
            rp["partial_rotary_factor"] = prf
        if "original_max_position_embeddings" not in rp and orig is not None:
            rp["original_max_position_embeddings"] = orig
    return hp, rp


def generic_keys(hp, rp, keys):
    """conversion/base.py TextModel.set_gguf_parameters, the rope keys (lines 1420-1468)."""
    n_ctx = find(hp, ["max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"])
    if n_ctx is not None:
        keys["context_length"] = n_ctx
    if (kl := hp.get("head_dim")) is not None:
        keys["attention.key_length"] = kl
    p = rp.get("full_attention", rp)
    rt = p.get("rope_type")
    if rt is not None:
        factor = p.get("factor")
        if rt == "linear" and factor is not None:
            keys["rope.scaling.type"], keys["rope.scaling.factor"] = "linear", factor
        elif rt == "yarn" and factor is not None:
            keys["rope.scaling.type"], keys["rope.scaling.factor"] = "yarn", factor
            keys["rope.scaling.original_context_length"] = p["original_max_position_embeddings"]
            for gguf_key, hf_keys in (("rope.scaling.yarn_ext_factor", ["extrapolation_factor"]),
                                      ("rope.scaling.yarn_attn_factor", ["attention_factor", "attn_factor"]),
                                      ("rope.scaling.yarn_beta_fast", ["beta_fast"]),
                                      ("rope.scaling.yarn_beta_slow", ["beta_slow"])):
                if (v := find(p, hf_keys)) is not None:
                    keys[gguf_key] = v
        elif rt in ("su", "longrope"):
            keys["rope.scaling.type"] = "longrope"
        # "dynamic" (HunYuan: its class), "llama3" (generate_extra_tensors): nothing here; any
        # other type: a warning and nothing written.
    if "mrope_section" in rp:
        keys["rope.dimension_sections"] = (list(rp["mrope_section"]) + [0, 0, 0, 0])[:4]
    if (theta := p.get("rope_theta")) is not None:
        keys["rope.freq_base"] = theta
    if (local := rp.get("sliding_attention", {}).get("rope_theta")) is not None:
        keys["rope.freq_base_swa"] = local


def head_dim_of(hp):
    return hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"]


def llama3_factors(p, dim, default_factor=8.0):
    """conversion/llama.py LlamaModel.generate_extra_tensors (also exaone.py Exaone4Model's copy):
    rope_freqs.weight, one factor per frequency, in float32 as torch computes freqs."""
    base = p.get("rope_theta", 10000.0)
    factor = p.get("factor", default_factor)
    lo, hi = p.get("low_freq_factor", 1.0), p.get("high_freq_factor", 4.0)
    old = p.get("original_max_position_embeddings", 8192)
    out = []
    for i in range(0, dim, 2):
        freq = f32(1.0 / f32(f32(base) ** f32(i / dim)))  # torch float32: base ** (arange/dim)
        wavelen = 2 * math.pi / freq
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return [f32(x) for x in out]


# --- the converter, per architecture ------------------------------------------------------------
# Each returns (llama.cpp arch, rope type of src/llama-model.cpp llama_model_rope_type, the q/k
# channel order the converter writes, keys, tensors, citation).
#   qk_order: "hf" (weights kept), "permute" (conversion/llama.py LlamaModel.permute: HF's
#   half-split pairs (i, i + d/2) become llama.cpp's (2i, 2i + 1)), "normal_to_neox"
#   (conversion/glm.py Glm4Model.normal_to_neox: interleaved pairs to half-split, rotary part only).

def conv_llama(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    keys["rope.dimension_count"] = head_dim_of(hp)
    p = rp.get("full_attention", rp)
    if p.get("rope_type", "").lower() == "llama3":
        t["rope_freqs"] = llama3_factors(p, head_dim_of(hp))
    return "llama", "norm", "permute", "conversion/llama.py LlamaModel.set_gguf_parameters, permute, generate_extra_tensors"


def conv_ministral3(hp, rp, keys, t):
    conv_llama(hp, rp, keys, t)
    if hp.get("model_type") == "ministral3":
        keys["rope.scaling.yarn_log_multiplier"] = rp["mscale_all_dim"]
        keys["attention.temperature_scale"] = rp["llama_4_scaling_beta"]
    return "mistral3", "norm", "permute", "conversion/mistral3.py Mistral3Model.Ministral3Model(LlamaModel).set_gguf_parameters"


def conv_deepseek2(hp, rp, keys, t):
    hp.setdefault("rope_theta", 10000.0)
    generic_keys(hp, rp, keys)
    keys["rope.dimension_count"] = hp["qk_rope_head_dim"]
    if (m := rp.get("mscale_all_dim")) is not None:
        keys["rope.scaling.yarn_log_multiplier"] = 0.1 * m  # "for legacy reasons" 0.1 x
    return "deepseek2", "norm", "hf", "conversion/deepseek.py DeepseekV2Model.set_gguf_parameters (no q/k permutation)"


def conv_exaone4(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    p = rp.get("full_attention", rp)
    if p.get("rope_type", "").lower() == "llama3":
        t["rope_freqs"] = llama3_factors(p, head_dim_of(hp), default_factor=16.0)
    return "exaone4", "neox", "hf", "conversion/exaone.py Exaone4Model.set_gguf_parameters, generate_extra_tensors"


def conv_glm4(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    prf = rp.get("partial_rotary_factor", 0.5)
    keys["rope.dimension_count"] = int(head_dim_of(hp) * prf)
    mrope = "mrope_section" in rp
    return ("glm4", "mrope" if mrope else "norm", "normal_to_neox" if mrope else "hf",
            "conversion/glm.py Glm4Model.set_gguf_parameters, normal_to_neox (M-RoPE only)")


def conv_glm4_moe(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    keys["rope.dimension_count"] = int(head_dim_of(hp) * rp.get("partial_rotary_factor", 0.5))
    return "glm4moe", "neox", "hf", "conversion/glm.py Glm4MoeModel.set_gguf_parameters"


def conv_hunyuan_dense(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    if rp.get("rope_type") in ("dynamic", "xdrope"):
        alpha, base, dim = rp.get("alpha", 50), rp.get("rope_theta", 10000.0), hp["head_dim"]
        keys["rope.freq_base"] = base * (alpha ** (dim / (dim - 2)))
        keys["rope.scaling.type"], keys["rope.scaling.factor"] = "none", 1
        if rp.get("rope_type") == "dynamic":
            keys["rope.scaling.original_context_length"] = 256 * 1024
            keys["context_length"] = 256 * 1024
            if not (base == 10000.0 and hp["max_position_embeddings"] in (32 * 1024, 256 * 1024)):
                raise NotConverted("conversion/hunyuan.py HunYuanModel.set_gguf_parameters asserts base 10000 and "
                                   "max_position_embeddings 32K or 256K")
    return "hunyuan-dense", "neox", "hf", "conversion/hunyuan.py HunYuanModel.set_gguf_parameters"


def conv_minicpm(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    if rp.get("long_factor"):
        t["rope_factors_long"], t["rope_factors_short"] = rp["long_factor"], rp["short_factor"]
    return "minicpm", "norm", "permute", "conversion/minicpm.py MiniCPMModel.set_gguf_parameters, modify_tensors"


def conv_minimax_m2(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    keys["rope.dimension_count"] = hp["rotary_dim"]
    return "minimax-m2", "neox", "hf", "conversion/minimax.py MiniMaxM2Model.set_gguf_parameters"


def conv_olmo2(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    return "olmo2", "neox", "hf", "conversion/olmo.py Olmo2Model.set_gguf_parameters"


def conv_phi3(hp, rp, keys, t):
    n_embd, n_head = hp["hidden_size"], hp["num_attention_heads"]
    if "original_max_position_embeddings" not in rp:
        raise NotConverted("conversion/phi.py Phi3MiniModel.set_gguf_parameters needs original_max_position_embeddings")
    rope_dims = int(rp.get("partial_rotary_factor", 1.0) * n_embd) // n_head
    keys["context_length"] = find(hp, ["n_positions", "max_position_embeddings"])
    keys["rope.scaling.original_context_length"] = rp["original_max_position_embeddings"]
    keys["rope.dimension_count"] = rope_dims
    keys["rope.freq_base"] = rp.get("full_attention", rp)["rope_theta"]
    if rp.get("long_factor"):  # generate_extra_tensors
        scale = keys["context_length"] / rp["original_max_position_embeddings"]
        rt = rp.get("rope_type", "").lower()
        if rt in ("su", "longrope"):
            af = math.sqrt(1 + math.log(scale) / math.log(rp["original_max_position_embeddings"])) if scale > 1 else 1.0
        else:
            af = 0.1 * math.log(scale) + 1.0 if scale > 1 else 1.0
        keys["rope.scaling.attn_factor"] = af
        t["rope_factors_long"] = [f32(x) for x in rp["long_factor"]]
        t["rope_factors_short"] = [f32(x) for x in rp["short_factor"]]
    return "phi3", "neox", "hf", "conversion/phi.py Phi3MiniModel.set_gguf_parameters, generate_extra_tensors (no super(): no rope.scaling.type)"


def conv_plain(arch, rope_type, cite, n_rot=None):
    def conv(hp, rp, keys, t):
        generic_keys(hp, rp, keys)
        if n_rot is not None:
            keys["rope.dimension_count"] = n_rot(hp, rp)
        return arch, rope_type, "hf", cite
    return conv


def conv_qwen35(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    keys["rope.dimension_count"] = int(head_dim_of(hp) * rp.get("partial_rotary_factor", 0.25))
    keys.setdefault("rope.dimension_sections", [11, 11, 10, 0])
    return "qwen35", "imrope", "hf", "conversion/qwen.py Qwen3_5TextModel (Qwen3NextModel.set_gguf_parameters, _Qwen35MRopeMixin)"


def conv_cohere(hp, rp, keys, t):
    hp["max_position_embeddings"] = find(hp, ["model_max_length", "max_position_embeddings"])
    generic_keys(hp, rp, keys)
    keys["rope.scaling.type"] = "none"
    return "command-r", "norm", "hf", "conversion/command_r.py CommandR2Model.set_gguf_parameters"


def conv_chatglm(hp, rp, keys, t):
    keys["context_length"] = hp.get("seq_length", hp["hidden_size"])
    rope_dim = hp.get("attention_dim") or hp["hidden_size"] // hp["num_attention_heads"]
    keys["rope.dimension_count"] = int(rope_dim * rp.get("partial_rotary_factor", 0.5))
    keys["rope.freq_base"] = 10000 * hp.get("rope_ratio", 1)
    return "chatglm", "norm", "hf", "conversion/chatglm.py ChatGLMModel.set_gguf_parameters (no super())"


def conv_dbrx(hp, rp, keys, t):
    keys["context_length"] = hp["max_seq_len"]
    keys["rope.freq_base"] = hp["attn_config"]["rope_theta"]
    return "dbrx", "neox", "hf", "conversion/dbrx.py DbrxModel.set_gguf_parameters (no super())"


def conv_gemma3(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    keys["rope.freq_base"] = rp.get("full_attention", rp).get("rope_theta", 1_000_000.0)
    return "gemma3", "neox", "hf", "conversion/gemma.py Gemma3Model.set_gguf_parameters"


def conv_gemma4(hp, rp, keys, t):
    generic_keys(hp, rp, keys)
    keys["rope.freq_base"] = rp.get("full_attention", rp).get("rope_theta", 1_000_000.0)
    full = hp["rope_parameters"]["full_attention"]
    head_full, head_swa = hp["global_head_dim"], hp["head_dim"]
    keys["rope.dimension_count"] = head_full  # "proportional": the rest by rope_freqs
    keys["rope.dimension_count_swa"] = int(head_swa * rp.get("partial_rotary_factor", 1.0))
    n_rot = int(head_full * full["partial_rotary_factor"] / 2)
    t["rope_freqs"] = [1.0] * n_rot + [1e30] * (head_full // 2 - n_rot)  # full layers only
    return "gemma4", "neox", "hf", "conversion/gemma.py Gemma4Model.set_gguf_parameters, generate_extra_tensors"


def conv_phi2(hp, rp, keys, t):
    keys["context_length"] = find(hp, ["n_positions", "max_position_embeddings"])
    keys["rope.dimension_count"] = int(rp["partial_rotary_factor"] * hp["hidden_size"]) // hp["num_attention_heads"]
    return "phi2", "neox", "hf", "conversion/phi.py Phi2Model.set_gguf_parameters (no super(): no rope.freq_base)"


def partial_n_rot(key):
    return lambda hp, rp: int(hp[key] * (hp["hidden_size"] // hp["num_attention_heads"]))


# Keyed by config.json's architectures[0], as conversion/__init__.py finds the converter class
# (ModelBase.register).
CONVERTERS = {
    "LlamaForCausalLM": conv_llama, "MistralForCausalLM": conv_llama, "MixtralForCausalLM": conv_llama,
    "Mistral3ForConditionalGeneration": conv_ministral3,
    "DeepseekV2ForCausalLM": conv_deepseek2, "DeepseekV3ForCausalLM": conv_deepseek2,
    "Exaone4ForCausalLM": conv_exaone4,
    "Glm4vForConditionalGeneration": conv_glm4, "Glm4ForCausalLM": conv_glm4,
    "Glm4MoeForCausalLM": conv_glm4_moe,
    "HunYuanDenseV1ForCausalLM": conv_hunyuan_dense,
    "MiniCPMForCausalLM": conv_minicpm,
    "MiniMaxM2ForCausalLM": conv_minimax_m2,
    "Olmo3ForCausalLM": conv_olmo2, "Olmo2ForCausalLM": conv_olmo2,
    "Phi3ForCausalLM": conv_phi3,
    "QWenLMHeadModel": conv_plain("qwen", "neox", "conversion/qwen.py QwenModel (TextModel.set_gguf_parameters)"),
    "Qwen2ForCausalLM": conv_plain("qwen2", "neox", "conversion/qwen.py Qwen2Model (TextModel.set_gguf_parameters)"),
    "Qwen3ForCausalLM": conv_plain("qwen3", "neox", "conversion/qwen.py Qwen3Model (TextModel.set_gguf_parameters)"),
    "Qwen2VLForConditionalGeneration": conv_plain("qwen2vl", "mrope", "conversion/qwenvl.py Qwen2VLModel (TextModel.set_gguf_parameters)"),
    "Qwen2_5_VLForConditionalGeneration": conv_plain("qwen2vl", "mrope", "conversion/qwenvl.py Qwen2VLModel (TextModel.set_gguf_parameters)"),
    "Qwen3_5ForConditionalGeneration": conv_qwen35,
    "GPTNeoXForCausalLM": conv_plain("gptneox", "neox", "conversion/gptneox.py GPTNeoXModel.set_gguf_parameters",
                                     partial_n_rot("rotary_pct")),
    "StableLmForCausalLM": conv_plain("stablelm", "neox", "conversion/stablelm.py StableLMModel.set_gguf_parameters",
                                      lambda hp, rp: int(rp["partial_rotary_factor"] * (hp["hidden_size"] // hp["num_attention_heads"]))),
    "CohereForCausalLM": conv_cohere,
    "ChatGLMModel": conv_chatglm,
    "DbrxForCausalLM": conv_dbrx,
    "GemmaForCausalLM": conv_plain("gemma", "neox", "conversion/gemma.py GemmaModel.set_gguf_parameters"),
    "Gemma2ForCausalLM": conv_plain("gemma2", "neox", "conversion/gemma.py Gemma2Model.set_gguf_parameters"),
    "Gemma3ForCausalLM": conv_gemma3, "Gemma3ForConditionalGeneration": conv_gemma3,
    "Gemma4ForConditionalGeneration": conv_gemma4,
    "GptOssForCausalLM": conv_plain("gpt-oss", "neox", "conversion/gpt_oss.py GptOssModel (TextModel.set_gguf_parameters)"),
    "InternLM2ForCausalLM": conv_plain("internlm2", "norm", "conversion/internlm.py InternLM2Model.set_gguf_parameters, modify_tensors"),
    "PhiForCausalLM": conv_phi2,
}
# InternLM2 permutes its packed wqkv with LlamaModel.permute (conversion/internlm.py modify_tensors).
PERMUTED = {"InternLM2ForCausalLM"}
NOT_CONVERTED = {
    "MllamaForConditionalGeneration": "no converter class registers MllamaForConditionalGeneration (grep conversion/: none)",
}


# --- the loader ---------------------------------------------------------------------------------

def derive(config, manifest):
    hp, rp = text_hparams(config)
    arch_name = (config.get("architectures") or [""])[0]
    out = {"hf_architecture": arch_name}
    if arch_name in NOT_CONVERTED:
        out["not_converted"] = NOT_CONVERTED[arch_name]
        return out
    if arch_name not in CONVERTERS:
        out["not_converted"] = "no mirror of this architecture's converter in rope_keys.py"
        return out
    keys, tensors = {}, {}
    try:
        arch, rope_type, qk_order, cite = CONVERTERS[arch_name](hp, rp, keys, tensors)
    except NotConverted as e:
        out["not_converted"] = str(e)
        return out
    if arch_name in PERMUTED:
        qk_order = "permute"
    out.update({"arch": arch, "rope_type": rope_type, "qk_order": qk_order, "converter": cite,
                "gguf_keys": {arch + "." + k if k.startswith(("rope", "context", "attention")) else k: v
                              for k, v in keys.items()},
                "gguf_tensors": sorted(tensors), "layer_types": {}})
    for entry in manifest["layer_types"]:
        if entry["rope"]:
            out["layer_types"][entry["layer_type"]] = loader_hparams(arch, rope_type, keys, tensors,
                                                                     entry["layer_type"], hp)
    return out


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: rope_keys.py CONFIG.json MANIFEST.json\n")
        return 2
    with open(argv[1], encoding="utf-8") as f:
        config = json.load(f)
    with open(argv[2], encoding="utf-8") as f:
        manifest = json.load(f)
    json.dump(derive(config, manifest), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
